"""The SPARQL validator: a passing and a failing query per rule, diagnostics, examples, mutants."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyoxigraph
import pytest
import yaml
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery

from oda_analyst.ontology.model import OntologyModel, load_ontology
from oda_analyst.sparql.diagnostics import CODES, ValidationReport
from oda_analyst.sparql.grammar import parse_tree, strip_comments
from oda_analyst.sparql.validator import validate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from mutants import KINDS, Gold, generate  # noqa: E402

GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/test"
M = "https://w3id.org/oda-analyst/m100/"
PREFIXES = """PREFIX oda: <https://w3id.org/oda-analyst/ontology#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""
READINGS = f"""
  ?sensor oda:observes <{M}node/900> ;
          oda:observesMetric <{M}metric/ipmi/total_power> .
  ?r oda:fromSensor ?sensor ; oda:timestamp ?ts ; oda:value ?v .
"""
GROUPED = f"""
  ?node oda:nodeId ?node_id .
  ?sensor oda:observes ?node ; oda:observesMetric <{M}metric/ipmi/total_power> .
  ?r oda:fromSensor ?sensor ; oda:timestamp ?ts ; oda:value ?v .
"""
EXAMPLES = yaml.safe_load((ROOT / "ontology" / "examples" / "examples.yaml").read_text())[
    "examples"
]


@pytest.fixture(scope="module")
def model() -> OntologyModel:
    return load_ontology()


def check(body: str, model: OntologyModel, graph: str | None = GRAPH) -> ValidationReport:
    return validate(PREFIXES + body, model=model, allowed_graph=graph)


def codes(report: ValidationReport) -> set[str]:
    return {d.code for d in report.errors}


# One (rule, passing query, failing query) per rejection rule. --------------------------------
RULES = [
    (
        "syntax",
        f"SELECT ?v WHERE {{ {READINGS} }}",
        f"SELECT ?v WHERE {{ {READINGS} ",
    ),
    (
        "update_forbidden",
        f"SELECT ?v WHERE {{ {READINGS} }}",
        "INSERT DATA { <https://w3id.org/oda-analyst/m100/node/1> oda:nodeId 1 . }",
    ),
    (
        "service_forbidden",
        f"SELECT ?v WHERE {{ {READINGS} }}",
        f"SELECT ?v WHERE {{ SERVICE <http://evil.example/sparql> {{ {READINGS} }} }}",
    ),
    (
        "graph_forbidden",
        f"SELECT ?v FROM <{GRAPH}> WHERE {{ {READINGS} }}",
        f"SELECT ?v FROM <{M}graph/base> WHERE {{ {READINGS} }}",
    ),
    (
        "unknown_class",
        "SELECT ?n WHERE { ?n a oda:ComputeNode }",
        "SELECT ?n WHERE { ?n a oda:ComputeNod }",
    ),
    (
        "unknown_property",
        "SELECT ?s WHERE { ?n a oda:ComputeNode ; oda:hasSensor ?s }",
        "SELECT ?s WHERE { ?n a oda:ComputeNode ; oda:hasSenso ?s }",
    ),
    (
        "unknown_entity",
        f"SELECT ?s WHERE {{ <{M}node/900> oda:hasSensor ?s }}",
        f"SELECT ?s WHERE {{ <{M}nodes/900> oda:hasSensor ?s }}",
    ),
    (
        "domain_violation",
        "SELECT ?m WHERE { ?s a oda:Sensor ; oda:observesMetric ?m }",
        "SELECT ?m WHERE { ?n a oda:ComputeNode ; oda:observesMetric ?m }",
    ),
    (
        "range_violation",
        f"SELECT ?s WHERE {{ ?s oda:observesMetric <{M}metric/ipmi/ambient> }}",
        f"SELECT ?s WHERE {{ ?s oda:observesMetric <{M}node/900> }}",
    ),
    (
        "datatype_violation",
        "SELECT ?n WHERE { ?n oda:nodeId 900 }",
        'SELECT ?n WHERE { ?n oda:nodeId "900" }',
    ),
    (
        "filter_datatype_violation",
        f'SELECT ?v WHERE {{ {READINGS} FILTER(?ts >= "2022-06-01T20:00:00Z"^^xsd:dateTime) }}',
        f'SELECT ?v WHERE {{ {READINGS} FILTER(?ts >= "2022-06-01 20:00") }}',
    ),
    (
        "unbound_projection",
        f"SELECT ?ts ?v WHERE {{ {READINGS} }}",
        f"SELECT ?ts ?value WHERE {{ {READINGS} }}",
    ),
    (
        "unbound_filter_variable",
        f"SELECT ?v WHERE {{ {READINGS} FILTER(?v > 100) }}",
        f"SELECT ?v WHERE {{ {READINGS} FILTER(?value > 100) }}",
    ),
    (
        "disconnected_pattern",
        f"SELECT ?v ?id WHERE {{ {READINGS} <{M}node/900> oda:nodeId ?id }}",
        f"SELECT ?v ?id WHERE {{ {READINGS} ?job oda:jobId ?id }}",
    ),
    (
        "ungrouped_projection",
        f"SELECT ?node_id (AVG(?v) AS ?a) WHERE {{ {GROUPED} }} GROUP BY ?node_id",
        f"SELECT ?node_id (AVG(?v) AS ?a) WHERE {{ {GROUPED} }} GROUP BY ?node",
    ),
    (
        "disjoint_types",
        "SELECT ?n WHERE { ?n a oda:ComputeNode ; oda:nodeId ?id }",
        "SELECT ?n WHERE { ?n a oda:ComputeNode, oda:Rack }",
    ),
]


@pytest.mark.parametrize(("code", "good", "bad"), RULES, ids=[r[0] for r in RULES])
def test_rule_passes_and_fails(code: str, good: str, bad: str, model: OntologyModel) -> None:
    assert code in CODES
    passing = check(good, model)
    assert passing.ok, passing.to_dict()
    failing = check(bad, model)
    assert not failing.ok
    assert code in codes(failing), failing.to_dict()


def test_every_code_has_a_rule_test() -> None:
    tested = {r[0] for r in RULES}
    assert CODES - tested == {"unbound_bind_variable"}  # a warning, covered below


def test_diagnostic_carries_pattern_and_nearest_property(model: OntologyModel) -> None:
    report = check("SELECT ?s WHERE { ?n a oda:ComputeNode ; oda:hasSenso ?s }", model)
    (diag,) = report.errors
    assert diag.code == "unknown_property"
    assert "oda:hasSenso" in diag.message
    assert diag.pattern == "?n oda:hasSenso ?s ."
    assert diag.suggestion is not None and diag.suggestion.startswith("oda:hasSensor")


def test_suggestions_respect_the_subject_type(model: OntologyModel) -> None:
    # oda:hasNod is close to hasNode (domain Rack) but the subject is a ComputeNode.
    report = check("SELECT ?x WHERE { ?n a oda:ComputeNode ; oda:hasNod ?x }", model)
    (diag,) = report.errors
    assert diag.suggestion is not None and "oda:hasNode" not in diag.suggestion


def test_unknown_class_suggests_nearest(model: OntologyModel) -> None:
    (diag,) = check("SELECT ?n WHERE { ?n a oda:ComputeNod }", model).errors
    assert diag.suggestion == "oda:ComputeNode"


def test_syntax_error_has_line_and_column(model: OntologyModel) -> None:
    report = check("SELECT ?n WHERE {\n  ?n a oda:ComputeNode\n  FILTER(?n = )\n}", model)
    (diag,) = report.errors
    assert diag.code == "syntax"
    assert diag.line == 6 and diag.column is not None


def test_prefixed_name_with_slash_gets_a_hint(model: OntologyModel) -> None:
    report = check(
        f"PREFIX m100: <{M}>\nSELECT ?s WHERE {{ m100:node/900 oda:hasSensor ?s }}", model
    )
    (diag,) = report.errors
    assert diag.code == "syntax" and diag.suggestion and "full IRI" in diag.suggestion


def test_undeclared_prefix_is_a_syntax_error(model: OntologyModel) -> None:
    report = validate("SELECT ?n WHERE { ?n a oda:ComputeNode }", model=model)
    assert codes(report) == {"syntax"}
    assert "PREFIX oda:" in (report.errors[0].suggestion or "")


@pytest.mark.parametrize(
    "update",
    [
        "DELETE WHERE { ?s oda:nodeId ?o }",
        "LOAD <http://evil.example/x.ttl>",
        "CLEAR ALL",
        f"DROP GRAPH <{M}graph/base>",
        f"CREATE GRAPH <{M}graph/evil>",
        f"COPY DEFAULT TO <{M}graph/evil>",
        f"SELECT ?v WHERE {{ {READINGS} }} ;\nINSERT DATA {{ <{M}node/1> oda:nodeId 1 }}",
    ],
)
def test_every_update_form_is_rejected(update: str, model: OntologyModel) -> None:
    assert "update_forbidden" in codes(check(update, model))


def test_graph_clause_needs_the_allowed_graph(model: OntologyModel) -> None:
    own = f"SELECT ?v WHERE {{ GRAPH <{GRAPH}> {{ {READINGS} }} }}"
    assert check(own, model).ok
    assert check(own, model).graphs == (GRAPH,)
    assert "graph_forbidden" in codes(check(own, model, graph=None))
    variable = f"SELECT ?v WHERE {{ GRAPH ?g {{ {READINGS} }} }}"
    assert "graph_forbidden" in codes(check(variable, model))
    named = f"SELECT ?v FROM NAMED <{M}graph/cache-meta> WHERE {{ {READINGS} }}"
    assert "graph_forbidden" in codes(check(named, model))


def test_swapped_triple_suggests_swapping(model: OntologyModel) -> None:
    report = check(
        "SELECT ?v WHERE { ?n a oda:ComputeNode . ?s oda:observes ?n . "
        "?s oda:fromSensor ?r . ?r oda:value ?v }",
        model,
    )
    assert {d.pattern for d in report.errors} == {"?s oda:fromSensor ?r ."}
    assert all("swap" in (d.suggestion or "") for d in report.errors)


def test_object_property_with_literal_and_data_property_with_iri(model: OntologyModel) -> None:
    assert "range_violation" in codes(check('SELECT ?j WHERE { ?j oda:runsOn "900" }', model))
    iri_value = f"SELECT ?r WHERE {{ ?r oda:value <{M}node/900> }}"
    assert "range_violation" in codes(check(iri_value, model))
    entity_as_value = "SELECT ?r WHERE { ?r oda:value ?x . ?x oda:nodeId 3 }"
    assert "range_violation" in codes(check(entity_as_value, model))


def test_numeric_promotion_and_ill_typed_literals(model: OntologyModel) -> None:
    assert check("SELECT ?r WHERE { ?r oda:value 652 }", model).ok  # integer where double
    assert "datatype_violation" in codes(check("SELECT ?n WHERE { ?n oda:nodeId 9.5 }", model))
    ill = 'SELECT ?r WHERE { ?r oda:value "abc"^^xsd:double }'
    assert "datatype_violation" in codes(check(ill, model))


def test_filter_comparisons_by_family(model: OntologyModel) -> None:
    numeric = f'SELECT ?v WHERE {{ {READINGS} FILTER(?v > "high") }}'
    assert "filter_datatype_violation" in codes(check(numeric, model))
    entity = "SELECT ?n WHERE { ?n oda:nodeId ?id FILTER(?n = 900) }"
    assert "filter_datatype_violation" in codes(check(entity, model))
    in_list = 'SELECT ?j WHERE { ?j oda:jobState ?s FILTER(?s IN ("FAILED", 3)) }'
    assert "filter_datatype_violation" in codes(check(in_list, model))
    cast = f'SELECT ?v WHERE {{ {READINGS} FILTER(?ts < xsd:dateTime("2022-06-02T00:00:00Z")) }}'
    assert check(cast, model).ok
    having = (
        f"SELECT ?sensor (MAX(?v) AS ?m) WHERE {{ {READINGS} }} GROUP BY ?sensor "
        'HAVING (MAX(?v) > "2022-06-01T00:00:00Z"^^xsd:dateTime)'
    )
    assert "filter_datatype_violation" in codes(check(having, model))


def test_filters_inside_not_exists_are_checked(model: OntologyModel) -> None:
    body = (
        "SELECT ?n WHERE { ?n oda:nodeId ?id . FILTER NOT EXISTS { ?j oda:runsOn ?n ; "
        "oda:endTime ?e . FILTER(?e > {lit}) } }"
    )
    assert check(body.replace("{lit}", '"2022-06-01T00:00:00Z"^^xsd:dateTime'), model).ok
    bad = check(body.replace("{lit}", '"2022-06-01"'), model)
    assert codes(bad) == {"filter_datatype_violation"}


def test_unbound_variables_in_aggregates_and_expressions(model: OntologyModel) -> None:
    agg = "SELECT ?n (AVG(?v) AS ?a) WHERE { ?n oda:hasSensor ?s } GROUP BY ?n"
    assert "unbound_projection" in codes(check(agg, model))
    expr = f"SELECT (STR(?nothing) AS ?x) WHERE {{ {READINGS} }}"
    assert "unbound_projection" in codes(check(expr, model))
    count_all = f"SELECT (COUNT(*) AS ?n) WHERE {{ {READINGS} }}"
    assert check(count_all, model).ok
    bind = f"SELECT ?v WHERE {{ {READINGS} BIND(?nothing + 1 AS ?x) }}"
    report = check(bind, model)
    assert report.ok and "unbound_bind_variable" in {d.code for d in report.diagnostics}


def test_optional_filter_sees_both_sides_and_scopes_hold(model: OntologyModel) -> None:
    ok = "SELECT ?j ?g WHERE { ?j oda:numCPUs ?c . OPTIONAL { ?j oda:numGPUs ?g FILTER(?g > ?c) } }"
    assert check(ok, model).ok
    nested = f"SELECT ?v WHERE {{ {READINGS} {{ FILTER(?v > 1) }} }}"  # ?v not in that group
    assert "unbound_filter_variable" in codes(check(nested, model))


def test_connectedness_across_optional_union_and_minus(model: OntologyModel) -> None:
    optional = f"SELECT ?v ?l WHERE {{ {READINGS} OPTIONAL {{ ?sensor rdfs:label ?l }} }}"
    assert check(optional, model).ok
    loose = f"SELECT ?v ?l WHERE {{ {READINGS} OPTIONAL {{ ?x rdfs:label ?l }} }}"
    assert "disconnected_pattern" in codes(check(loose, model))
    union = (
        "SELECT ?s WHERE { ?n oda:nodeId 900 . { ?s oda:observes ?n } UNION "
        "{ ?n oda:hasGPU ?g . ?s oda:observes ?g } }"
    )
    assert check(union, model).ok
    split_branch = "SELECT ?s WHERE { ?n oda:nodeId 900 . { ?s oda:observes ?n . ?j oda:jobId 1 } }"
    assert "disconnected_pattern" in codes(check(split_branch, model))
    minus = "SELECT ?n WHERE { ?n oda:nodeId ?id MINUS { ?j oda:jobId 3 } }"
    assert "disconnected_pattern" in codes(check(minus, model))


def test_union_branches_are_typed_separately(model: OntologyModel) -> None:
    body = "SELECT ?e WHERE { ?s oda:observes ?e . { ?e a oda:GPU } UNION { ?e a oda:CPU } }"
    assert check(body, model).ok


def test_sub_select_projects_its_types(model: OntologyModel) -> None:
    sub = "{ SELECT ?job WHERE { ?job a oda:Job } LIMIT 3 }"
    assert check(f"SELECT ?job ?n WHERE {{ {sub} ?job oda:runsOn ?n }}", model).ok
    swapped = check(f"SELECT ?job ?n WHERE {{ {sub} ?n oda:runsOn ?job }}", model)
    assert {"domain_violation", "range_violation"} & codes(swapped)


def test_property_paths(model: OntologyModel) -> None:
    assert check(
        "SELECT ?m WHERE { ?n oda:nodeId 900 ; oda:hasSensor/oda:observesMetric ?m }", model
    ).ok
    wrong = check(
        "SELECT ?m WHERE { ?n oda:nodeId 900 ; oda:observesMetric/oda:hasSensor ?m }", model
    )
    assert "domain_violation" in codes(wrong)
    inverse = "SELECT ?s WHERE { ?n oda:nodeId 900 ; ^oda:observes ?s . ?s oda:entityKey ?k }"
    assert check(inverse, model).ok


@pytest.mark.parametrize("text", ["", "hello", "SELECT", "}}}", "PREFIX x: <y>", "\x00\xff"])
def test_never_raises_on_garbage(text: str, model: OntologyModel) -> None:
    report = validate(text, model=model)
    assert not report.ok
    assert json.dumps(report.to_dict())


def test_report_shape(model: OntologyModel) -> None:
    report = check(f"SELECT ?ts ?v FROM <{GRAPH}> WHERE {{ {READINGS} }}", model)
    assert report.ok and report.query_form == "SELECT"
    assert report.variables == ("ts", "v") and report.graphs == (GRAPH,)
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


# Grouping: what a grouped query reads must be grouped or aggregated. -------------------------

# (projection and solution modifiers, GROUP BY included): Oxigraph runs every one of these.
GROUPED_OK = [
    "SELECT ?node_id (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id",
    "SELECT (COUNT(*) AS ?n) WHERE { B }",
    "SELECT ?node_id (MAX(?v) AS ?m) WHERE { B } GROUP BY ?node_id HAVING (MAX(?v) > 300) "
    "ORDER BY DESC(?m) ?node_id",
    "SELECT (STR(?node_id) AS ?label) (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id",
    "SELECT ?key (COUNT(*) AS ?n) WHERE { B } GROUP BY (STR(?node_id) AS ?key)",
    "SELECT ?node_id (COUNT(*) AS ?n) WHERE { B } GROUP BY (?node_id)",
    "SELECT (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node ORDER BY ?node",
    "SELECT ?node_id (SAMPLE(?ts) AS ?any_ts) (COUNT(*) AS ?n) WHERE { B } GROUP BY ?node_id",
    "SELECT ?node_id ?m WHERE { ?node oda:nodeId ?node_id . "
    "{ SELECT ?node (MAX(?v) AS ?m) WHERE { B } GROUP BY ?node } }",
    "SELECT ?node_id (COUNT(*) AS ?n) WHERE { B FILTER EXISTS { ?sensor oda:observes ?x } } "
    "GROUP BY ?node_id",
]
# (query, the variable the diagnostic names, Oxigraph rejects the query too)
GROUPED_BAD = [
    ("SELECT ?node_id (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node", "node_id", True),
    ("SELECT ?node_id (AVG(?v) AS ?a) WHERE { B }", "node_id", True),
    ("SELECT DISTINCT ?node_id ?ts (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id", "ts", True),
    ("SELECT (STR(?ts) AS ?t) (COUNT(*) AS ?n) WHERE { B } GROUP BY ?node_id", "ts", True),
    ("SELECT (STR(?node_id) AS ?s) (COUNT(*) AS ?n) WHERE { B } GROUP BY STR(?node_id)",
     "node_id", True),
    ("SELECT ?node_id (COUNT(*) AS ?n) WHERE { B } GROUP BY (STR(?node_id) AS ?key)",
     "node_id", True),
    ("SELECT (AVG(?v) AS ?a) (?a * 2 AS ?twice) WHERE { B } GROUP BY ?node", "a", True),
    ("SELECT * WHERE { B } GROUP BY ?node", None, True),
    ("ASK { B } GROUP BY ?node", None, True),
    ("SELECT ?node ?m WHERE { { SELECT ?node ?ts (MAX(?v) AS ?m) WHERE { B } GROUP BY ?node } }",
     "ts", True),
    # Oxigraph runs these, but the variable is unbound where it is read: HAVING drops every
    # group, ORDER BY orders nothing (and rdflib would read SAMPLE(?v) instead).
    ("SELECT ?node_id (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id HAVING (?v > 300)", "v", False),
    ("SELECT ?node_id (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id HAVING (?a > 300)", "a", False),
    ("SELECT ?node_id (AVG(?v) AS ?a) WHERE { B } GROUP BY ?node_id ORDER BY DESC(?ts)", "ts",
     False),
]  # fmt: skip


def _oxigraph_accepts(text: str) -> bool:
    try:
        pyoxigraph.Store().query(text)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("body", GROUPED_OK)
def test_grouped_queries_that_group_what_they_read_pass(body: str, model: OntologyModel) -> None:
    text = PREFIXES + body.replace(" B ", GROUPED)
    report = validate(text, model=model)
    assert report.ok, report.to_dict()
    assert _oxigraph_accepts(text)


@pytest.mark.parametrize(("body", "var", "oxigraph_rejects"), GROUPED_BAD)
def test_ungrouped_reads_are_rejected(
    body: str, var: str | None, oxigraph_rejects: bool, model: OntologyModel
) -> None:
    text = PREFIXES + body.replace(" B ", GROUPED)
    report = validate(text, model=model)
    # the grouping diagnostic names the cause; no misleading "unbound" report beside it
    assert codes(report) == {"ungrouped_projection"}, report.to_dict()
    (diag, *_) = report.errors
    assert diag.suggestion
    if var is not None:
        assert f"?{var}" in diag.message and f"?{var}" in (diag.pattern or "")
    assert _oxigraph_accepts(text) is not oxigraph_rejects


def test_ungrouped_projection_suggests_group_by_or_sample(model: OntologyModel) -> None:
    body = f"SELECT ?node_id (AVG(?v) AS ?a) WHERE {{ {GROUPED} }} GROUP BY ?node"
    (diag,) = check(body, model).errors
    assert diag.pattern == "SELECT … ?node_id …"
    assert diag.suggestion is not None
    assert "add ?node_id to GROUP BY" in diag.suggestion and "SAMPLE(?node_id)" in diag.suggestion
    fixed = body.replace("GROUP BY ?node", "GROUP BY ?node ?node_id")
    assert check(fixed, model).ok
    sampled = body.replace("?node_id (AVG", "(SAMPLE(?node_id) AS ?node_id_sample) (AVG")
    assert check(sampled, model).ok


def test_rdflib_alone_would_hide_the_ungrouped_variable() -> None:
    # Why the rule reads the parse tree: rdflib's algebra turns ?node_id into SAMPLE(?node_id).

    text = PREFIXES + f"SELECT ?node_id (AVG(?v) AS ?a) WHERE {{ {GROUPED} }} GROUP BY ?node"
    algebra = translateQuery(parseQuery(text)).algebra
    assert "Aggregate_Sample" in str(algebra)


# Fast parsing must not change what rdflib's parser accepts. ----------------------------------


def test_comment_stripping_keeps_iris_and_strings() -> None:
    text = 'SELECT ?x # note\nWHERE { ?x <http://a#b> "#no" } # end'
    stripped = strip_comments(text)
    assert "<http://a#b>" in stripped and '"#no"' in stripped and "note" not in stripped
    assert len(stripped) == len(text)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_fast_grammar_matches_rdflib(example: dict[str, str]) -> None:
    text = "# leading comment\n" + example["sparql"]
    assert str(parse_tree(text)) == str(parseQuery(text))


# Curated examples. ---------------------------------------------------------------------------


def test_examples_cover_the_paper_questions() -> None:
    assert len(EXAMPLES) >= 20
    assert {e.get("paper") for e in EXAMPLES} >= {f"Q{i}" for i in range(1, 15)}
    assert len({e["id"] for e in EXAMPLES}) == len(EXAMPLES)
    assert all(e["question"].strip() and e["sparql"].strip() for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_example_is_valid(example: dict[str, str], model: OntologyModel) -> None:
    text = example["sparql"]
    report = validate(text, model=model, allowed_graph=GRAPH)
    assert report.ok, report.to_dict()
    with_from = text.replace("\nWHERE", f"\nFROM <{GRAPH}>\nWHERE", 1)
    assert validate(with_from, model=model, allowed_graph=GRAPH).ok
    list(pyoxigraph.Store().query(text))  # Oxigraph parses and runs it too


# The benchmark's mutants: the test suite guards its logic too. -------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_mutant_sample_is_rejected(kind: str, model: OntologyModel) -> None:
    golds = [Gold(e["id"], e["sparql"]) for e in EXAMPLES]
    mutants = generate(golds, kind, 25, model, seed=3)
    assert len(mutants) == 25
    violating = [m for m in mutants if m.violating]
    assert violating
    for m in violating:
        report = validate(m.sparql, model=model, allowed_graph=GRAPH)
        assert not report.ok, (m.gold_id, m.note, m.sparql)


def test_mutants_are_deterministic(model: OntologyModel) -> None:
    golds = [Gold(e["id"], e["sparql"]) for e in EXAMPLES[:5]]
    first = generate(golds, "wrong_predicate", 10, model, seed=11)
    assert first == generate(golds, "wrong_predicate", 10, model, seed=11)
