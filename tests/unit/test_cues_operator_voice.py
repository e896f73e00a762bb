"""Cues written the way operators type them (found on the sixth blind set).

'racks with avg inlet temp > 24 °C': a comparison sign is a threshold; '3 coolest nodes by mean
inlet temp': the statistic after 'by' ranks them (it was ranked by the minimum, a different
question).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.reading.rules.cues import _value_filters, level_statistic, read_intent
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [
        ("inlet temp > 24 °C", "gt", 24.0),
        ("power >=1000 W", "ge", 1000.0),
        ("idle <5 %", "lt", 5.0),
        ("power <= 300 W", "le", 300.0),
        # blind8 U33: the comparison after the level, and a level 'hit'
        ("nodes hitting 280 W or more on gpu2", "ge", 280.0),
        ("inlet of 30 °C or higher", "ge", 30.0),
        ("gpu0 utilisation 10 % or less", "le", 10.0),
        ("GPUs that reached 90 °C", "ge", 90.0),
        ("nodes hitting 280 W", "ge", 280.0),
        # blind14 Z28: 'hit 0%' is the floor reached, read as 'at least 0 %' (every reading)
        ("nodes where gpu1 utilisation hit 0% at some point", "le", 0.0),
        # blind8 U28: 'never went above' is every reading at or below the level
        ("nodes that never went above 10% gpu0 utilisation", "le", 10.0),
        ("never dropped below 20 °C", "ge", 20.0),
    ],
)
def test_comparison_signs_are_thresholds(text: str, op: str, value: float) -> None:
    (flt,) = _value_filters(text)
    assert (flt.op, flt.value) == (op, value)


def test_an_arrow_is_no_threshold() -> None:
    assert _value_filters("node 5 -> 5 W") == []


def test_the_statistic_after_by_ranks_the_coolest() -> None:
    rank = read_intent("3 coolest nodes by mean inlet temp").rank
    assert rank is not None
    assert (rank.k, rank.fn, rank.desc) == (3, "avg", False)
    # blind14 Z21: the statistic in brackets after the noun ranked nothing (the minimum did)
    rank = read_intent("the 3 lowest racks (mean inlet) first thing in the morning").rank
    assert rank is not None
    assert (rank.k, rank.noun, rank.fn, rank.desc) == (3, "rack", "avg", False)


@pytest.mark.parametrize(
    "text",
    ["average power of each of its GPUs", "gpu power for all four gpus separately",
     "gpu power gpu by gpu"],
)  # fmt: skip
def test_each_of_its_gpus_is_one_figure_per_gpu(text: str) -> None:
    # blind7 T13: one average pooled over the four GPUs was returned
    assert "gpu" in read_intent(text).groups


def test_the_gpus_pooled_stay_one_figure() -> None:
    assert "gpu" not in read_intent("average power of its GPUs").groups


@pytest.mark.parametrize(
    ("text", "phrase"),
    [("how many nodes had a GPU drawing more than 285 W this morning 9-10", "gpu power"),
     ("nodes whose cpu drew more than 150 W", "cpu power"),
     ("which nodes drew more than 1600 W", "node power")],
)  # fmt: skip
def test_a_part_named_as_a_word_qualifies_the_unit(text: str, phrase: str) -> None:
    # blind4 B22 completed count_node = 980 from the nodes' total power, not their GPUs'
    assert [p.text for p in chunk(text, extract_entities(text)).phrases] == [phrase]


@pytest.mark.parametrize(
    "text",
    [
        "which nodes had gpu0 utilisation at least 90% on",
        "which nodes had gpu0 utilisation at most 10%",
    ],
)
def test_at_least_and_at_most_rank_nothing(text: str) -> None:
    # 'at most 10 %' once ranked the nodes by their maximum ('most' -> the highest)
    cues = read_intent(text)
    assert (cues.aggs, cues.rank) == ((), None)


def test_never_is_a_level_on_every_reading() -> None:
    assert level_statistic("how many nodes never went above 10% gpu0 utilisation").every


@pytest.mark.parametrize(
    ("question", "level"),
    [
        # 'hitting' was read as part of a metric phrase ('nodes hitting') and asked about
        ("number of nodes hitting 280 W or more on gpu2 between 17:00 and 17:30 on jun 1",
         ("ge", 280.0)),
        # 'most' is no lexicon word ('the most jobs' ranks): the threshold's span claims it
        ("which nodes had gpu0 utilisation at most 10% on 1 june 02:00-03:00", ("le", 10.0)),
    ],
)  # fmt: skip
def test_a_threshold_is_the_plans_level(question: str, level: tuple[str, float]) -> None:
    got = run_stage1(read(question, datetime(2022, 6, 13, 8, tzinfo=UTC)))
    assert isinstance(got.outcome, Ready), got.outcome
    (plan,) = got.outcome.plans
    assert [(f.op, f.value) for f in plan.filters if hasattr(f, "op")] == [level]


@pytest.mark.parametrize(
    ("question", "metric", "value"),
    [
        # blind8 U31 wrote '1.55 kW'; the level was not read and '1.55' was left over
        ("which nodes drew more than 1.6 kW between 10 and 11 on june 1", "total_power", 1600.0),
        ("how many racks had a node topping 1.6 kW on 1 june 10-11", "total_power", 1600.0),
        # data centre power is in kW already: the level stays as stated
        ("readings of data centre power above 700 kW on 1 june 10-11", "Tot", 700.0),
    ],
)
def test_a_kilowatt_level_is_compared_in_the_metrics_unit(
    question: str, metric: str, value: float
) -> None:
    got = run_stage1(read(question, datetime(2022, 6, 13, 8, tzinfo=UTC)))
    assert isinstance(got.outcome, Ready), got.outcome
    (plan,) = got.outcome.plans
    assert [m.metric for m in plan.metrics] == [metric]
    assert [f.value for f in plan.filters if hasattr(f, "value")] == [value]


def test_thresholds_mixing_watts_and_kilowatts_are_refused() -> None:
    got = run_stage1(
        read(
            "which nodes drew more than 800 W and less than 1.6 kW on 1 june 10-11",
            datetime(2022, 6, 13, 8, tzinfo=UTC),
        )
    )
    assert not isinstance(got.outcome, Ready)


@pytest.mark.parametrize(
    "text", ["cpu and gpu hours of m100_usr_prod jobs", "jobs on partition m100_usr_prod"]
)
def test_an_m100_partition_name_alone_selects_its_jobs(text: str) -> None:
    # blind8 U64: 'm100_usr_prod jobs' was a word the analyst could not use
    filters = [(f.field, f.op, f.value) for f in read_intent(text).job_filters]
    assert ("partition", "eq", "m100_usr_prod") in filters


@pytest.mark.parametrize(
    ("text", "partition"),
    [
        ("how many jobs started in the debug partition on june 2", "m100_usr_dbg"),  # blind9 V68
        ("jobs on partition serial yesterday", "m100_all_serial"),
        ("jobs in the prod queue", "m100_usr_prod"),
    ],
)
def test_a_partition_by_its_everyday_name_selects_its_jobs(text: str, partition: str) -> None:
    filters = [(f.field, f.op, f.value) for f in read_intent(text).job_filters]
    assert ("partition", "eq", partition) in filters


def test_a_word_like_debug_alone_is_no_partition() -> None:
    assert not read_intent("debug the power of node 5").job_filters


def test_a_rack_id_before_a_ranking_is_no_top_k() -> None:
    # blind9 V37: 'rack 40 with the highest …' was read as a top 40
    rank = read_intent("node in rack 40 with the highest p0_power peak on june 1").rank
    assert rank is not None and (rank.k, rank.noun, rank.fn) == (1, "node", "max")
    plural = read_intent("nodes in rack 40 with the highest power").rank
    assert plural is None or plural.k != 40
    assert read_intent("the 5 nodes with the highest power").rank.k == 5  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "question",
    ["cpu user of node 12 on 1 June 2022 at 10:00", "cpu user % for nodes 40 and 41 on 1 June"],
)
def test_a_metric_named_by_its_catalogue_name_is_no_entity_reference(question: str) -> None:
    """blind10: 'cpu user' (ganglia cpu_user) ended in 'user', so it was read as the CPUs'
    users and the question answered the nodes' jobs."""
    phrases = [p.text for p in chunk(question, extract_entities(question)).phrases]
    assert phrases == ["cpu user"]
    outcome = run_stage1(read(question, datetime(2022, 6, 15, tzinfo=UTC))).outcome
    assert isinstance(outcome, Ready)
    assert [m.metric for p in outcome.plans for m in p.metrics] == ["cpu_user"]


def test_did_any_node_lists_the_nodes() -> None:
    """blind10: 'did any node in rack 8 hit 180 W … show their max' pooled the rack into one
    maximum; the nodes that crossed are the answer (none: no)."""
    question = "did any node in rack 3 go above 250 W on gpu 0 on 1 June 2022"
    outcome = run_stage1(read(question, datetime(2022, 6, 15, tzinfo=UTC))).outcome
    assert isinstance(outcome, Ready)
    (plan,) = outcome.plans
    assert plan.group_by == ["node"]


def test_the_highest_reading_of_any_node_is_a_statistic_not_a_list() -> None:
    question = "What's the single highest inlet temperature any node in rack 12 reported on 1 June"
    outcome = run_stage1(read(question, datetime(2022, 6, 15, tzinfo=UTC))).outcome
    assert isinstance(outcome, Ready)
    (plan,) = outcome.plans
    assert plan.group_by == [] and [a.fn for a in plan.aggregations] == ["max"]


def test_each_gpu_across_nodes_is_one_figure_per_gpu_index() -> None:
    """analysis1: 'mean power of each gpu (gpu0..gpu3) across nodes 0-99' gave one figure per
    GPU of every node (400 rows); the nodes are pooled, one figure per GPU index."""
    question = "mean power of each gpu across nodes 0-99 from 14:00 to 16:00 on 1 June 2022"
    outcome = run_stage1(read(question, datetime(2022, 6, 15, tzinfo=UTC))).outcome
    assert isinstance(outcome, Ready)
    (plan,) = outcome.plans
    assert plan.group_by == ["metric"] and len(plan.metrics) == 4
