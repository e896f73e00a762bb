"""Export to LangFuse, received by a local OTLP/HTTP receiver; sandboxed runs traced and counted.

The receiver is a plain HTTP server on loopback that decodes what the OTLP/HTTP exporter sends
(protobuf ``ExportTraceServiceRequest``) and keeps the headers, so the test checks the path,
the basic-auth credentials and the ingestion header LangFuse expects, and the spans themselves.
The request it traces is a real retriever request on a generated lake; the sandbox runs are
real gVisor or bubblewrap runs.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from codeagent_helpers import require
from fixtures_embeddings import shared_cache_dir
from fixtures_lake import tiny_power_lake
from llama_server import ModelEndpoint
from observability_helpers import attrs, memory_spans, sample
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace
from oda_analyst.config import load_settings
from oda_analyst.llm import LLMClient
from oda_analyst.observability.tracefile import read_trace
from oda_analyst.observability.tracing import LANGFUSE_PATH, flush, request_trace, setup_tracing
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.service import Retriever

POWER_Q = "average node power of node 900 on 1 June 2022 from 00:00 to 01:00"
PUBLIC, SECRET = "pk-lf-test", "sk-lf-test"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    spans: list[dict[str, Any]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        got = Received(self.path, {k.lower(): v for k, v in self.headers.items()})
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for s in scope.spans:
                    values = {kv.key: _value(kv.value) for kv in s.attributes}
                    got.spans.append({"name": s.name, "trace_id": s.trace_id.hex(),
                                      "attributes": values})  # fmt: skip
        with self.server.lock:
            self.server.received.append(got)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet
        return None


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class _Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[Received] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)  # fmt: skip
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None


def test_a_request_is_exported_to_langfuse_over_otlp_with_basic_auth(
    receiver: _Receiver, tmp_path: Path, metric_index: None
) -> None:
    lake = tiny_power_lake(tmp_path / "lake")
    settings = load_settings(lake=str(lake), data_dir=tmp_path / "data", redis_url=None,
                             sparql_endpoint=None, langfuse_host=receiver.url,
                             langfuse_public_key=PUBLIC, langfuse_secret_key=SECRET)  # fmt: skip
    try:
        got = Retriever(settings).query(POWER_Q, as_of=datetime(2022, 6, 15, tzinfo=UTC))
        assert got.status == "completed", got.answer
        assert flush()
    finally:
        setup_tracing(load_settings(data_dir=tmp_path / "data"))  # no LangFuse for later tests
    with receiver.lock:
        received = list(receiver.received)
    assert received, "nothing reached the receiver"
    auth = base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
    for r in received:
        assert r.path == LANGFUSE_PATH
        assert r.headers["authorization"] == f"Basic {auth}"
        assert r.headers["x-langfuse-ingestion-version"] == "4"
        assert r.headers["content-type"] == "application/x-protobuf"
    trace_id = Path(str(got.trace)).stem
    exported = [s for r in received for s in r.spans if s["trace_id"] == trace_id]
    in_file = read_trace(Path(str(got.trace)))["spans"]
    assert sorted(s["name"] for s in exported) == sorted(s["name"] for s in in_file)
    root = next(s for s in exported if s["name"] == "retriever.query")
    assert root["attributes"]["langfuse.observation.type"] == "retriever"
    assert root["attributes"]["oda.status"] == "completed"
    assert root["attributes"]["session.id"] == got.request_id


@pytest.mark.parametrize("backend", ["gvisor", "bwrap"])
def test_sandbox_runs_are_spans_and_counted_by_backend_and_outcome(
    backend: str, tmp_path: Path
) -> None:
    require(backend)
    exporter = memory_spans()
    exporter.clear()
    ok = {"backend": backend, "outcome": "ok"}
    refused = {"backend": "none", "outcome": "refused"}
    before_ok, before_refused = (
        sample("oda_sandbox_executions_total", ok),
        sample("oda_sandbox_executions_total", refused),
    )
    before_time = sample("oda_sandbox_execution_duration_seconds_count", {"backend": backend})
    ws = Workspace(tmp_path / "alice")
    code = "open('/out/n.txt', 'w').write(str(6 * 7))\nprint('done')"
    ran = execute(code, ws, backend=backend)
    assert ran.status == "ok", ran.stderr
    denied = execute("import subprocess\nsubprocess.run(['id'])", ws, backend=backend)
    assert denied.status == "refused"
    assert sample("oda_sandbox_executions_total", ok) == before_ok + 1
    assert sample("oda_sandbox_executions_total", refused) == before_refused + 1
    assert sample("oda_sandbox_execution_duration_seconds_count", {"backend": backend}) == (
        before_time + 1
    )  # a refused run never ran: no duration
    spans = [s for s in exporter.get_finished_spans() if s.name == "codeagent.sandbox_execute"]
    assert len(spans) == 2
    first, second = (attrs(s) for s in spans)
    assert first["oda.sandbox.backend"] == backend and first["oda.sandbox.status"] == "ok"
    assert first["oda.sandbox.exit_code"] == 0 and first["oda.sandbox.files"] == ("n.txt",)
    assert first["oda.code"] == code and len(first["oda.code.sha256"]) == 64
    assert second["oda.sandbox.status"] == "refused" and second["oda.audit.findings"] >= 1
    assert spans[1].status.status_code.name == "UNSET"  # a refusal is an answer, not a fault


@pytest.mark.timeout(900)
def test_a_real_model_call_is_a_generation_span_with_the_servers_usage(
    tmp_path: Path, llama: ModelEndpoint
) -> None:
    endpoint = llama  # the session's server: a span does not need a server of its own
    exporter = memory_spans()
    exporter.clear()
    labels = {"component": "greeting", "model": endpoint.model, "type": "output"}
    before = sample("oda_llm_tokens_total", labels)
    with (
        LLMClient(endpoint.base_url, endpoint.model, read_timeout_s=600) as client,
        request_trace("req", settings=load_settings(data_dir=tmp_path)) as handle,
    ):
        result = client.chat(
            [{"role": "user", "content": "Say hello."}], stage="greeting", max_tokens=12
        )
    gen = next(s for s in exporter.get_finished_spans() if s.name == f"chat {endpoint.model}")
    a = attrs(gen)
    assert result.usage.reported
    assert a["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens > 0
    assert a["gen_ai.usage.output_tokens"] == result.usage.completion_tokens
    assert a["gen_ai.response.model"] == result.model
    assert a["langfuse.observation.output"] == result.content
    assert sample("oda_llm_tokens_total", labels) == before + result.usage.completion_tokens
    spans = {s["name"] for s in read_trace(handle.path)["spans"]}
    assert spans == {"req", f"chat {endpoint.model}"}
