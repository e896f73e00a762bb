"""The operator's pipeline adapter (``controller.pipeline_local.LocalPipeline``) on a real lake:
a query's own model endpoint (``spec.model``) is what its model-backed stages ask, an unreachable
one is reported and the answer still comes (by the rules), and a baseline backend answers from
the same lake. The model is a scripted OpenAI-compatible server on loopback: these tests check
which endpoint is asked, never what a model would answer."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from baseline_lake import write_baseline_lake
from fixtures_embeddings import shared_cache_dir
from oda_analyst.config import load_settings
from oda_analyst.controller.pipeline_local import LocalPipeline
from oda_analyst.controller.port import Ask, ModelEndpoint
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings
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
                                   ask=Ask(model=endpoint))  # fmt: skip
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
                               ask=Ask(model=endpoint))  # fmt: skip
    assert any("model" in w for w in answer["warnings"])
    assert _values(answer) == pytest.approx(_power_of_900(lake))


def test_a_served_model_that_is_not_the_named_one_is_a_problem(pipeline: LocalPipeline) -> None:
    with ScriptedOpenAIServer(model="served-model") as server:
        problem = pipeline.check_model(ModelEndpoint(server.base_url, "other-model"))
    assert problem is not None and "other-model" in problem


def test_the_sota1_backend_answers_from_the_same_lake(pipeline: LocalPipeline,
                                                      lake: Path) -> None:  # fmt: skip
    answer = pipeline.retrieve(f"total_power of node 900 {W}", user="alice", as_of=AS_OF,
                               answers=[], ask=Ask(backend="sota1"))  # fmt: skip
    assert answer["request_id"].startswith("sota1")
    assert _values(answer) == pytest.approx(_power_of_900(lake))
    refused = pipeline.retrieve(OURS, user="alice", as_of=AS_OF, answers=[],
                                ask=Ask(backend="sota1"))  # fmt: skip
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
    answer = pipeline.retrieve(question, user="alice", as_of=AS_OF, answers=[])
    assert answer["status"] == "completed", answer["answer"]
    assert answer["understood_as"] == understood.understood_as
