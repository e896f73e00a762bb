"""'Which users …', 'who …' over the jobs of a window are the jobs' users, each with their jobs'
figures (blind8 U49/U52, blind7 T41/T44, blind4 B34/B35: refused as 'asks who, and the plan gives
no users', or for the word 'most')."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.ontology.plan import QueryPlan, parse_plan
from oda_analyst.reading.read import read
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.retriever.stages.stage1 import Ready, _dropped_entities, run_stage1

AS_OF = datetime(2022, 6, 12, 9, tzinfo=UTC)


def _plan(question: str) -> QueryPlan:
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    return plan


@pytest.mark.parametrize(
    ("question", "aggs", "event"),
    [
        ("which users ran jobs on june 9", ["count_job"], "running"),
        ("which users had jobs time out between 18:00 and 20:00 on 9 june", ["count_job"], "ended"),
    ],
)
def test_the_users_of_the_jobs_each_with_their_count(
    question: str, aggs: list[str], event: str
) -> None:
    plan = _plan(question)
    assert plan.group_by == ["user"]
    assert [a.column for a in plan.aggregations] == aggs
    assert plan.job_event == event


@pytest.mark.parametrize(
    ("question", "key", "k"),
    [
        ("which user ran the most jobs on june 6", "count_job", 1),
        ("who ran the most jobs on the 9th? top 5 pls", "count_job", 5),
        ("users who ran the most jobs between 1 and 7 june, top 3", "count_job", 3),
        ("who burned the most cpu hours on the 6th? top 5", "sum_cpu_hours", 5),
    ],
)
def test_the_users_ranked_by_what_the_question_ranks(question: str, key: str, k: int) -> None:
    plan = _plan(question)
    assert plan.group_by == ["user"]
    assert plan.order_by[0].key == key and plan.order_by[0].desc
    assert plan.limit == k


def test_the_users_of_ranked_jobs_are_not_every_user() -> None:
    # the users of the 3 longest jobs: a per-user count of all jobs would answer another question
    got = run_stage1(read("who ran the 3 longest jobs on june 6", AS_OF)).outcome
    assert not isinstance(got, Ready)


@pytest.mark.parametrize(
    "question",
    ["who had jobs on rack 10 between 11 and 12 on june 1",
     "how many jobs ran on rack 10 between 11 and 12 on june 1"],
)  # fmt: skip
def test_a_racks_jobs_are_the_jobs_of_its_nodes(question: str) -> None:
    # blind4 B37: the jobs plan dropped the rack, and counted (listed the users of) every job
    plan = _plan(question)
    node = plan.selector("node")
    assert node is not None and list(node.ids) == list(range(200, 220))


def test_a_plan_that_drops_a_named_entity_is_caught() -> None:
    # the guard behind the rack fix: an entity span claims its words whatever the plan does
    every_job = parse_plan({"target": "jobs", "entities": [{"kind": "job", "all": True}],
                            "window": {"start": "2022-06-01T11:00:00Z",
                                       "end": "2022-06-01T12:00:00Z"},
                            "aggregations": [{"fn": "count", "of": "job"}]})  # fmt: skip
    named = extract_entities("how many jobs ran on rack 10 and node 3 for user 25000")
    assert _dropped_entities(named, [every_job]) == ["node 3", "rack 10", "user 25000"]
    assert (
        _dropped_entities(
            named,
            [
                _plan(
                    "how many jobs ran on rack 10 and node 3 between "
                    "11 and 12 on june 1 for user 25000"
                )
            ],
        )
        == []
    )


@pytest.mark.parametrize(
    ("question", "user"),
    [
        # blind9 V62, blind6 S47, blind4 B38: counted the machine's 980 nodes (caught by the
        # dropped-entity guard), or refused the jobs listing as 'counts something else'
        ("how many different nodes did user 28838's jobs touch on june 2", 28838),
        ("how many nodes did user 25000's jobs touch on june 2", 25000),
    ],
)
def test_how_many_nodes_a_users_jobs_touched_is_their_distinct_nodes(
    question: str, user: int
) -> None:
    plan = _plan(question)
    assert plan.target == "jobs"
    assert [(a.fn, a.of) for a in plan.aggregations] == [("count", "node")]
    assert [(f.field, f.value) for f in plan.filters] == [("user", user)]


def test_how_many_nodes_of_the_machine_is_still_the_topology() -> None:
    plan = _plan("how many nodes are in rack 3")
    assert plan.target == "entities"
