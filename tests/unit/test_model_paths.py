"""Model-backed retriever paths against the scripted OpenAI-compatible server (loopback).

These tests check protocol and control flow — what is sent, how answers are validated,
reconciled, retried, rejected and accounted — never answer quality: the server replays scripted
replies and no model runs. The pure parts (reconciliation, repair scope, few-shot ranking,
ontology paths) are tested directly.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from rdflib import OWL, RDF, RDFS, URIRef

from oda_analyst.llm import LLMClient, RetryPolicy, TokenLedger
from oda_analyst.ontology.model import build_model, load_ontology_graph
from oda_analyst.ontology.namespaces import ONTOLOGY_NS, metric_iri, node_iri
from oda_analyst.reading.answers import time_of_reply
from oda_analyst.reading.rules.timeparse import parse_time
from oda_analyst.reading.types import Entities, Intent, ParsedWindow, TimeParse
from oda_analyst.retriever.grounding.embeddings import Vectors
from oda_analyst.retriever.grounding.ground import Reflection, ground_metrics
from oda_analyst.retriever.grounding.plugin import PluginGuess
from oda_analyst.retriever.model_paths.completeness import CompletenessReport
from oda_analyst.retriever.model_paths.fewshot import (
    CuratedExample,
    load_examples,
    overlap_scores,
    select_examples,
)
from oda_analyst.retriever.model_paths.grounding_model import LLMGroundingHooks
from oda_analyst.retriever.model_paths.ontology_paths import plugin_classes, traversal_paths
from oda_analyst.retriever.model_paths.prompts import time_messages
from oda_analyst.retriever.model_paths.repair import (
    check_repair_scope,
    repair,
    review_sparql,
    same_query,
)
from oda_analyst.retriever.model_paths.sparql_model import (
    GroundedRequest,
    SparqlGenerationError,
    extract_sparql,
    generate_sparql,
    sparql_prompt,
)
from oda_analyst.retriever.model_paths.time_model import (
    TIME_SCHEMA,
    decide_time,
    model_time,
    reconcile_time,
)
from reading_helpers import said
from scripted_server import ScriptedOpenAIServer, ScriptStep

AS_OF = datetime(2022, 6, 15, 12, 0, tzinfo=UTC)
GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/test"
PREFIXES = (
    "PREFIX oda: <https://w3id.org/oda-analyst/ontology#>\n"
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
)
WHERE = """WHERE {
  VALUES ?node { <https://w3id.org/oda-analyst/m100/node/900> }
  ?sensor oda:observes ?node ;
          oda:observesMetric <https://w3id.org/oda-analyst/m100/metric/ipmi/total_power> .
  ?node oda:nodeId ?nodeId .
  ?r oda:fromSensor ?sensor ;
     oda:timestamp ?ts ;
     oda:value ?power .
  FILTER(?ts >= "2022-06-01T20:00:00Z"^^xsd:dateTime && ?ts < "2022-06-02T00:00:00Z"^^xsd:dateTime)
}"""
VALID = f"{PREFIXES}SELECT ?nodeId ?ts ?power\nFROM <{GRAPH}>\n{WHERE}\nORDER BY ?nodeId ?ts"
AGG = f"{PREFIXES}SELECT (AVG(?power) AS ?avg)\nFROM <{GRAPH}>\n{WHERE}\nLIMIT 10"
AGG_GROUPED = (
    f"{PREFIXES}SELECT ?nodeId (AVG(?power) AS ?avg)\nFROM <{GRAPH}>\n{WHERE}\n"
    "GROUP BY ?nodeId\nLIMIT 10"
)


def window(start: str, end: str, text: str = "") -> ParsedWindow:
    return ParsedWindow(datetime.fromisoformat(start), datetime.fromisoformat(end), text)


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(model="scripted-model") as srv:
        yield srv


def client_for(server: ScriptedOpenAIServer, ledger: TokenLedger | None = None) -> LLMClient:
    return LLMClient(server.base_url, server.model, retry=RetryPolicy(max_retries=0), ledger=ledger)


def sparql_reply(query: str, usage: tuple[int, int] | None = None) -> ScriptStep:
    return ScriptStep.json_reply({"sparql": query}, usage=usage)


# --- time -----------------------------------------------------------------------------------------


def test_reconcile_asks_when_the_rules_and_the_model_read_different_windows() -> None:
    """Never picks silently: a capable model widens what is understood, a weak one can only
    make the analyst ask."""
    question = "Power in the second half of May 2022"
    parser = parse_time(question, as_of=AS_OF)
    assert parser.status == "ok"
    model = TimeParse(
        (window("2022-05-16T00:00:00+00:00", "2022-06-01T00:00:00+00:00", "second half"),), "ok"
    )
    decision = reconcile_time(question, parser, model)
    assert decision.parse.status == "ambiguous" and not decision.parse.windows
    assert decision.parse.candidates == (parser.windows[0], model.windows[0])  # ours first
    assert "2022-05-16" in (decision.parse.message or "") and "disagree" in decision.notes[0]
    agreeing = TimeParse(parser.windows, "ok")
    both = reconcile_time(question, parser, agreeing)
    assert both.source == "both" and both.notes == () and both.parse is parser


def test_a_reply_picks_one_of_the_two_readings() -> None:
    question = "Power of node 5 in the second half of May 2022"
    parser = parse_time(question, as_of=AS_OF)
    model = TimeParse(
        (window("2022-05-16T00:00:00+00:00", "2022-06-01T00:00:00+00:00", "second half"),), "ok"
    )
    asked = reconcile_time(question, parser, model).parse
    picked = time_of_reply("2", AS_OF, asked.candidates)
    assert picked.status == "ok" and picked.windows == model.windows


def test_reconcile_keeps_an_ambiguity_but_puts_the_models_reading_first() -> None:
    question = "power of node 5 on 1/6/2022"
    parser = parse_time(question, as_of=AS_OF)
    assert parser.status == "ambiguous" and len(parser.candidates) == 2
    month_first = parser.candidates[1]
    model = TimeParse((month_first,), "ok")
    decision = reconcile_time(question, parser, model)
    assert decision.parse.status == "ambiguous"
    assert decision.parse.candidates[0] == month_first
    assert set(decision.parse.candidates) == set(parser.candidates)


def test_model_window_used_when_the_parser_finds_none(server: ScriptedOpenAIServer) -> None:
    question = "Average power of node 900 during the fortnight before last"
    assert parse_time(question, as_of=AS_OF).status == "missing"
    answer = {
        "windows": [
            {
                "start": "2022-05-23T00:00:00Z",
                "end": "2022-06-06T00:00:00Z",
                "text": "the fortnight before last",
            }
        ],
        "status": "ok",
        "message": None,
    }
    server.add(ScriptStep.json_reply(answer, usage=(50, 20)))
    ledger = TokenLedger()
    decision = decide_time(client_for(server), question, AS_OF, ledger=ledger)
    assert decision.source == "model"
    # Nothing symbolic confirms the model's reading: the user is asked to confirm it.
    assert decision.parse.status == "ambiguous" and not decision.parse.windows
    assert "a language model read it as" in (decision.parse.message or "")
    [w] = decision.parse.candidates
    assert (w.start.isoformat(), w.end.isoformat()) == (
        "2022-05-23T00:00:00+00:00",
        "2022-06-06T00:00:00+00:00",
    )
    start, end = decision.parse.spans[0]
    assert question[start:end] == "the fortnight before last"
    [body] = server.chat_bodies
    assert body["response_format"]["json_schema"]["schema"] == TIME_SCHEMA
    assert body["response_format"]["json_schema"]["name"] == "time_window"
    # Few-shot: the example answers are the parser's own readings.
    shots = [m for m in body["messages"] if m["role"] == "assistant"]
    assert shots and all(json.loads(m["content"])["status"] in ("ok", "missing") for m in shots)
    assert body["messages"][-1]["content"].endswith(question)
    assert ledger.snapshot()["time"]["total_tokens"] == 70


def test_model_window_not_in_the_question_is_dropped(server: ScriptedOpenAIServer) -> None:
    question = "How many nodes are there in M100?"
    hallucinated = {
        "windows": [
            {"start": "2022-06-01T00:00:00Z", "end": "2022-06-02T00:00:00Z", "text": "1 June"}
        ],
        "status": "ok",
        "message": None,
    }
    server.add(ScriptStep.json_reply(hallucinated))
    decision = decide_time(client_for(server), question, AS_OF)
    assert decision.parse.status == "missing" and decision.source == "parser"
    assert "not in the question" in decision.notes[0]


def test_model_window_whose_phrase_names_an_entity_is_dropped() -> None:
    # SmolLM2 on "how many nodes did job 1036308 get" (blind7 T35): the job, read as a time.
    question = "how many nodes did job 1036308 get"
    parser = parse_time(question, as_of=AS_OF)
    assert parser.status == "missing"
    model = TimeParse(
        (window("2021-09-03T08:00:00+00:00", "2022-06-04T15:07:50+00:00", "Job 1036308"),), "ok"
    )
    decision = reconcile_time(question, parser, model)
    assert decision.parse is parser and decision.source == "parser"
    assert "names a node, rack, job or user, not a time" in decision.notes[0]
    # A phrase beside the entity is still offered for confirmation.
    beside = "how many nodes did job 1036308 get the fortnight before last"
    fortnight = window("2022-05-23T00:00:00+00:00", "2022-06-06T00:00:00+00:00",
                       "the fortnight before last")  # fmt: skip
    offered = reconcile_time(beside, parse_time(beside, as_of=AS_OF), TimeParse((fortnight,), "ok"))
    assert offered.source == "model" and offered.parse.candidates == (fortnight,)


@pytest.mark.parametrize(
    "step",
    [
        ScriptStep.reply("the window is 1 June, I think"),
        ScriptStep.json_reply({"windows": [], "status": "sometimes", "message": None}),
        ScriptStep.json_reply(
            {
                "windows": [
                    {"start": "2022-06-02T00:00:00Z", "end": "2022-06-01T00:00:00Z", "text": "x"}
                ],
                "status": "ok",
                "message": None,
            }
        ),
        ScriptStep.error(400, "bad request"),
    ],
    ids=["not-json", "schema", "end-before-start", "http-400"],
)
def test_model_failure_falls_back_to_the_parser(
    server: ScriptedOpenAIServer, step: ScriptStep
) -> None:
    question = "Inlet temperature of node 900 on 1 June 2022 between 08:00 and 09:00"
    server.add(step)
    ledger = TokenLedger()
    decision = decide_time(client_for(server), question, AS_OF, ledger=ledger)
    assert decision.parse == parse_time(question, as_of=AS_OF)
    assert decision.source == "parser" and "failed" in decision.notes[0]
    assert ledger.snapshot()["time"]["calls"] == 1
    assert model_time(None, question, AS_OF) == decision.parse  # no client: parser only


def test_time_prompt_shows_parser_answers() -> None:
    messages = time_messages("power yesterday", AS_OF)
    first_answer = json.loads(messages[2]["content"])
    assert first_answer["windows"][0]["start"] == "2022-06-01T08:00:00Z"
    assert messages[-1]["content"] == "As of: 2022-06-15T12:00:00Z\nQuestion: power yesterday"


# --- grounding hooks ------------------------------------------------------------------------------

QUESTION = "What was the inlet temperature of node 900 on 1 June 2022?"


def ground(hooks: LLMGroundingHooks) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embeddings: synonyms only
        return ground_metrics(said(QUESTION), model=hooks, use_embeddings=False)


def intent_reply(p: float, metric: bool = True) -> ScriptStep:
    return ScriptStep.json_reply({"metric": metric, "cardinality": "single", "confidence": p})


UNSURE = "anything on node 512?"  # the rules' intent: metric, confidence 0.5


def ground_unsure(hooks: LLMGroundingHooks) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ground_metrics(said(UNSURE), model=hooks, use_embeddings=False)


def test_intent_reflection_retries_then_accepts(server: ScriptedOpenAIServer) -> None:
    server.add(
        intent_reply(0.4),
        intent_reply(0.9),
        ScriptStep.json_reply({"subqueries": ["anything on node 512"], "confidence": 0.3}),
    )
    ledger = TokenLedger()
    hooks = LLMGroundingHooks(client_for(server), ledger=ledger)
    result = ground_unsure(hooks)
    assert result.retries["intent"] == 1 and result.intent.confidence == 0.9
    assert hooks.calls["intent"] == 2 and hooks.calls["decompose"] == 1
    reflected = server.chat_bodies[1]["messages"]
    assert json.loads(reflected[-2]["content"])["confidence"] == 0.4  # its own previous answer
    assert "0.40 is below 0.7" in reflected[-1]["content"]
    # The question names no metric: the model's confident intent does not invent one.
    assert result.status == "failed" and "names no metric" in result.message
    snap = ledger.snapshot()
    assert {k: int(v["calls"]) for k, v in snap.items()} == {"decompose": 1, "intent": 2}


def test_a_confident_rule_intent_is_not_reflected_on_for_an_agreeing_weak_answer(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(
        intent_reply(0.4),
        ScriptStep.json_reply({"subqueries": [QUESTION], "confidence": 0.9}),
        ScriptStep.json_reply({"plugin": "ipmi", "confidence": 0.95}),
    )
    hooks = LLMGroundingHooks(client_for(server))
    result = ground(hooks)
    assert result.status == "ok" and result.metrics() == [("ipmi", "ambient")]
    assert result.retries["intent"] == 0 and result.intent.confidence == 0.9
    assert hooks.calls == {"intent": 1, "decompose": 1, "plugin": 1} and server.remaining == 0
    plugin_body = server.chat_bodies[2]
    enum = plugin_body["response_format"]["json_schema"]["schema"]["properties"]["plugin"]["enum"]
    assert "ipmi" in enum and "slurm" in enum


def test_an_unsure_agreeing_model_leaves_the_rules_reading_after_the_budget(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(
        intent_reply(0.3),
        intent_reply(0.35),
        intent_reply(0.5),
        ScriptStep.json_reply({"subqueries": ["anything on node 512"], "confidence": 0.3}),
    )
    hooks = LLMGroundingHooks(client_for(server))
    result = ground_unsure(hooks)
    assert hooks.calls["intent"] == 3 and result.retries["intent"] == 2  # 1 + max_retries 2
    assert any("confidence 0.50 after 2 reflections" in w for w in result.warnings)
    assert result.intent.confidence == 0.5 and result.intent.reason != "model"
    # Then exactly what the rules alone answer: the question names no metric.
    assert result.status == "failed" and "could not tell" not in result.message


def test_plugin_reflection_then_accept(server: ScriptedOpenAIServer) -> None:
    hooks = LLMGroundingHooks(client_for(server))
    server.add(
        ScriptStep.json_reply({"plugin": "ganglia", "confidence": 0.5}),
        ScriptStep.json_reply({"plugin": "ipmi", "confidence": 0.8}),
    )
    prior = PluginGuess("ipmi", 0.6, "rules")
    first = hooks.classify_plugin("inlet temperature of node 900", prior=prior, reflection=None)
    assert first == ("ganglia", 0.5)
    reflection = Reflection(1, "ganglia", 0.5, "confidence 0.50 is below 0.7")
    second = hooks.classify_plugin(
        "inlet temperature of node 900", prior=prior, reflection=reflection
    )
    assert second == ("ipmi", 0.8)
    messages = server.chat_bodies[1]["messages"]
    assert json.loads(messages[-2]["content"]) == {"confidence": 0.5, "plugin": "ganglia"}
    assert "confidence 0.50 is below 0.7 (attempt 1)" in messages[-1]["content"]


def test_hook_failure_returns_the_prior(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.reply("no idea"), ScriptStep.reply("still no idea"))
    hooks = LLMGroundingHooks(client_for(server), repairs=1)
    prior = Intent("metric", "single", 0.8)
    assert hooks.classify_intent("q", prior=prior, reflection=None) == (prior, 0.8)
    assert len(server.chat_bodies) == 2  # the client's repair turn, then the fallback
    assert hooks.notes and "intent: model failed" in hooks.notes[0]
    server.add(ScriptStep.error(500))
    assert hooks.decompose("q", cardinality="multi", prior=["a", "b"]) == (["a", "b"], 0.0)


# --- few-shot -------------------------------------------------------------------------------------


def test_fewshot_fallback_picks_the_most_similar_examples() -> None:
    examples = load_examples()
    question = "What was the daily average outdoor humidity from the weather plugin in July 2022?"
    picked = select_examples(question, examples, 2)
    assert picked[0].example.id.startswith("weather")
    assert picked[0].score >= picked[1].score
    assert select_examples(question, examples, 2) == picked  # deterministic
    assert select_examples(question, examples, 0) == []


def test_fewshot_ties_keep_file_order_and_scores_are_overlap() -> None:
    pool = [
        CuratedExample("a", "GPU temperature per node", "SELECT 1 {}"),
        CuratedExample("b", "GPU temperature per node", "SELECT 2 {}"),
        CuratedExample("c", "weather humidity", "SELECT 3 {}"),
    ]
    ranked = select_examples("gpu temperatures of each node", pool, 3)
    assert [r.example.id for r in ranked] == ["a", "b", "c"]
    assert ranked[2].score == 0.0
    assert overlap_scores("weather", [e.question for e in pool])[2] > 0


class KeywordEmbedder:
    """A deterministic test embedder: one dimension per synonym group (not a model)."""

    model_id = "keywords"
    groups = (("gpu", "graphics"), ("weather", "outdoor"), ("job",))

    def encode(self, texts: Sequence[str]) -> Vectors:
        rows = [
            [float(any(w in t.lower() for w in group)) + 1e-3 for group in self.groups]
            for t in texts
        ]
        arr = np.asarray(rows, dtype=np.float32)
        norms: Vectors = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / norms


def test_fewshot_uses_the_embedder_when_given() -> None:
    pool = [
        CuratedExample("gpu", "GPU temperature", "S"),
        CuratedExample("weather", "heat of the weather", "S"),
    ]
    question = "graphics heat"
    assert select_examples(question, pool, 1)[0].example.id == "weather"  # shares 'heat'
    by_vectors = select_examples(question, pool, 2, embedder=KeywordEmbedder())
    assert [r.example.id for r in by_vectors] == ["gpu", "weather"]  # 'graphics' ~ 'gpu'
    assert by_vectors[0].score == pytest.approx(1.0, abs=1e-3)


# --- ontology paths -------------------------------------------------------------------------------


def test_traversal_paths_follow_the_ontology() -> None:
    paths = traversal_paths(plugin_classes(["ganglia"]))
    text = paths.render()
    for edge in (
        "ComputeNode −oda:hasGPU→ GPU",
        "Sensor −oda:observes→ GPU",
        "Sensor −oda:observes→ ComputeNode",
        "Reading −oda:fromSensor→ Sensor",
        "Sensor −oda:observesMetric→ Metric",
        "Job −oda:runsOn→ ComputeNode",
    ):
        assert edge in text
    assert "hasSensor" not in text and "contains" not in text and "hasComponent" not in text
    assert (
        "Reading: oda:readingCount xsd:integer, oda:textValue xsd:string, "
        "oda:timestamp xsd:dateTime, oda:value xsd:double" in text
    )
    assert "CRAC" not in text  # not reachable from node metrics in two hops


def test_traversal_paths_are_derived_not_written() -> None:
    graph = load_ontology_graph()
    sink, prop = URIRef(ONTOLOGY_NS + "HeatSink"), URIRef(ONTOLOGY_NS + "hasHeatSink")
    graph.add((sink, RDF.type, OWL.Class))
    graph.add((sink, RDFS.subClassOf, URIRef(ONTOLOGY_NS + "PhysicalEntity")))
    graph.add((prop, RDF.type, OWL.ObjectProperty))
    graph.add((prop, RDFS.domain, URIRef(ONTOLOGY_NS + "GPU")))
    graph.add((prop, RDFS.range, sink))
    text = traversal_paths(["GPU"], model=build_model(graph)).render()
    assert "GPU −oda:hasHeatSink→ HeatSink" in text
    assert "hasHeatSink" not in traversal_paths(["GPU"]).render()


# --- SPARQL by model ------------------------------------------------------------------------------

GROUNDED = GroundedRequest(
    metrics=("total_power",),
    entities=Entities(nodes=(900,)),
    windows=(window("2022-06-01T20:00:00+00:00", "2022-06-02T00:00:00+00:00", "20:00 to 23:59"),),
)
SPARQL_Q = "Retrieve the total power consumption of node 900 on 1 June 2022 from 20:00 to 23:59."


def test_a_valid_query_that_ignores_the_grounded_request_is_fed_back(
    server: ScriptedOpenAIServer,
) -> None:
    # Valid SPARQL about every node and another window: it answers another question.
    other = VALID.replace("VALUES ?node { <https://w3id.org/oda-analyst/m100/node/900> }\n", "")
    other = other.replace("2022-06-01T20:00:00Z", "2022-06-01T08:00:00Z")
    server.add(sparql_reply(other), sparql_reply(VALID))
    out = generate_sparql(client_for(server), question=SPARQL_Q, grounded=GROUNDED, graph_iri=GRAPH)
    assert out.sparql == VALID and [a.ok for a in out.attempts] == [False, True]
    lines = [d.message for d in out.attempts[0].diagnostics]
    assert {d.code for d in out.attempts[0].diagnostics} == {"grounding_unused"}
    assert any("node 900" in m for m in lines) and any("20:00:00Z" in m for m in lines)
    assert "grounding_unused" in server.chat_bodies[1]["messages"][-1]["content"]


def test_invalid_sparql_is_fed_back_then_the_valid_one_accepted(
    server: ScriptedOpenAIServer,
) -> None:
    bad = VALID.replace("oda:value ?power", "oda:hasValue ?power")
    server.add(sparql_reply(bad, usage=(100, 40)), sparql_reply(VALID, usage=(150, 40)))
    ledger = TokenLedger()
    out = generate_sparql(
        client_for(server), question=SPARQL_Q, grounded=GROUNDED, graph_iri=GRAPH, ledger=ledger
    )
    assert out.sparql == VALID and out.report.ok
    assert [a.ok for a in out.attempts] == [False, True]
    assert {d.code for d in out.attempts[0].diagnostics} == {"unknown_property"}
    assert (out.usage.prompt_tokens, out.usage.total_tokens) == (250, 330)
    assert ledger.snapshot()["sparql"]["calls"] == 2
    first, second = server.chat_bodies
    assert first["response_format"]["json_schema"]["name"] == "sparql"
    prompt = first["messages"][1]["content"]
    assert f"<{metric_iri('ipmi', 'total_power')}>" in prompt
    assert f"<{node_iri(900)}>" in prompt
    assert "Sensor −oda:observes→ ComputeNode" in prompt
    assert '"2022-06-01T20:00:00Z"^^xsd:dateTime' in prompt
    assert len(out.examples) == 3
    assert f"Graph: <{GRAPH}>" in prompt and GRAPH not in first["messages"][0]["content"]
    feedback = second["messages"][-1]["content"]
    assert second["messages"][-2]["content"] == json.dumps({"sparql": bad})
    assert "[unknown_property] oda:hasValue is not a property of the ontology" in feedback
    assert "suggestion: oda:value" in feedback


def test_prompt_carries_the_selected_examples(server: ScriptedOpenAIServer) -> None:
    server.add(sparql_reply(VALID))
    out = generate_sparql(
        client_for(server), question=SPARQL_Q, grounded=GROUNDED, graph_iri=GRAPH, examples_k=2
    )
    prompt = server.chat_bodies[0]["messages"][1]["content"]
    chosen = {e.id: e for e in load_examples()}
    assert len(out.examples) == 2
    for ex_id in out.examples:
        assert chosen[ex_id].question in prompt
    assert out.examples[0] == "node-power-window"  # the same question shape ranks first


def test_retry_budget_exhaustion_is_a_typed_error(server: ScriptedOpenAIServer) -> None:
    ask = VALID.replace(f"SELECT ?nodeId ?ts ?power\nFROM <{GRAPH}>", f"ASK\nFROM <{GRAPH}>")
    ask = ask.replace("ORDER BY ?nodeId ?ts", "")
    server.add(ScriptStep.reply("I cannot write SPARQL"), sparql_reply(ask))
    with pytest.raises(SparqlGenerationError) as caught:
        generate_sparql(
            client_for(server), question=SPARQL_Q, grounded=GROUNDED, graph_iri=GRAPH,
            max_attempts=2,
        )  # fmt: skip
    attempts = caught.value.attempts
    assert [a.diagnostics[0].code for a in attempts] == ["no_query", "not_select"]
    assert len(server.chat_bodies) == 2 and caught.value.hint


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"sparql": "SELECT ?x WHERE { ?x ?p ?o }"}', "SELECT ?x WHERE { ?x ?p ?o }"),
        ("```sparql\nSELECT ?x WHERE { ?x ?p ?o }\n```", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("PREFIX a: <http://a#>\nSELECT * {}", "PREFIX a: <http://a#>\nSELECT * {}"),
        ('{"query": "SELECT"}', None),
        ("Here is the query you asked for.", None),
        ("", None),
    ],
)
def test_extract_sparql(content: str, expected: str | None) -> None:
    assert extract_sparql(content) == expected


# --- repair scope ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "changed"),
    [
        (AGG.replace("?node oda:nodeId ?nodeId .", "?node oda:nodeId ?id ."), ("WHERE",)),
        (AGG.replace("20:00:00Z", "19:00:00Z"), ("WHERE",)),
        (AGG.replace("LIMIT 10", "LIMIT 100"), ("LIMIT/OFFSET",)),
        (AGG.replace(f"FROM <{GRAPH}>\n", ""), ("FROM",)),
        (AGG.replace("LIMIT 10", "ORDER BY ?avg LIMIT 10"), ("ORDER BY",)),
        (AGG.replace("LIMIT 10", "HAVING (AVG(?power) > 1) LIMIT 10"), ("HAVING",)),
        (AGG + "\nVALUES ?node { <http://x> }", ("VALUES",)),
        (AGG.replace("?r oda:fromSensor", "OPTIONAL { ?node oda:slot ?slot }\n?r oda:fromSensor"),
         ("WHERE",)),
        (AGG.replace("https://w3id.org/oda-analyst/ontology#>", "http://evil/ontology#>", 1),
         ("WHERE",)),
        (AGG.replace("SELECT (AVG(?power) AS ?avg)", "ASK"), ("form",)),
        (AGG.replace("SELECT", "SELEKT"), ("syntax",)),
    ],
    ids=["var-renamed", "filter", "limit", "from", "order", "having", "values", "optional",
         "prefix-redefined", "form", "syntax"],
)  # fmt: skip
def test_repair_scope_rejects_changes_outside_select_and_group_by(
    candidate: str, changed: tuple[str, ...]
) -> None:
    check = check_repair_scope(AGG, candidate)
    assert not check.ok and check.changed == changed and check.reason


@pytest.mark.parametrize(
    "candidate",
    [
        AGG_GROUPED,
        AGG.replace("SELECT (AVG", "SELECT DISTINCT (AVG"),
        AGG.replace("oda:", "o:"),  # the prefix renamed everywhere, declaration included
        "# a comment\n" + AGG.replace("\n", "\n   "),
        AGG.replace("?sensor oda:observes", "[] oda:entityKey ?k .\n?sensor oda:observes"),
    ],
    ids=["group-by", "distinct", "prefix-renamed", "whitespace", "same-bnode"],
)
def test_repair_scope_accepts_select_and_group_by_changes(candidate: str) -> None:
    original = AGG
    if "entityKey" in candidate:  # blank nodes get fresh labels on every parse
        original = candidate.replace("SELECT (AVG", "SELECT ?k (AVG")
    assert check_repair_scope(original, candidate).ok


def test_same_query_ignores_layout_only() -> None:
    assert same_query(AGG, AGG.replace("\n", " \n "))
    assert not same_query(AGG, AGG_GROUPED)
    assert not same_query(AGG, "not sparql")


# --- repair loop and completeness -----------------------------------------------------------------

LOW = CompletenessReport(confidence=0.4, missing_projections=("node id per node",))


def test_repair_rejects_a_where_change_then_accepts_select_group_by(
    server: ScriptedOpenAIServer,
) -> None:
    where_changed = AGG_GROUPED.replace("20:00:00Z", "00:00:00Z")
    server.add(sparql_reply(where_changed), sparql_reply(AGG_GROUPED))
    ledger = TokenLedger()
    out = repair(
        client_for(server), question="average power per node", sparql=AGG, report=LOW,
        graph_iri=GRAPH, ledger=ledger, additive_only=False,  # model-written SPARQL
    )  # fmt: skip
    assert out.repaired and out.sparql == AGG_GROUPED
    assert [a.outcome for a in out.attempts] == ["out_of_scope", "accepted"]
    first, second = server.chat_bodies
    assert "missing projection: node id per node" in first["messages"][1]["content"]
    assert "it changed WHERE" in second["messages"][-1]["content"]
    assert ledger.snapshot()["repair"]["calls"] == 2


def test_repair_revalidates_and_keeps_the_original_when_all_fail(
    server: ScriptedOpenAIServer,
) -> None:
    unbound = AGG.replace("SELECT (AVG(?power) AS ?avg)", "SELECT ?foo (AVG(?power) AS ?avg)")
    unbound = unbound.replace("LIMIT 10", "GROUP BY ?foo\nLIMIT 10")
    server.add(sparql_reply(unbound), ScriptStep.reply("no query here"))
    out = repair(
        client_for(server), question="q", sparql=AGG, report=LOW, graph_iri=GRAPH, max_attempts=2,
        additive_only=False,
    )  # fmt: skip
    assert not out.repaired and out.sparql == AGG
    assert [a.outcome for a in out.attempts] == ["invalid", "no_query"]
    assert "unbound" in out.attempts[0].reason
    assert len(server.chat_bodies) == 2


def completeness_reply(p: float, **signals: list[str]) -> ScriptStep:
    body: dict[str, Any] = {
        "confidence": p,
        "missing_projections": [],
        "projection_issues": [],
        "grouping_violations": [],
    }
    body.update(signals)
    return ScriptStep.json_reply(body, usage=(30, 10))


def test_review_skips_repair_when_confident(server: ScriptedOpenAIServer) -> None:
    server.add(completeness_reply(0.95))
    out = review_sparql(
        client_for(server), question="q", sparql=AGG, graph_iri=GRAPH, columns=["avg"]
    )
    assert out.sparql == AGG and out.repair is None and out.report is not None
    [body] = server.chat_bodies
    schema = body["response_format"]["json_schema"]
    assert schema["name"] == "completeness_report"
    assert set(schema["schema"]["required"]) == {
        "confidence", "missing_projections", "projection_issues", "grouping_violations",
    }  # fmt: skip
    assert "Result columns: avg" in body["messages"][1]["content"]


def test_review_repairs_below_threshold_and_ledger_is_per_stage(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(
        completeness_reply(0.5, grouping_violations=["average is not per node"]),
        sparql_reply(AGG_GROUPED, usage=(60, 20)),
    )
    ledger = TokenLedger()
    out = review_sparql(
        client_for(server), question="average power per node", sparql=AGG, graph_iri=GRAPH,
        columns=["avg"], ledger=ledger, additive_only=False,
    )  # fmt: skip
    assert out.sparql == AGG_GROUPED and out.repair is not None and out.repair.repaired
    snap = ledger.snapshot()
    assert snap["completeness"]["total_tokens"] == 40 and snap["repair"]["total_tokens"] == 80
    assert (
        "grouping violation: average is not per node"
        in (server.chat_bodies[1]["messages"][1]["content"])
    )


def test_repair_of_a_compiled_query_may_only_add_columns(server: ScriptedOpenAIServer) -> None:
    # Regrouping (per node) or re-aggregating (SUM for AVG) a compiled plan's query answers a
    # question the rules did not understand: refused; an added aggregate column is accepted.
    summed = AGG.replace("AVG(?power)", "SUM(?power)")
    counted = AGG.replace("AS ?avg)", "AS ?avg) (COUNT(?power) AS ?n)")
    server.add(sparql_reply(AGG_GROUPED), sparql_reply(summed), sparql_reply(counted))
    out = repair(
        client_for(server), question="average power per node", sparql=AGG, report=LOW,
        graph_iri=GRAPH, max_attempts=3,
    )  # fmt: skip
    assert [a.outcome for a in out.attempts] == ["out_of_scope", "out_of_scope", "accepted"]
    assert "GROUP BY" in out.attempts[0].reason and "existing column" in out.attempts[1].reason
    assert out.repaired and out.sparql == counted


def test_review_keeps_the_query_when_the_check_fails(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.reply("{not json"))
    out = review_sparql(client_for(server), question="q", sparql=AGG, graph_iri=GRAPH, columns=[])
    assert out.sparql == AGG and out.report is None
    assert "completeness check skipped" in out.notes[0]


def test_sparql_prompt_puts_what_requests_share_first() -> None:
    # A server's prompt cache reuses the longest prefix it has seen: the rules, prefixes and
    # ontology paths are the same for every request about the same classes, so they come before
    # the examples, the grounded request and the graph, which are the request's own.
    other = GroundedRequest(
        ("total_power",), Entities(nodes=(12,)), parse_time(SPARQL_Q, as_of=AS_OF).windows
    )
    a, _ = sparql_prompt(SPARQL_Q, GROUNDED, GRAPH)
    b, _ = sparql_prompt("max node power of node 12 on 2 June 2022", other, GRAPH + "-other")
    assert a[0] == b[0]  # the system turn: the rules alone
    user_a, user_b = a[1]["content"], b[1]["content"]
    shared = user_a.index("Curated examples")
    assert user_a[:shared] == user_b[:shared] and "Ontology:" in user_a[:shared]
    assert user_a.index("Grounded request") > shared and user_a.index("Graph: <") > shared
    assert user_a.rstrip().endswith(SPARQL_Q)


def test_sparql_prompt_declares_no_instance_prefix(server: ScriptedOpenAIServer) -> None:
    server.add(sparql_reply(VALID))
    generate_sparql(client_for(server), question=SPARQL_Q, grounded=GROUNDED, graph_iri=GRAPH)
    prompt = server.chat_bodies[0]["messages"][1]["content"]
    assert "PREFIX oda: <https://w3id.org/oda-analyst/ontology#>" in prompt
    assert "PREFIX m100:" not in prompt  # m100:node/900 would be a syntax error
