"""The trace file, the span helpers and the model-call span, with the real OpenTelemetry SDK.

The model calls go to a scripted OpenAI-compatible server on loopback (a protocol test: the
figures asserted are the usage numbers that server sends, so the test checks what the client
records, not what a model says).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from observability_helpers import attrs, memory_spans, one, parent_of, sample
from oda_analyst.codeagent import mcp_server
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.config import load_settings
from oda_analyst.errors import ConfigError, QueryRejectedError
from oda_analyst.llm import LLMClient, LLMError, TokenLedger
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.mcptools import USER_ENV
from oda_analyst.observability.provenance import ModelCall, figures_digest, model_calls
from oda_analyst.observability.tracefile import FORMAT, TraceFileExporter, read_trace
from oda_analyst.observability.tracing import (
    MAX_ATTRIBUTE_CHARS,
    as_attribute,
    langfuse_exporter,
    request_trace,
    span,
)
from scripted_server import ScriptedOpenAIServer, ScriptStep


def _settings(tmp_path: Path, **extra: object) -> object:
    return load_settings(data_dir=tmp_path / "data", **extra)


def test_a_request_trace_is_one_file_with_every_nested_span(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    with request_trace("outer", settings=settings, attributes={"oda.question": "q"}) as handle:
        with span("middle", {"n": 1}), span("inner", observation="tool"):
            pass
        assert not handle.path.exists()  # written when the trace's root ends
    assert handle.path == tmp_path / "data" / "traces" / f"{handle.trace_id}.json"
    body = read_trace(handle.path)
    assert body["format"] == FORMAT and body["trace_id"] == handle.trace_id
    spans = {s["name"]: s for s in body["spans"]}
    assert set(spans) == {"outer", "middle", "inner"}
    assert spans["outer"]["parent_span_id"] is None
    assert spans["middle"]["parent_span_id"] == spans["outer"]["span_id"]
    assert spans["inner"]["parent_span_id"] == spans["middle"]["span_id"]
    assert spans["inner"]["attributes"]["langfuse.observation.type"] == "tool"
    assert spans["outer"]["attributes"]["oda.question"] == "q"
    assert all(s["duration_s"] >= 0 for s in body["spans"])


def test_a_failed_span_carries_our_error_code_and_message(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    with (
        pytest.raises(QueryRejectedError),
        request_trace("req", settings=settings) as handle,
        span("stage"),
    ):
        raise QueryRejectedError("no such metric", hint="name one the catalogue knows")
    stage = next(s for s in read_trace(handle.path)["spans"] if s["name"] == "stage")
    assert stage["status"] == "error"
    assert stage["status_message"] == "no such metric"
    assert stage["attributes"]["error.type"] == QueryRejectedError.code
    assert stage["events"][0]["name"] == "exception"


def test_spans_of_one_trace_from_two_processes_merge_into_one_file(tmp_path: Path) -> None:
    # Two exporters stand for a coordinator and an MCP server sharing the data folder: the
    # server's local root has a remote parent (the caller's span, carried in the MCP request).
    coordinator, server = TraceFileExporter(tmp_path), TraceFileExporter(tmp_path)
    provider_a, provider_b = TracerProvider(), TracerProvider()

    provider_a.add_span_processor(SimpleSpanProcessor(coordinator))
    provider_b.add_span_processor(SimpleSpanProcessor(server))
    with provider_a.get_tracer("t").start_as_current_span("coordinator") as root:
        ctx = root.get_span_context()
        remote = SpanContext(ctx.trace_id, ctx.span_id, is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))  # fmt: skip
        parent = trace.set_span_in_context(NonRecordingSpan(remote))
        with provider_b.get_tracer("t").start_as_current_span("tool query", context=parent):
            pass
        path = coordinator.path(ctx.trace_id)
        assert path.is_file()  # the server wrote its part when its local root ended
    spans = {s["name"]: s for s in read_trace(path)["spans"]}
    assert set(spans) == {"coordinator", "tool query"}
    assert spans["tool query"]["parent_span_id"] == spans["coordinator"]["span_id"]


def test_concurrent_requests_write_their_own_trace_files(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    paths: dict[int, Path] = {}

    def one_request(i: int) -> None:
        with request_trace(f"req-{i}", settings=settings) as handle:
            for j in range(5):
                with span(f"step-{i}-{j}"):
                    pass
        paths[i] = handle.path

    threads = [threading.Thread(target=one_request, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({p for p in paths.values()}) == 8
    for i, path in paths.items():
        names = sorted(s["name"] for s in read_trace(path)["spans"])
        assert names == sorted([f"req-{i}", *(f"step-{i}-{j}" for j in range(5))])


def test_attributes_are_bounded_and_structured_values_become_json() -> None:
    long = as_attribute("x" * (MAX_ATTRIBUTE_CHARS + 50))
    assert long.startswith("x" * MAX_ATTRIBUTE_CHARS) and long.endswith("(50 more chars)")
    assert json.loads(as_attribute({"a": [1, 2]})) == {"a": [1, 2]}
    assert as_attribute(["a", "b"]) == ["a", "b"]
    assert json.loads(as_attribute([1, "b"])) == [1, "b"]


def test_langfuse_needs_both_keys_and_takes_them_as_basic_auth(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ODA_LANGFUSE_PUBLIC_KEY"):
        langfuse_exporter(load_settings(data_dir=tmp_path, langfuse_host="http://127.0.0.1:1"))
    with pytest.raises(ConfigError, match="ODA_LANGFUSE_HOST"):
        load_settings(langfuse_host="langfuse:3000")
    none = langfuse_exporter(load_settings(data_dir=tmp_path))
    assert none is None


# --- the model client -------------------------------------------------------------------------


def test_every_generation_is_a_span_with_gen_ai_tokens_latency_and_model(tmp_path: Path) -> None:
    exporter = memory_spans()
    exporter.clear()
    labels = {"component": "intent", "model": "scripted-model", "type": "input"}
    before_in = sample("oda_llm_tokens_total", labels)
    before_out = sample("oda_llm_tokens_total", {**labels, "type": "output"})
    settings = load_settings(data_dir=tmp_path / "data")
    with ScriptedOpenAIServer([ScriptStep.reply("a plan", usage=(120, 7))]) as server:
        client = LLMClient(server.base_url, server.model)
        with request_trace("req", settings=settings):
            result = client.chat([{"role": "user", "content": "which metric?"}], stage="intent",
                                 max_tokens=64)  # fmt: skip
    assert result.content == "a plan"
    spans = exporter.get_finished_spans()
    gen = one(spans, "chat scripted-model")
    parent = parent_of(gen, spans)
    assert parent is not None and parent.name == "req"
    a = attrs(gen)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "scripted-model"
    assert a["gen_ai.response.model"] == "scripted-model"
    assert a["gen_ai.usage.input_tokens"] == 120
    assert a["gen_ai.usage.output_tokens"] == 7
    assert a["gen_ai.request.max_tokens"] == 64
    assert a["oda.stage"] == "intent"
    assert a["oda.llm.latency_s"] > 0
    assert a["langfuse.observation.type"] == "generation"
    assert a["langfuse.observation.output"] == "a plan"
    assert "which metric?" in a["langfuse.observation.input"]
    assert sample("oda_llm_tokens_total", labels) == before_in + 120
    assert sample("oda_llm_tokens_total", {**labels, "type": "output"}) == before_out + 7


def test_a_failed_generation_is_a_failed_span_with_its_error_code(tmp_path: Path) -> None:
    exporter = memory_spans()
    exporter.clear()
    labels = {"component": "grounding", "model": "scripted-model", "outcome": "error"}
    before = sample("oda_llm_request_duration_seconds_count", labels)
    with ScriptedOpenAIServer([ScriptStep.error(404, "no such route")]) as server:
        client = LLMClient(server.base_url, server.model, retry=RetryPolicy(max_retries=0))
        with pytest.raises(LLMError):
            client.chat([{"role": "user", "content": "hi"}], stage="grounding")
    gen = one(exporter.get_finished_spans(), "chat scripted-model")
    assert gen.status.status_code.name == "ERROR"
    assert "HTTP 404" in (gen.status.description or "")
    assert attrs(gen)["error.type"] == "llm_request_rejected"
    assert sample("oda_llm_request_duration_seconds_count", labels) == before + 1


# --- the provenance record (pure) ------------------------------------------------------------


def test_model_calls_come_from_the_token_ledger() -> None:

    ledger = TokenLedger()
    ledger.record("intent", prompt_tokens=100, completion_tokens=9, latency_s=0.5)
    ledger.record("intent", prompt_tokens=50, completion_tokens=1, latency_s=0.25)
    ledger.record("time", failed=True)
    got = model_calls(ledger.snapshot(), "qwen")
    assert got == (
        ModelCall(stage="intent", model="qwen", calls=2, input_tokens=150, output_tokens=10,
                  latency_s=0.75),
        ModelCall(stage="time", model="qwen", calls=1, failed_calls=1),
    )  # fmt: skip
    assert model_calls(TokenLedger().snapshot(), None) == ()


def test_the_figures_digest_ignores_summation_noise_but_not_a_changed_figure() -> None:

    base = figures_digest(["node", "avg"], [[900, 1234.5678901234]])
    assert figures_digest(["node", "avg"], [[900, 1234.5678901234 + 1e-10]]) == base
    assert figures_digest(["node", "avg"], [[900, 1234.5679]]) != base
    assert figures_digest(["node", "max"], [[900, 1234.5678901234]]) != base


# --- MCP tool spans ---------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_code_agent_tool_call_keeps_its_code_and_hash_but_not_uploads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv(USER_ENV, "alice")
    manager = SessionManager(tmp_path / "sessions")
    mcp_server.set_manager(manager)
    exporter = memory_spans()
    exporter.clear()
    payload = base64.b64encode(b"node,value\n900,1\n").decode()
    code = "print(open('/in/data.csv').read())"
    try:
        async with Client(mcp_server.mcp) as client:
            await client.call_tool("codeagent_init", {})
            await client.call_tool("codeagent_upload", {"name": "data.csv",
                                                        "content_base64": payload})  # fmt: skip
            with pytest.raises(ToolError):  # not started: code never runs unsandboxed
                await client.call_tool("codeagent_execute", {"code": code})
    finally:
        mcp_server.set_manager(None)
    spans = exporter.get_finished_spans()
    upload = attrs(one(spans, "tool codeagent_upload"))
    uploaded = json.loads(upload["gen_ai.tool.call.arguments"])
    assert uploaded["content_base64"] == f"<{len(payload)} base64 chars>"
    assert '"path_in_sandbox": "/in/data.csv"' in upload["gen_ai.tool.call.result"]
    run = one(spans, "tool codeagent_execute")
    args = json.loads(attrs(run)["gen_ai.tool.call.arguments"])
    assert args["code"] == code
    assert args["code_sha256"] == hashlib.sha256(code.encode()).hexdigest()
    assert run.status.status_code.name == "ERROR"
    assert attrs(run)["error.type"] == "ToolError"


# --- metric names -----------------------------------------------------------------------------


def test_our_metrics_follow_prometheus_naming_and_parse_back() -> None:

    families = {f.name: f for f in REGISTRY.collect() if f.name.startswith("oda_")}
    assert {"oda_requests", "oda_stage_duration_seconds", "oda_llm_tokens",
            "oda_validator_rejections", "oda_vkg_cache_hits", "oda_vkg_cache_misses",
            "oda_vkg_cache_evictions", "oda_vkg_cache_bytes",
            "oda_sandbox_executions"} <= set(families)  # fmt: skip
    for name, family in families.items():
        assert family.documentation, name
        if family.type == "histogram":
            assert name.endswith(("_seconds", "_bytes")), f"{name}: a histogram names its unit"
        if family.type == "gauge" and "bytes" in name:
            assert name.endswith("_bytes"), name
        for s in family.samples:
            if family.type == "counter" and not s.name.endswith("_created"):
                assert s.name == f"{name}_total", s.name
            assert not ({"user", "question", "request_id"} & set(s.labels)), s.name
    parsed = {f.name for f in text_string_to_metric_families(generate_latest().decode())}
    assert set(families) <= parsed
