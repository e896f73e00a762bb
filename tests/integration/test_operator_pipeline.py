"""The pipeline port's work in the analyst (``pipeline.local.LocalPipeline``) on a real lake:
a query's own model endpoint (``spec.model``) is what its model-backed stages ask, an unreachable
one is reported and the answer still comes (by the rules), and a baseline backend answers from
the same lake. The model is a scripted OpenAI-compatible server on loopback: these tests check
which endpoint is asked, never what a model would answer."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import uvicorn
from starlette.middleware import Middleware

from baseline_lake import write_baseline_lake
from fixtures_embeddings import shared_cache_dir
from oda_analyst.config import load_settings
from oda_analyst.controller.port import Ask, ModelEndpoint, Retrieved
from oda_analyst.controller.port_http import (
    AnalystCallError,
    AnalystUnavailableError,
    HttpPipeline,
)
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.pipeline.http import PipelineService, build_app
from oda_analyst.pipeline.local import LocalPipeline
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.service_auth import BearerAuth, bearer_header
from scripted_server import ScriptedOpenAIServer, ScriptStep

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from devset import oracle

pytestmark = pytest.mark.integration

W = "from [2022-06-01 00:00:00] to [2022-06-01 01:00:00]"
OURS = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
AS_OF = oracle.utc("2022-06-15T00:00")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def pipeline(lake: Path, request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPipeline]:  # fmt: skip
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    for name in ("ODA_LLM_BASE_URL", "ODA_LLM_MODEL"):
        mp.delenv(name, raising=False)
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None
    settings = load_settings(lake=str(lake), data_dir=tmp_path_factory.mktemp("data"),
                             redis_url=None, sparql_endpoint=None, row_limit=500,
                             llm_max_retries=0)  # fmt: skip
    yield LocalPipeline(settings)
    mp.undo()


def _power_of_900(lake: Path) -> list[float]:
    files = str(lake / "year_month=22-06/plugin=ipmi_pub/metric=total_power/*.parquet")
    frame = pl.read_parquet(files, hive_partitioning=False)
    frame = frame.filter(
        (pl.col("node") == "900")
        & pl.col("timestamp").is_between(AS_OF.replace(day=1, hour=0),
                                         AS_OF.replace(day=1, hour=1), closed="left")
    ).sort("timestamp")  # fmt: skip
    return [float(v) for v in frame["value"]]


def _values(answer: dict[str, Any]) -> list[float]:
    assert answer["status"] == "completed", (answer.get("answer"), answer.get("warnings"))
    i = answer["columns"].index("value")
    return [float(r[i]) for r in answer["rows"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_querys_model_endpoint_is_the_one_its_stages_ask(pipeline: LocalPipeline,
                                                           lake: Path) -> None:  # fmt: skip
    # The operator's own settings name no model: any call the server sees is the override's.
    assert pipeline.retriever.llm is None
    with ScriptedOpenAIServer(default=lambda _: ScriptStep.error(503, "scripted outage"),
                              model="override-model") as server:  # fmt: skip
        endpoint = ModelEndpoint(server.base_url, server.model)
        assert pipeline.check_model(endpoint) is None
        answer = pipeline.retrieve(OURS, user="alice", as_of=AS_OF, answers=[],
                                   ask=Ask(model=endpoint)).answer  # fmt: skip
        bodies = server.chat_bodies
    assert bodies and {b["model"] for b in bodies} == {"override-model"}
    assert any("the model failed" in w for w in answer["warnings"])
    assert _values(answer) == pytest.approx(_power_of_900(lake))  # the rules still answer


def test_an_unreachable_model_endpoint_is_said_and_the_rules_answer(
    pipeline: LocalPipeline, lake: Path
) -> None:
    endpoint = ModelEndpoint(f"http://127.0.0.1:{_free_port()}/v1", "gone")
    problem = pipeline.check_model(endpoint)
    assert problem is not None and "127.0.0.1" in problem
    answer = pipeline.retrieve(OURS, user="alice", as_of=AS_OF, answers=[],
                               ask=Ask(model=endpoint)).answer  # fmt: skip
    assert any("model" in w for w in answer["warnings"])
    assert _values(answer) == pytest.approx(_power_of_900(lake))


def test_a_served_model_that_is_not_the_named_one_is_a_problem(pipeline: LocalPipeline) -> None:
    with ScriptedOpenAIServer(model="served-model") as server:
        problem = pipeline.check_model(ModelEndpoint(server.base_url, "other-model"))
    assert problem is not None and "other-model" in problem


def test_the_sota1_backend_answers_from_the_same_lake(pipeline: LocalPipeline,
                                                      lake: Path) -> None:  # fmt: skip
    answer = pipeline.retrieve(f"total_power of node 900 {W}", user="alice", as_of=AS_OF,
                               answers=[], ask=Ask(backend="sota1")).answer  # fmt: skip
    assert answer["request_id"].startswith("sota1")
    assert _values(answer) == pytest.approx(_power_of_900(lake))
    refused = pipeline.retrieve(OURS, user="alice", as_of=AS_OF, answers=[],
                                ask=Ask(backend="sota1")).answer  # fmt: skip
    assert refused["status"] in {"failed", "rejected"}  # no [YYYY-MM-DD HH:MM:SS] window


def test_stage1_reads_the_question_as_retrieval_will(pipeline: LocalPipeline) -> None:
    """A typo is read as the known word (and said), so the graphs the operator asks for are
    those retrieval reads; the answers replayed are stage 1's own (not the chart's)."""
    question = "averge total power of node 900 on 1 June 2022 from 00:00 to 01:00"
    understood = pipeline.understand(question, user="alice", as_of=AS_OF,
                                     answers=[("analysis", "line")])  # fmt: skip
    assert understood.outcome == "ready", (understood.message, understood.question)
    assert any("averge" in w for w in understood.warnings), understood.warnings
    assert len(understood.graphs) == 1
    answer = pipeline.retrieve(question, user="alice", as_of=AS_OF, answers=[]).answer
    assert answer["status"] == "completed", answer["answer"]
    assert answer["understood_as"] == understood.understood_as


# --- the same work through the HTTP port the operator calls --------------------------------


@pytest.fixture(scope="module")
def served(pipeline: LocalPipeline) -> Iterator[tuple[str, PipelineService]]:
    """``pipeline`` behind the analyst's HTTP service, on a loopback port of a thread's loop."""
    service = PipelineService(pipeline, max_concurrent=4)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(service), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # a loaded machine starts it slowly
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield url, service
    server.should_exit = True
    thread.join(timeout=10)


def test_the_http_port_gives_the_operator_what_the_work_gives(
    pipeline: LocalPipeline, served: tuple[str, PipelineService], lake: Path
) -> None:
    url, _ = served

    async def through_http() -> tuple[Any, Retrieved, Any, Any]:
        client = HttpPipeline(url)
        try:
            understood = await client.understand(OURS, user="alice", as_of=AS_OF, answers=[])
            got = await client.retrieve(OURS, user="alice", as_of=AS_OF, answers=[])
            graph = await client.graph(understood.graphs[0].key) if understood.graphs else None
            gone = await client.graph("0" * 16)  # a key no graph has
            return understood, got, graph, gone
        finally:
            await client.aclose()

    understood, got, graph, gone = asyncio.run(through_http())
    assert understood == pipeline.understand(OURS, user="alice", as_of=AS_OF, answers=[])
    assert _values(got.answer) == pytest.approx(_power_of_900(lake))
    assert got.answer["understood_as"] == understood.understood_as
    assert gone is None
    if graph is not None:
        assert graph.key == understood.graphs[0].key and graph.triples > 0


def test_an_answer_named_by_its_key_is_worked_out_once_for_callers_that_ask_again(
    served: tuple[str, PipelineService], lake: Path
) -> None:
    """Two operators' calls at once (one restarted while the first waited) and a third after:
    one run of the pipeline, the same answer to all three."""
    url, service = served
    ask = Ask(key=f"query-uid-{time.monotonic_ns()}/0")

    async def three_calls() -> list[Retrieved]:
        client = HttpPipeline(url)
        try:
            first, second = await asyncio.gather(
                client.retrieve(OURS, user="alice", as_of=AS_OF, answers=[], ask=ask),
                client.retrieve(OURS, user="alice", as_of=AS_OF, answers=[], ask=ask),
            )
            third = await client.retrieve(OURS, user="alice", as_of=AS_OF, answers=[], ask=ask)
            return [first, second, third]
        finally:
            await client.aclose()

    before = service.started
    answers = asyncio.run(three_calls())
    assert service.started - before == 1
    assert answers[0].answer["request_id"] == answers[1].answer["request_id"] \
        == answers[2].answer["request_id"]  # fmt: skip
    assert _values(answers[2].answer) == pytest.approx(_power_of_900(lake))


def test_an_analyst_that_cannot_be_reached_is_a_wait_not_a_failure() -> None:
    client = HttpPipeline(f"http://127.0.0.1:{_free_port()}")

    async def call() -> None:
        try:
            await client.understand(OURS, user="alice", as_of=AS_OF, answers=[])
        finally:
            await client.aclose()

    with pytest.raises(AnalystUnavailableError) as caught:
        asyncio.run(call())
    assert "cannot be reached" in caught.value.message and caught.value.hint


def test_the_pipeline_port_takes_only_calls_with_the_releases_token(
    pipeline: LocalPipeline, lake: Path
) -> None:
    """Served as `oda-analyst serve` serves it with ODA_MCP_TOKEN set (the chart's case): a
    call without the token is refused before any work, the operator's (with it) answered."""
    token = "release-token-for-this-test"
    guard = [Middleware(BearerAuth, token=token, what="the pipeline port")]
    service = PipelineService(pipeline, max_concurrent=2)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(service, guard), host="127.0.0.1",
                                           port=port, log_level="warning",
                                           lifespan="off"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180  # a loaded machine starts it slowly
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    url = f"http://127.0.0.1:{port}"

    async def calls() -> tuple[Exception | None, Retrieved]:
        anonymous = HttpPipeline(url)
        operator = HttpPipeline(url, headers=bearer_header(token))
        try:
            try:
                await anonymous.retrieve(OURS, user="alice", as_of=AS_OF, answers=[])
                refused: Exception | None = None
            except AnalystCallError as err:
                refused = err
            return refused, await operator.retrieve(OURS, user="alice", as_of=AS_OF, answers=[])
        finally:
            await anonymous.aclose()
            await operator.aclose()

    try:
        refused, got = asyncio.run(calls())
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert isinstance(refused, AnalystCallError) and "401" in refused.message
    assert service.started == 1  # the refused call did no work
    assert _values(got.answer) == pytest.approx(_power_of_900(lake))
