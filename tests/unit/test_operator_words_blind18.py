"""Words operators typed that the reader did not read, found on blind17's leftovers and the
eighteenth blind pair: each question now reaches the outcome an operator expects (no lake
needed: stage 1's outcome is the check)."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Clarify, Ready, run_stage1

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)


def _outcome(question: str) -> object:
    return run_stage1(read(question, AS_OF)).outcome


def test_too_hot_beside_a_named_temperature_asks_the_threshold() -> None:
    # blind17 E36, blind16 M46: 'hot' became a second, bare 'temperature' beside the named one,
    # which asked which temperature; the temperature is named, the level has no number
    for question in ("which nodes ran too hot on pcie temp 2-3pm jun 1",
                     "which nodes ran too hot on jun 1 (inlet)"):  # fmt: skip
        got = _outcome(question)
        assert isinstance(got, Clarify), got
        assert got.field == "threshold", got
        assert "°C" in got.question, got
    # with nothing named, 'hot' still names the quantity, and asks which temperature
    got = _outcome("which nodes ran too hot 2-3pm jun 1")
    assert isinstance(got, Clarify) and got.field == "metric", got
    # the threshold given, the named temperature is the one filtered
    got = _outcome("which nodes ran too hot on pcie temp 2-3pm jun 1 above 57 C")
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    assert [m.metric for m in plan.metrics] == ["pcie"]


def _groups(question: str) -> list[list[str]]:
    got = _outcome(question)
    assert isinstance(got, Ready), got
    return [list(p.group_by) for p in got.plans]


def test_a_bar_chart_over_named_racks_has_a_bar_per_rack() -> None:
    # analysis8 D07: the five racks were pooled into one mean, and a bar chart of one figure
    # was refused
    question = "bar chart: avg node power for racks 10 thru 14, 6-7pm jun 1, list the means"
    assert _groups(question) == [["rack"]]
    assert _groups("avg node power of racks 10 and 11 as a pie, 6-7pm jun 1") == [["rack"]]
    # without a chart, or said combined, the racks stay one figure taken together
    assert _groups("avg node power for racks 10 thru 14, 6-7pm jun 1") == [[]]
    assert _groups("bar chart: avg node power of racks 10 thru 14 combined, 6-7pm jun 1") == [[]]
