"""One request through every model-backed retriever stage, over HTTP on loopback.

The scripted OpenAI-compatible server replays a fixed conversation: time → intent (a weak
agreement, which confident rules need no reflection on) → decomposition → plugin → SPARQL (one
rejected answer, then a valid one) → completeness → repair (one out-of-scope answer, then an
accepted one). The test asserts what the client sent at each step (the structured-output schema
in the configured field, the feedback turns) and the per-stage token ledger. It checks protocol
and control flow, not answer quality: no model runs here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from oda_analyst.llm import LLMClient, RetryPolicy, StructuredMode, TokenLedger
from oda_analyst.ontology.namespaces import metric_iri, rack_iri
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.retriever.grounding.ground import ground_metrics
from oda_analyst.retriever.model_paths import STAGES
from oda_analyst.retriever.model_paths.completeness import COMPLETENESS_SCHEMA
from oda_analyst.retriever.model_paths.grounding_model import (
    DECOMPOSE_SCHEMA,
    INTENT_SCHEMA,
    LLMGroundingHooks,
    plugin_schema,
)
from oda_analyst.retriever.model_paths.repair import review_sparql
from oda_analyst.retriever.model_paths.sparql_model import (
    SPARQL_SCHEMA,
    GroundedRequest,
    generate_sparql,
)
from oda_analyst.retriever.model_paths.time_model import TIME_SCHEMA, decide_time
from reading_helpers import said
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.integration

AS_OF = datetime(2022, 6, 15, 12, 0, tzinfo=UTC)
GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/req-42"
QUESTION = "Average inlet temperature per node of rack 45 on 1 June 2022 between 08:00 and 09:00"
HEAD = (
    "PREFIX oda: <https://w3id.org/oda-analyst/ontology#>\n"
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
)
WHERE = f"""WHERE {{
  <{rack_iri(45)}> oda:hasNode ?node .
  ?node oda:nodeId ?nodeId .
  ?sensor oda:observes ?node ;
          oda:observesMetric <{metric_iri("ipmi", "ambient")}> .
  ?r oda:fromSensor ?sensor ;
     oda:timestamp ?ts ;
     oda:value ?temperature .
  FILTER(?ts >= "2022-06-01T08:00:00Z"^^xsd:dateTime && ?ts < "2022-06-01T09:00:00Z"^^xsd:dateTime)
}}"""
FIRST = f"{HEAD}SELECT (AVG(?temperature) AS ?avg)\nFROM <{GRAPH}>\n{WHERE}"
UNKNOWN_PROPERTY = FIRST.replace("oda:hasNode", "oda:hasServer")
REPAIRED = (
    f"{HEAD}SELECT ?nodeId (AVG(?temperature) AS ?avg)\nFROM <{GRAPH}>\n{WHERE}\nGROUP BY ?nodeId"
)
OUT_OF_SCOPE = REPAIRED.replace("09:00:00Z", "10:00:00Z")


def script() -> list[ScriptStep]:
    def js(value: dict[str, Any], usage: tuple[int, int]) -> ScriptStep:
        return ScriptStep.json_reply(value, usage=usage)

    window = {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T09:00:00Z",
              "text": "on 1 June 2022 between 08:00 and 09:00"}  # fmt: skip
    return [
        js({"windows": [window], "status": "ok", "message": None}, (400, 30)),  # time
        js({"metric": True, "cardinality": "single", "confidence": 0.55}, (120, 12)),  # intent
        js({"subqueries": [QUESTION], "confidence": 0.9}, (130, 25)),  # decompose
        js({"plugin": "ipmi", "confidence": 0.93}, (300, 10)),  # plugin
        js({"sparql": UNKNOWN_PROPERTY}, (1500, 120)),  # sparql, rejected by the validator
        js({"sparql": FIRST}, (1700, 120)),  # sparql, accepted
        js(
            {
                "confidence": 0.6,
                "missing_projections": ["the node id (per node)"],
                "projection_issues": [],
                "grouping_violations": ["AVG is not grouped by node"],
            },
            (600, 40),
        ),  # completeness
        js({"sparql": OUT_OF_SCOPE}, (700, 130)),  # repair touching WHERE: rejected
        js({"sparql": REPAIRED}, (800, 130)),  # repair within SELECT/GROUP BY: accepted
    ]


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(script(), model="scripted-qwen") as srv:
        yield srv


def sent_schema(body: dict[str, Any], mode: StructuredMode) -> tuple[str | None, Any]:
    """(schema name, schema) as the request carried it in the configured field."""
    if mode == "response_format":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        return fmt["json_schema"]["name"], fmt["json_schema"]["schema"]
    assert "response_format" not in body
    return None, body["structured_outputs"]["json"]


@pytest.mark.parametrize("mode", ["response_format", "structured_outputs"])
def test_full_scripted_conversation(server: ScriptedOpenAIServer, mode: StructuredMode) -> None:
    ledger = TokenLedger()
    client = LLMClient(
        server.base_url, server.model, retry=RetryPolicy(max_retries=0), ledger=ledger,
        structured_mode=mode,
    )  # fmt: skip

    time = decide_time(client, QUESTION, AS_OF)
    assert time.source == "both" and time.parse.status == "ok"

    entities = extract_entities(QUESTION)
    hooks = LLMGroundingHooks(client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # synonyms only: no embedding model
        grounding = ground_metrics(
            said(QUESTION), entities=entities, model=hooks, use_embeddings=False
        )
    assert grounding.status == "ok" and grounding.metrics() == [("ipmi", "ambient")]

    grounded = GroundedRequest(
        metrics=tuple(m for _, m in grounding.metrics()),
        entities=entities,
        windows=time.parse.windows,
    )
    generated = generate_sparql(client, question=QUESTION, grounded=grounded, graph_iri=GRAPH)
    assert generated.sparql == FIRST and len(generated.attempts) == 2

    review = review_sparql(
        client, question=QUESTION, sparql=generated.sparql, graph_iri=GRAPH,
        columns=generated.report.variables, additive_only=False,  # model-written SPARQL
    )  # fmt: skip
    assert review.sparql == REPAIRED
    assert review.repair is not None
    assert [a.outcome for a in review.repair.attempts] == ["out_of_scope", "accepted"]
    assert server.remaining == 0

    bodies = server.chat_bodies
    assert len(bodies) == 9 and all(b["model"] == "scripted-qwen" for b in bodies)
    expected = [
        ("time_window", TIME_SCHEMA), ("intent", INTENT_SCHEMA),
        ("decompose", DECOMPOSE_SCHEMA), ("plugin", plugin_schema()), ("sparql", SPARQL_SCHEMA),
        ("sparql", SPARQL_SCHEMA), ("completeness_report", COMPLETENESS_SCHEMA),
        ("sparql", SPARQL_SCHEMA), ("sparql", SPARQL_SCHEMA),
    ]  # fmt: skip
    for body, (name, schema) in zip(bodies, expected, strict=True):
        sent_name, sent = sent_schema(body, mode)
        assert sent == schema
        assert sent_name in (None, name)
        assert body["temperature"] == 0.0 and "tools" not in body

    # The weak intent answer agreed with confident rules: no reflection turn was sent.
    assert grounding.retries["intent"] == 0 and grounding.intent.confidence == 0.9
    # The SPARQL prompt carries the grounded metric, entity and window, and the graph.
    prompt = bodies[4]["messages"][1]["content"]
    assert metric_iri("ipmi", "ambient") in prompt and rack_iri(45) in prompt
    assert "Rack −oda:hasNode→ ComputeNode" in prompt
    assert f"Graph: <{GRAPH}>" in prompt  # after the shared prefix, so a server's cache reuses it
    # The regeneration carries the validator's diagnostic; the repair retry its scope reason.
    assert "[unknown_property] oda:hasServer" in bodies[5]["messages"][-1]["content"]
    assert "it changed WHERE" in bodies[8]["messages"][-1]["content"]

    snapshot = ledger.snapshot()
    assert set(snapshot) == set(STAGES)
    calls = {stage: int(snapshot[stage]["calls"]) for stage in STAGES}
    assert calls == {"time": 1, "intent": 1, "decompose": 1, "plugin": 1, "sparql": 2,
                     "completeness": 1, "repair": 2}  # fmt: skip
    assert snapshot["sparql"]["total_tokens"] == 1500 + 120 + 1700 + 120
    scripted = [step.usage or (0, 0) for step in script()]
    assert ledger.total()["total_tokens"] == sum(p + c for p, c in scripted)
