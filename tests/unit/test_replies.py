"""A reply holds every detail it names: 'node 5 on 1 June 8-9' answers 'which window?' and the
nodes at once (one round per detail was asked before), and a reply is read by the reader."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Answer, Clarify, Ready, run_stage1

AS_OF = datetime(2022, 6, 13, tzinfo=UTC)


def test_a_reply_with_the_nodes_and_the_window_completes_in_one_round() -> None:
    reading = read("what was the inlet temperature?", AS_OF)
    asked = run_stage1(reading).outcome
    assert isinstance(asked, Clarify)
    done = run_stage1(reading, answers=[Answer(asked.field, "node 5 on 1 june 2022 from 8 to 9")])
    assert isinstance(done.outcome, Ready)
    (plan,) = done.outcome.plans
    assert plan.window is not None
    assert (plan.window.start.hour, plan.window.end.hour) == (8, 9)
    assert [sel.ids for sel in plan.entities] == [[5]]


def test_entities_named_in_a_window_reply_are_added() -> None:
    reading = read("inlet temperature of node 5", AS_OF)
    asked = run_stage1(reading).outcome
    assert isinstance(asked, Clarify) and asked.field == "time"
    done = run_stage1(reading, answers=[Answer("time", "1 june 2022 8-9, and node 6 too")])
    assert isinstance(done.outcome, Ready)
    assert [sel.ids for p in done.outcome.plans for sel in p.entities] == [[5, 6]]
