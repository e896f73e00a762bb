"""Nodes selected by a statistic of their readings: 'nodes whose average was under 20 %'.

Before aggregate filters the planner could only filter each reading ('value lt 20'), so "which
nodes averaged above 1000 W" had no plan and "nodes with pcie above 45 °C, and the max of each"
would have taken the max over the readings above 45 only. An aggregate filter is a HAVING on
each group; these tests hold its plan checks, its SPARQL, its exact merge across time chunks and
the cue that says which statistic a threshold is stated on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oda_analyst.ontology.plan import parse_plan
from oda_analyst.reading.rules.cues import level_statistic, threshold_units
from oda_analyst.reading.types import FormCues, Level
from oda_analyst.retriever.planning.shape import shape
from oda_analyst.retriever.understood import sentence
from oda_analyst.sparql.chunks import PartialTable, plan_chunks
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.post import apply_post

START = datetime(2022, 6, 1, 10, tzinfo=UTC)


def body(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": "readings", "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "node", "all": True}],
        "window": {"start": START.isoformat(), "end": (START + timedelta(hours=1)).isoformat()},
        "aggregations": [{"fn": "avg", "of": "value"}], "group_by": ["node"],
        "filters": [{"about": "aggregate", "fn": "avg", "op": "gt", "value": 1000}],
    }  # fmt: skip
    return base | over


def test_the_compiled_query_keeps_the_groups_passing_the_level() -> None:
    sparql = compile_plan(parse_plan(body()), graph="urn:g").sparql
    assert "GROUP BY ?node_id\nHAVING (AVG(?value) > 1000.0)\n" in sparql
    assert "FILTER(?value" not in sparql  # the readings themselves are all aggregated


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"group_by": []}, "select groups"),
        ({"aggregations": [{"fn": "count", "of": "node"}], "group_by": ["node"]}, "reading"),
        (
            {
                "filters": [
                    {"about": "aggregate", "fn": "avg", "op": "gt", "value": 1000},
                    {"about": "value", "op": "gt", "value": 5},
                ]
            },
            "ambiguous",
        ),
    ],
)
def test_plans_the_compiler_cannot_honour_are_refused(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_plan(body(**over))


def test_chunks_test_the_level_on_the_merged_groups_only() -> None:
    plan = parse_plan(body(window={"start": START.isoformat(),
                                   "end": (START + timedelta(days=1)).isoformat()}))  # fmt: skip
    chunking = plan_chunks(plan, max_span=timedelta(hours=12))
    assert chunking.mode == "partials"
    chunk = chunking.chunk_plan(chunking.windows[0])
    assert chunk.filters == []  # a chunk's average is not the window's
    table = PartialTable(plan)
    cols = ["node_id", "count_value", "sum_value"]
    # node 1: 900 W then 1300 W -> 1100 W over the day (passes; neither chunk alone says so)
    # node 2: 1200 W then 600 W over three times as many readings -> 750 W (fails)
    table.add(cols, [[1, 2, 1800.0], [2, 1, 1200.0]])
    table.add(cols, [[1, 2, 2600.0], [2, 3, 1800.0]])
    _, rows = table.rows()
    assert rows == [[1, pytest.approx(1100.0)]]


# --- how many groups pass: count_groups ---------------------------------------------------------


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"count_groups": True, "filters": []}, "aggregate filter keeps"),
        ({"count_groups": True, "group_by": ["node", "metric"]}, "alone"),
        ({"count_groups": True, "order_by": [{"key": "avg_value", "desc": True}]}, "no order"),
    ],
)
def test_a_count_of_groups_needs_the_groups_an_aggregate_filter_keeps(
    over: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_plan(body(**over))


def test_the_groups_kept_are_counted_after_the_query() -> None:
    compiled = compile_plan(parse_plan(body(count_groups=True, group_by=["rack"])), graph="urn:g")
    assert "GROUP BY ?rack_id\nHAVING (AVG(?value) > 1000.0)" in compiled.sparql
    assert [c.name for c in compiled.columns] == ["count_rack"]
    assert compiled.post[-1].op == "count"
    cols, rows = apply_post(compiled, list(compiled.sparql_columns), [[3, 1100.0], [7, 1200.0]])
    assert (cols, rows) == (["count_rack"], [[2]])
    _, none = apply_post(compiled, list(compiled.sparql_columns), [])
    assert none == [[0]]  # no rack passes: zero racks, not an empty answer


def test_chunks_count_the_merged_groups_that_pass() -> None:
    plan = parse_plan(body(count_groups=True, window={
        "start": START.isoformat(), "end": (START + timedelta(days=1)).isoformat()}))  # fmt: skip
    chunking = plan_chunks(plan, max_span=timedelta(hours=12))
    assert chunking.mode == "partials"
    assert not chunking.chunk_plan(chunking.windows[0]).count_groups
    table = PartialTable(plan)
    cols = ["node_id", "count_value", "sum_value"]
    table.add(cols, [[1, 2, 1800.0], [2, 1, 1200.0], [3, 1, 1500.0]])
    table.add(cols, [[1, 2, 2600.0], [2, 3, 1800.0]])
    assert table.rows() == (["count_node"], [[2]])  # nodes 1 (1100 W) and 3 (1500 W)


def test_shape_counts_the_racks_whose_average_passes() -> None:
    # blind8 U26 'how many racks averaged over 1000 W of node power': refused before
    level = [{"about": "value", "op": "gt", "value": 1000}]
    readings = parse_plan(body(group_by=[], filters=level))
    (plan,), conflict = shape(
        FormCues(counts="rack", how_many=True, level=Level(fn="avg")), [readings]
    )
    assert conflict is None
    assert (plan.count_groups, plan.group_by) == (True, ["rack"])
    assert [(f.fn, f.op, f.value) for f in plan.filters] == [("avg", "gt", 1000.0)]
    assert sentence(plan).startswith("Number of racks whose node power (W) averaged above 1000 W")


def test_the_sentence_says_which_nodes_are_kept() -> None:
    avg = sentence(parse_plan(body()))
    assert avg.endswith("only the nodes whose average is above 1000 W")
    peak = sentence(parse_plan(body(filters=[{"about": "aggregate", "fn": "max", "op": "gt",
                                              "value": 1500}])))  # fmt: skip
    assert peak.endswith("only the nodes with a reading above 1500 W")
    stayed = sentence(parse_plan(body(filters=[{"about": "aggregate", "fn": "max", "op": "lt",
                                                "value": 450}])))  # fmt: skip
    assert stayed.endswith("only the nodes whose readings all stay below 450 W")


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("nodes whose average cpu idle was under 20% between 10 and 11", Level("avg")),
        ("which nodes averaged above 1000 W", Level("avg")),
        ("nodes that peaked above 300 W", Level("max")),
        ("nodes with power above 1000 W on average", Level("avg")),
        ("nodes with pcie temp above 45 °C, and the max of each", Level()),
        ("nodes that stayed below 500 W the whole hour", Level(every=True)),
        # heldout2 G12: the whole machine is every node, not every reading
        ("Across the whole machine, how many nodes saw GPU 2 utilisation drop below 5%", Level()),
        ("nodes with an average power, and the inlet above 30 °C", Level()),
    ],
)
def test_the_statistic_a_threshold_is_stated_on(text: str, level: Level) -> None:
    assert level_statistic(text) == level


def test_threshold_units_as_the_catalogue_spells_them() -> None:
    assert threshold_units("above 45 °C and under 1000 watts") == {"°C", "W"}
    assert threshold_units("gpu at 0 % and idle under 20 percent") == {"%"}
    assert threshold_units("node 900 on 1 June") == frozenset()


def test_a_list_of_nodes_over_a_level_on_their_average_is_shaped_as_such() -> None:
    asked = parse_plan(body(group_by=[], filters=[{"about": "value", "op": "gt", "value": 1000}]))
    (plan,), conflict = shape(FormCues(lists_nodes=True, level=Level("avg")), [asked])
    assert conflict is None
    assert plan.group_by == ["node"] and [f.about for f in plan.filters] == ["aggregate"]
    # without a level statistic: the readings above the level, counted per node
    (plain,), _ = shape(FormCues(lists_nodes=True), [asked.model_copy(update={"aggregations": []})])
    assert [a.fn for a in plain.aggregations] == ["count"]
    assert [f.about for f in plain.filters] == ["value"]


def test_a_level_on_each_nodes_average_keeps_the_nodes_not_the_readings() -> None:
    """'nodes 0-39 with avg GPU1 power below 100 W, show the averages' (no 'which'): the plan
    averaged the readings below 100 W; the level is on each node's average."""
    asked = parse_plan(body(filters=[{"about": "value", "op": "lt", "value": 100}]))
    (plan,), conflict = shape(FormCues(level=Level("avg")), [asked])
    assert conflict is None
    assert [(f.about, getattr(f, "fn", None)) for f in plan.filters] == [("aggregate", "avg")]
    assert plan.group_by == ["node"] and [a.fn for a in plan.aggregations] == ["avg"]


def test_a_level_on_a_pooled_average_is_not_answered_by_filtering_the_readings() -> None:
    asked = parse_plan(body(group_by=[], filters=[{"about": "value", "op": "gt", "value": 100}]))
    _, conflict = shape(FormCues(level=Level("avg")), [asked])
    assert conflict is not None and "avg" in conflict


def test_readings_named_beside_the_level_keep_their_filter() -> None:
    """'average of the readings above 100 W': the average of those readings."""
    asked = parse_plan(body(filters=[{"about": "value", "op": "gt", "value": 100}]))
    (plan,), conflict = shape(FormCues(level=Level("avg"), readings_named=True), [asked])
    assert conflict is None
    assert [f.about for f in plan.filters] == ["value"]
