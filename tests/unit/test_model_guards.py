"""Guards of the model-backed paths that the real model's runs (bench/model_paths.py) showed
were needed, and the stage selection those runs use (ODA_LLM_STAGES, ODA_LLM_FORCE).

Pure: no server. Each guard test is a regression test for a way a model's well-formed answer
could have completed with a wrong result.
"""

from __future__ import annotations

import pytest

from oda_analyst.errors import ConfigError
from oda_analyst.llm import LLMClient
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import parse_plan
from oda_analyst.reading.types import Intent
from oda_analyst.retriever.grounding.plugin import PluginGuess
from oda_analyst.retriever.model_paths import STAGES
from oda_analyst.retriever.model_paths.crosscheck import figures_differ
from oda_analyst.retriever.model_paths.repair import (
    RepairAttempt,
    RepairOutcome,
    ReviewOutcome,
    check_additive,
)
from oda_analyst.retriever.model_paths.stages import ModelStages, SelectedHooks, parse_stages
from oda_analyst.retriever.stages.stage3 import reviewed_query
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import validate

GRAPH = ns.instance_iri("graph", "vkg", "guards")


# --- a repair may not change what the rows are ------------------------------------------------


def test_a_repair_may_not_add_a_column_to_a_select_distinct() -> None:
    # "which nodes": one row per node; a timestamp column would list a node once per reading.
    which = "SELECT DISTINCT ?node_id WHERE { ?s ?p ?node_id . ?s ?q ?timestamp }"
    widened = "SELECT DISTINCT ?node_id ?timestamp WHERE { ?s ?p ?node_id . ?s ?q ?timestamp }"
    check = check_additive(which, widened)
    assert not check.ok and "SELECT DISTINCT" in check.reason
    plain = which.replace("DISTINCT ", "")
    assert check_additive(plain, widened.replace("DISTINCT ", "")).ok  # one row per solution


def _with_count(sparql: str) -> str:
    """The query with one more aggregate column (an additive repair)."""
    return sparql.replace("SELECT\n", "SELECT\n  (COUNT(?value) AS ?n_more)\n", 1)


def _repaired_by(sparql: str) -> ReviewOutcome:
    attempt = RepairAttempt(1, sparql, sparql, "accepted")
    return ReviewOutcome(sparql, None, RepairOutcome(sparql, True, (attempt,)), ("repaired",))


def test_a_repair_of_a_query_with_post_steps_keeps_the_compiled_query() -> None:
    # The standard deviation and the top 3 are computed after the SPARQL (post steps); a repair
    # that adds a column would have run without them: helper columns, every node, no std.
    plan = parse_plan({
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "ambient"}],
        "entities": [{"kind": "node", "all": True}],
        "window": {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T12:00:00Z"},
        "aggregations": [{"fn": "std"}],
        "group_by": ["node"],
        "order_by": [{"key": "std_value", "desc": True}],
        "limit": 3,
    })  # fmt: skip
    compiled = compile_plan(plan, graph=GRAPH)
    assert [s.op for s in compiled.post] == ["std", "sort", "limit"]
    widened = _with_count(compiled.sparql)
    assert validate(widened, allowed_graph=GRAPH).ok
    report = validate(compiled.sparql, allowed_graph=GRAPH)

    ran, _, notes = reviewed_query(compiled, report, lambda *_: _repaired_by(widened))

    assert ran is compiled and ran.post == compiled.post
    assert any("post-processing steps (std, sort, limit)" in n for n in notes)


def test_a_repair_that_only_adds_a_column_runs_when_there_are_no_post_steps() -> None:
    plan = parse_plan({
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "node", "ids": [900]}],
        "window": {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T09:00:00Z"},
        "aggregations": [{"fn": "avg"}],
    })  # fmt: skip
    compiled = compile_plan(plan, graph=GRAPH)
    assert not compiled.post
    widened = _with_count(compiled.sparql)
    report = validate(compiled.sparql, allowed_graph=GRAPH)
    ran, _, _ = reviewed_query(compiled, report, lambda *_: _repaired_by(widened))
    assert ran.sparql == widened and "n_more" in ran.column_names


# --- ODA_LLM_STAGES / ODA_LLM_FORCE ---------------------------------------------------------------


def test_stage_lists_expand_groups_and_a_forced_stage_is_used() -> None:
    assert parse_stages("all") == frozenset(STAGES)
    assert parse_stages(" grounding , sparql") == {"intent", "decompose", "plugin", "sparql"}
    assert parse_stages("") == parse_stages("none") == frozenset()
    stages = ModelStages.parse("none", "repair")
    assert stages.used == stages.forced == {"repair"} and not stages.grounding
    assert ModelStages().used == frozenset(STAGES) and not ModelStages().forced


def test_an_unknown_stage_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="ODA_LLM_STAGES names 'sparkl'"):
        ModelStages.parse("sparkl")
    with pytest.raises(ConfigError, match="ODA_LLM_FORCE names 'x'"):
        ModelStages.parse("all", "time,x")


def test_hooks_of_stages_not_used_answer_with_the_rules_without_a_call() -> None:
    # A port nothing listens on: any model call would fail and be noted.
    client = LLMClient("http://127.0.0.1:9/v1", "none")
    hooks = SelectedHooks(client, ModelStages.parse("none"))
    weak = Intent("metric", "single", 0.4, None, "rules")
    intent, p = hooks.classify_intent("q", prior=weak, reflection=None)
    assert intent == weak and p >= 0.7  # the grounding loop goes on, as with no model
    assert hooks.decompose("q", cardinality="single", prior=["a b"]) == (["a b"], 0.0)
    assert hooks.classify_plugin("q", prior=PluginGuess("ipmi", 0.5, "rules"),
                                 reflection=None) == ("ipmi", 0.5)  # fmt: skip
    assert hooks.notes == [] and hooks.calls == {"intent": 0, "decompose": 0, "plugin": 0}


# --- forced SPARQL: the model's figures must be the compiled plan's ----------------------------


def _result(columns: tuple[str, ...], rows: list[tuple[object, ...]]) -> ResultSet:
    return ResultSet(columns=columns, rows=tuple(rows), row_count=len(rows))


PLAN_ROWS = _result(("node_id", "avg_value"), [(900, 1510.25), (901, 1498.0)])


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        (_result(("n", "avg"), [(901, 1498.0), (900, 1510.25000000001)]), None),  # renamed
        (_result(("avg", "n", "count"), [(1510.25, "900", 3), (1498.0, "901", 3)]), None),
        (_result(("n", "max"), [(900, 1600.0), (901, 1550.0)]), "no column holds the plan's "
         "avg_value"),  # another statistic
        (_result(("n", "avg"), [(900, 1510.25)]), "1 row(s) where the plan gives 2"),
        (_result(("avg",), [(1510.25,), (1498.0,)]), "no column holds the plan's node_id"),
    ],
    ids=["renamed-reordered", "extra-column", "other-statistic", "fewer-rows", "no-node"],
)  # fmt: skip
def test_model_figures_are_compared_with_the_plans(model: ResultSet, problem: str | None) -> None:
    assert figures_differ(PLAN_ROWS, model) == problem
