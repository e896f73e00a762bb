"""The Retriever with a model configured, against a scripted OpenAI-compatible server (loopback).

Protocol level: these tests check control flow — which stages call the model, what runs when it
answers, fails or is refused, what reaches the validator and the store, what the token ledger
records — never answer quality. No model runs: the server's responder answers each stage by the
structured-output schema name of the request (time_window, intent, decompose, plugin,
completeness_report; a repair and a SPARQL generation both ask for "sparql", told apart by the
system prompt), with replies each test sets.

Real components otherwise: a lake written by the synthetic generator (the ``tiny`` profile:
nodes 0-3 and 900, 2022-06-01 00:00-01:00, narrowed to two ipmi metrics), the real Retriever with
its embedded stores, and the real all-MiniLM-L6-v2 index, loaded once per module. Expected rows
come from the same Retriever with no model, or from the Parquet files read with Polars.

The model-written SPARQL path needs a question the rules cannot plan whose metrics and window do
ground. None is known on this lake (the planner covers every such question the devset asks), so
``test_model_writes_sparql_when_the_rules_cannot_plan`` makes the planner's condition by
monkeypatching ``stage1.plan_question`` to return ``missing=("plan",)``, the planner's own
verdict for a plan it built but could not validate.

The last section checks ODA_LLM_STAGES and ODA_LLM_FORCE: only the used stages reach the
server, a forced stage asks the model where the rules would not (the time window the parser
read, the SPARQL of a planned question, a repair of a complete query).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from fixtures_embeddings import shared_cache_dir
from oda_analyst.config import load_settings
from oda_analyst.errors import ConfigError
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.namespaces import metric_iri, node_iri
from oda_analyst.retriever.answer import AnswerPayload
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.model_paths.prompts import REPAIR_RULES
from oda_analyst.retriever.model_paths.stages import ModelStages
from oda_analyst.retriever.planning.planner import PlannerInput, PlannerOutput
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.stages import stage1
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.integration

WINDOW = "on 1 June 2022 from 00:00 to 01:00"
POWER_Q = f"Retrieve the total power consumption for node 900 {WINDOW}"
AVG_Q = f"Average total power per node of nodes 0-3 and 900 {WINDOW}"
START, END = datetime(2022, 6, 1, 0, 0, tzinfo=UTC), datetime(2022, 6, 1, 1, 0, tzinfo=UTC)
AVG_ITEM = "(AVG(?value) AS ?avg_value)"
COUNT_ITEM = "(COUNT(?value) AS ?n_readings)"

HEAD = (
    "PREFIX oda: <https://w3id.org/oda-analyst/ontology#>\n"
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
)
WHERE = f"""WHERE {{
  ?sensor oda:observes <{node_iri(900)}> ;
          oda:observesMetric <{metric_iri("ipmi", "total_power")}> .
  ?reading oda:fromSensor ?sensor ;
           oda:timestamp ?timestamp ;
           oda:value ?value .
  FILTER(?timestamp >= "2022-06-01T00:00:00Z"^^xsd:dateTime
         && ?timestamp < "2022-06-01T01:00:00Z"^^xsd:dateTime)
}}
ORDER BY ?timestamp"""
# Model-written SPARQL; {graph} is the request's graph, which the user turn names.
AUTHORED = HEAD + "SELECT ?timestamp ?value\nFROM <{graph}>\n" + WHERE
UNKNOWN_PROPERTY = AUTHORED.replace("oda:observesMetric", "oda:measuresMetric")


# --- the scripted model -----------------------------------------------------------------------


def _schema_name(body: dict[str, Any]) -> str:
    return str(body["response_format"]["json_schema"]["name"])


def _question(body: dict[str, Any]) -> str:
    found = re.search(r"^Question: (.*)$", body["messages"][-1]["content"], re.MULTILINE)
    assert found is not None
    return str(found.group(1))


def _repair_input(body: dict[str, Any]) -> str:
    """The query a repair request shows (the first user turn, between its two headings)."""
    text = str(body["messages"][1]["content"])
    return text.split("Query:\n", 1)[1].split("\n\nThe completeness review found:", 1)[0]


@dataclass
class Responder:
    """Answers each chat completion by its stage. Defaults: the window the questions name, a
    metric question of one quantity, plugin ipmi, a complete query (p = 0.95)."""

    completeness: float = 0.95
    repair: Callable[[str], str] = lambda query: query
    sparql: list[str] = field(default_factory=list)  # replies in order (the last one repeats)
    fail_stages: frozenset[str] = frozenset()  # stages answered with HTTP 503
    stages: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # SPARQL sent (generation and repair)

    def stage(self, body: dict[str, Any]) -> str:
        name = _schema_name(body)
        if name == "sparql":
            return "repair" if body["messages"][0]["content"] == REPAIR_RULES else "sparql"
        return {"time_window": "time", "completeness_report": "completeness"}.get(name, name)

    def __call__(self, body: dict[str, Any]) -> ScriptStep:
        stage = self.stage(body)
        self.stages.append(stage)
        if stage in self.fail_stages or "*" in self.fail_stages:
            return ScriptStep.error(503, "scripted outage")
        return ScriptStep.json_reply(getattr(self, f"_{stage}")(body))

    def _time(self, body: dict[str, Any]) -> dict[str, Any]:
        window = {"start": "2022-06-01T00:00:00Z", "end": "2022-06-01T01:00:00Z", "text": WINDOW}
        return {"windows": [window], "status": "ok", "message": None}

    def _intent(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"metric": True, "cardinality": "single", "confidence": 0.95}

    def _decompose(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"subqueries": [_question(body)], "confidence": 0.9}

    def _plugin(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"plugin": "ipmi", "confidence": 0.95}

    def _completeness(self, body: dict[str, Any]) -> dict[str, Any]:
        missing = [] if self.completeness >= 0.9 else ["the number of readings behind each mean"]
        return {"confidence": self.completeness, "missing_projections": missing,
                "projection_issues": [], "grouping_violations": []}  # fmt: skip

    def _repair(self, body: dict[str, Any]) -> dict[str, Any]:
        self.written.append(self.repair(_repair_input(body)))
        return {"sparql": self.written[-1]}

    def _sparql(self, body: dict[str, Any]) -> dict[str, Any]:
        turns = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        graph = re.search(r"^Graph: <([^>]+)>$", turns, re.MULTILINE)
        assert graph is not None
        reply = self.sparql[min(self.stages.count("sparql"), len(self.sparql)) - 1]
        self.written.append(reply.replace("{graph}", graph.group(1)))
        return {"sparql": self.written[-1]}


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    generate(build_spec("tiny", plugins="ipmi", metrics="total_power,ambient"), root)
    return root


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Load the embedding model and the catalogue's index once (vectors in pytest's cache)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    cache = shared_cache_dir(request, tmp_path_factory)
    index = embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings")
    mp.undo()
    assert index is not None, embeddings.embedder_unavailable_reason()


@pytest.fixture
def responder() -> Responder:
    return Responder()


@pytest.fixture
def server(responder: Responder) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(default=responder, model="scripted-model") as srv:
        yield srv


@pytest.fixture
def make(
    lake: Path, metric_index: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[ScriptedOpenAIServer | None], Retriever]:
    """``make(server)``: a Retriever on a fresh data folder whose settings come from the
    environment, ODA_LLM_BASE_URL/ODA_LLM_MODEL pointing at ``server`` (None: no model)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    count = iter(range(100))

    def build(server: ScriptedOpenAIServer | None) -> Retriever:
        if server is None:
            monkeypatch.delenv("ODA_LLM_BASE_URL", raising=False)
            monkeypatch.delenv("ODA_LLM_MODEL", raising=False)
        else:
            monkeypatch.setenv("ODA_LLM_BASE_URL", server.base_url)
            monkeypatch.setenv("ODA_LLM_MODEL", server.model)
            monkeypatch.setenv("ODA_LLM_MAX_RETRIES", "0")
            monkeypatch.setenv("ODA_LLM_STRUCTURED_MODE", "response_format")
        settings = load_settings(lake=str(lake), data_dir=tmp_path / f"data{next(count)}",
                                 redis_url=None, sparql_endpoint=None, row_limit=500)  # fmt: skip
        retriever = Retriever(settings)
        assert (retriever.llm is None) == (server is None)
        return retriever

    return build


def _lake(lake: Path, metric: str) -> pl.DataFrame:
    files = str(lake / f"year_month=22-06/plugin=ipmi_pub/metric={metric}/*.parquet")
    return pl.read_parquet(files, hive_partitioning=False).filter(
        pl.col("timestamp").is_between(START, END, closed="left")
    )


def _completed(answer: AnswerPayload) -> AnswerPayload:
    assert answer.status == "completed", (answer.answer, answer.error, answer.warnings)
    return answer


# --- (a) every stage asks the model; the rows are the rule path's -----------------------------


@pytest.mark.parametrize("question", [POWER_Q, AVG_Q])
def test_model_at_every_stage_gives_the_rule_paths_rows(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    question: str,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(question))
    answer = _completed(make(server).query(question))

    assert answer.rows == rules.rows and answer.columns == rules.columns
    assert answer.sparql == rules.sparql  # a complete query (p >= 0.9) is not repaired
    # The parser reads these windows: the time model is not asked (it could not change them).
    assert set(responder.stages) == {"intent", "decompose", "plugin", "completeness"}
    for stage in ("intent", "plugin", "completeness"):
        assert answer.tokens[stage]["calls"] >= 1 and answer.tokens[stage]["total_tokens"] > 0
        assert answer.tokens[stage]["failed_calls"] == 0
    assert sum(int(t["calls"]) for t in answer.tokens.values()) == len(server.chat_bodies)
    assert rules.tokens == {}


# --- (b) an outage falls back to the rule path ---------------------------------------------------


@pytest.mark.parametrize("outage", ["every stage 503", "intent 503", "server stopped"])
def test_model_outage_falls_back_to_the_rules(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    outage: str,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(AVG_Q))
    retriever = make(server)
    if outage == "server stopped":
        server.stop()
    else:
        responder.fail_stages = frozenset({"*" if outage.startswith("every") else "intent"})

    answer = _completed(retriever.query(AVG_Q))

    assert answer.rows == rules.rows and answer.sparql == rules.sparql
    assert any(w.startswith("the model failed, so the rest of this request ran by the rules")
               for w in answer.warnings), answer.warnings  # fmt: skip
    failed = {stage for stage, t in answer.tokens.items() if t["failed_calls"]}
    # The first failed call ends the model's part of the request: nothing is asked after it.
    assert failed == {"intent"} and answer.tokens["intent"]["calls"] == 1
    assert "time" not in answer.tokens  # the parser read the window
    assert responder.stages == ([] if outage == "server stopped" else ["intent"])


def test_review_outage_keeps_the_validated_query(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder
) -> None:
    rules = _completed(make(None).query(AVG_Q))
    responder.fail_stages = frozenset({"completeness"})

    answer = _completed(make(server).query(AVG_Q))

    assert answer.rows == rules.rows and answer.sparql == rules.sparql
    assert responder.stages == ["intent", "decompose", "plugin", "completeness"]
    assert any(w.startswith("completeness check skipped: ") for w in answer.warnings)
    assert answer.tokens["completeness"]["failed_calls"] == 1


# --- (c) completeness check and bounded repair --------------------------------------------------


def test_repair_that_adds_a_column_is_validated_and_executed(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    lake: Path,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(AVG_Q))
    responder.completeness = 0.4
    responder.repair = lambda query: query.replace(AVG_ITEM, f"{AVG_ITEM}\n  {COUNT_ITEM}")
    retriever = make(server)

    answer = _completed(retriever.query(AVG_Q))

    repaired = responder.written[0].strip()  # the SPARQL is read from the answer stripped
    assert responder.stages.count("repair") == 1 and COUNT_ITEM in repaired
    assert answer.sparql == repaired != rules.sparql
    assert answer.columns == ["node_id", "avg_value", "n_readings"]
    counts = _lake(lake, "total_power").group_by(pl.col("node").cast(pl.String)).len()
    expected = {int(n): int(c) for n, c in counts.iter_rows()}
    assert rules.rows is not None and answer.rows is not None
    assert [r[:2] for r in answer.rows] == rules.rows
    assert {r[0]: r[2] for r in answer.rows} == expected
    saved = retriever.status(answer.request_id).artifacts
    assert saved.sparql == repaired
    assert isinstance(saved.validation, dict) and saved.validation["ok"] is True
    assert saved.validation["variables"] == ["node_id", "avg_value", "n_readings"]
    assert "repaired SELECT/GROUP BY" in answer.warnings
    assert any("the repair changed the projection" in w for w in answer.warnings)
    assert answer.tokens["repair"]["calls"] == 1 and answer.tokens["completeness"]["calls"] == 1


def test_repair_that_changes_where_is_refused_and_the_original_runs(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder
) -> None:
    rules = _completed(make(None).query(AVG_Q))
    responder.completeness = 0.4
    responder.repair = lambda query: query.replace(AVG_ITEM, f"{AVG_ITEM}\n  {COUNT_ITEM}").replace(
        "01:00:00Z", "00:30:00Z"
    )

    answer = _completed(make(server).query(AVG_Q))

    assert responder.stages.count("repair") == 2  # the budget: each attempt left WHERE changed
    assert all("00:30:00Z" in q for q in responder.written)
    answer_bodies = [b for b in server.chat_bodies if b["messages"][0]["content"] == REPAIR_RULES]
    assert "it changed WHERE" in answer_bodies[1]["messages"][-1]["content"]
    assert answer.sparql == rules.sparql and answer.rows == rules.rows
    assert "kept the original query after 2 repair attempt(s)" in answer.warnings


# --- (d) model-written SPARQL for a question the rules cannot plan -------------------------------


@pytest.fixture
def unplannable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's verdict for a plan it could not validate (see the module docstring)."""

    def plan_question(inp: PlannerInput) -> PlannerOutput:
        assert inp.metrics == (("ipmi", "total_power"),) and inp.windows
        return PlannerOutput((), ("rules built an invalid plan: (scripted)",), ("plan",))

    monkeypatch.setattr(stage1, "plan_question", plan_question)


def test_model_writes_sparql_when_the_rules_cannot_plan(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    lake: Path, unplannable: None,
) -> None:  # fmt: skip
    rejected = make(None).query(POWER_Q)
    assert rejected.status == "rejected" and "nothing I can retrieve" in rejected.answer
    responder.sparql = [UNKNOWN_PROPERTY, AUTHORED]
    retriever = make(server)

    answer = _completed(retriever.query(POWER_Q))

    assert responder.stages.count("sparql") == 2
    feedback = [b for b in server.chat_bodies if _schema_name(b) == "sparql"][1]["messages"][-1]
    assert "[unknown_property]" in feedback["content"]
    assert answer.sparql == responder.written[1].strip() and answer.plan is None
    assert answer.columns == ["timestamp", "value"]
    df = _lake(lake, "total_power").filter(pl.col("node").cast(pl.String) == "900")
    rows = df.sort("timestamp").select("timestamp", "value").iter_rows()
    expected = [(t.strftime("%Y-%m-%dT%H:%M:%SZ"), np.float32(v)) for t, v in rows]
    assert answer.rows is not None and len(expected) > 0
    assert [(t, np.float32(v)) for t, v in answer.rows] == expected
    saved = retriever.status(answer.request_id).artifacts
    assert saved.sparql == answer.sparql and isinstance(saved.validation, dict)
    assert saved.validation["ok"] is True
    assert answer.tokens["sparql"]["calls"] == 2
    assert any("the model wrote the SPARQL" in w for w in answer.warnings)


def test_model_sparql_that_never_validates_fails_with_every_attempt(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    unplannable: None,
) -> None:  # fmt: skip
    responder.sparql = [UNKNOWN_PROPERTY]

    answer = make(server).query(POWER_Q)

    assert answer.status == "failed" and answer.error is not None
    assert answer.error["code"] == "sparql_generation_failed"
    attempts = answer.error["attempts"]
    assert [a["number"] for a in attempts] == [1, 2, 3] == list(range(1, 4))
    assert all(d["code"] == "unknown_property" for a in attempts for d in a["diagnostics"])
    assert "attempt 3: [unknown_property]" in answer.answer
    assert responder.stages.count("sparql") == 3 and "completeness" not in responder.stages


# --- ODA_LLM_STAGES and ODA_LLM_FORCE: which stages reach the model, what a forced one runs ---


def test_only_the_used_stages_ask_the_model(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(POWER_Q))
    monkeypatch.setenv("ODA_LLM_STAGES", "plugin,completeness")
    answer = _completed(make(server).query(POWER_Q))
    assert set(responder.stages) == {"plugin", "completeness"}
    assert answer.rows == rules.rows and answer.sparql == rules.sparql
    assert set(answer.tokens) == {"plugin", "completeness"}


def test_forced_time_asks_the_model_although_the_parser_read_the_window(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(POWER_Q))
    monkeypatch.setenv("ODA_LLM_FORCE", "time")
    monkeypatch.setenv("ODA_LLM_STAGES", "none")
    answer = _completed(make(server).query(POWER_Q))
    assert responder.stages == ["time"]  # a forced stage is used, the others are not
    assert answer.rows == rules.rows


def _as_written(sparql: str) -> str:
    """A compiled query as the model would write it for its own request's graph."""
    return re.sub(r"FROM <[^>]+>", "FROM <{graph}>", sparql)


def test_forced_sparql_runs_the_models_query_instead_of_the_compiled_one(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(POWER_Q))
    assert rules.sparql is not None
    # Column names are the model's own: the cross-check compares the figures, not the names.
    responder.sparql = [_as_written(rules.sparql).replace("?value", "?watts")]
    monkeypatch.setenv("ODA_LLM_FORCE", "sparql")
    monkeypatch.setenv("ODA_LLM_STAGES", "none")
    answer = _completed(make(server).query(POWER_Q))
    assert responder.stages == ["sparql"]
    assert answer.sparql == responder.written[0].strip() and "?watts" in answer.sparql
    assert any("the model wrote this plan's SPARQL" in w for w in answer.warnings)
    assert answer.rows == rules.rows and answer.columns != rules.columns


def test_forced_sparql_with_other_figures_than_the_plan_is_not_given(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Valid, and it uses every grounded IRI and the window: only the plan's figures show that
    # it answers less (the first three readings).
    rules = _completed(make(None).query(POWER_Q))
    assert rules.sparql is not None and rules.row_count > 3
    responder.sparql = [_as_written(rules.sparql) + "\nLIMIT 3"]
    monkeypatch.setenv("ODA_LLM_FORCE", "sparql")
    monkeypatch.setenv("ODA_LLM_STAGES", "none")
    answer = make(server).query(POWER_Q)
    assert answer.status == "failed", answer.rows
    assert "other figures than the compiled plan (3 row(s) where the plan gives" in answer.answer


def test_forced_sparql_that_never_validates_fails_not_falls_back(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    responder.sparql = [AUTHORED.replace("oda:observesMetric", "oda:measuresMetric")]
    monkeypatch.setenv("ODA_LLM_FORCE", "sparql")
    monkeypatch.setenv("ODA_LLM_STAGES", "none")
    answer = make(server).query(POWER_Q)
    assert answer.status == "failed" and answer.error is not None
    assert answer.error["code"] == "sparql_generation_failed"


def test_forced_repair_is_asked_for_a_query_found_complete(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    rules = _completed(make(None).query(POWER_Q))
    monkeypatch.setenv("ODA_LLM_FORCE", "repair")
    monkeypatch.setenv("ODA_LLM_STAGES", "completeness")
    responder.completeness = 0.99  # complete: by default no repair would be asked
    answer = _completed(make(server).query(POWER_Q))
    assert responder.stages == ["completeness", "repair"]
    assert answer.rows == rules.rows  # the scripted repair proposed no change


def test_repair_alone_is_asked_with_no_completeness_check(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, responder: Responder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("ODA_LLM_FORCE", "repair")
    monkeypatch.setenv("ODA_LLM_STAGES", "none")
    _completed(make(server).query(POWER_Q))
    assert responder.stages == ["repair"]


def test_a_stage_name_that_does_not_exist_is_a_configuration_error(
    make: Callable[..., Retriever], server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("ODA_LLM_FORCE", "sparql,grunding")
    with pytest.raises(ConfigError, match="ODA_LLM_FORCE names 'grunding'"):
        make(server)
    assert ModelStages.parse("review", "intent").used == {"completeness", "repair", "intent"}
