"""Tracing: one OpenTelemetry TracerProvider per process, set up from the settings.

Every span goes to the local trace file (``tracefile``: one JSON file per trace under
``Settings.traces_location``) and, when ``ODA_LANGFUSE_HOST`` and its keys are set, to LangFuse,
which takes OTLP/HTTP at ``<host>/api/public/otel/v1/traces`` with the project's public and
secret key as basic auth. Code creates spans with the plain OpenTelemetry API
(``trace.get_tracer(__name__)``) or with the helpers here; MCP calls carry the trace context
(FastMCP puts it in the request's ``_meta``), so a tool's spans join the caller's trace.

``request_trace`` opens a request's span — a new trace, or a child when the caller already has
one (the coordinator, an MCP server span) — and says where its trace file will be.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, Status, StatusCode

from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import ConfigError, OdaError
from oda_analyst.observability.tracefile import TraceFileExporter, trace_id_hex

TRACER = "oda_analyst"
SERVICE = "oda-analyst"
LANGFUSE_PATH = "/api/public/otel/v1/traces"
EXPORT_TIMEOUT_S = 5.0
"""Longest one batch may take to reach LangFuse, retries included: also how long a process may
wait at exit for an unreachable LangFuse (the local trace file never waits)."""
MAX_ATTRIBUTE_CHARS = 8000
"""Longest text kept in one attribute (a question, SPARQL, a tool's arguments); the rest is cut
with a marker, so a trace never carries a whole result set."""


class _Switch(SpanProcessor):
    """A processor whose target can be replaced: the process exports to one LangFuse at a time
    (the last one configured), and a test's receiver does not outlive the test."""

    def __init__(self) -> None:
        self.inner: SpanProcessor | None = None
        self.key: tuple[str, str] | None = None

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        if self.inner is not None:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.inner is not None:
            self.inner.on_end(span)

    def replace(self, inner: SpanProcessor | None, key: tuple[str, str] | None) -> None:
        old, self.inner, self.key = self.inner, inner, key
        if old is not None:
            old.shutdown()

    def shutdown(self) -> None:
        self.replace(None, None)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis) if self.inner is not None else True


@dataclass
class _State:
    provider: TracerProvider
    files: TraceFileExporter
    langfuse: _Switch


_lock = threading.Lock()
_state: _State | None = None


def langfuse_exporter(settings: Settings) -> SpanExporter | None:
    """The OTLP/HTTP exporter to LangFuse the settings ask for, or None when none is set."""
    host = settings.langfuse_host
    public, secret = settings.langfuse_public_key, settings.langfuse_secret_key
    if not host:
        return None
    if not public or not secret:
        raise ConfigError(
            "ODA_LANGFUSE_HOST is set but not both of its keys",
            hint="set ODA_LANGFUSE_PUBLIC_KEY (pk-lf-…) and ODA_LANGFUSE_SECRET_KEY (sk-lf-…) "
            "from the LangFuse project settings, or unset ODA_LANGFUSE_HOST",
        )

    # The exporter retries on its own within EXPORT_TIMEOUT_S and says so at WARNING on every
    # retry; the one line worth showing is its final ERROR (the batch was dropped).
    logging.getLogger("opentelemetry.exporter").setLevel(logging.ERROR)
    auth = base64.b64encode(f"{public}:{secret}".encode()).decode()
    return OTLPSpanExporter(
        endpoint=host + LANGFUSE_PATH,
        headers={"Authorization": f"Basic {auth}", "x-langfuse-ingestion-version": "4"},
        timeout=EXPORT_TIMEOUT_S,
    )


def setup_tracing(settings: Settings | None = None) -> TracerProvider:
    """The process's provider, created on the first call (and installed as the global one
    unless another SDK provider already is: then ours feeds that one's processors too); every
    call points the LangFuse export at the settings' LangFuse (or at none)."""
    global _state  # noqa: PLW0603 - one provider per process, by OpenTelemetry's design
    settings = settings or get_settings()
    with _lock:
        if _state is None:
            current = trace.get_tracer_provider()
            if isinstance(current, TracerProvider):
                provider = current
            else:
                provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
                trace.set_tracer_provider(provider)
            files = TraceFileExporter(settings.traces_location)
            switch = _Switch()
            provider.add_span_processor(SimpleSpanProcessor(files))
            provider.add_span_processor(switch)
            _state = _State(provider, files, switch)
        state = _state
        key = (
            (settings.langfuse_host or "", settings.langfuse_public_key or "")
            if settings.langfuse_host
            else None
        )
        if key != state.langfuse.key:
            exporter = langfuse_exporter(settings)
            state.langfuse.replace(
                None
                if exporter is None
                else BatchSpanProcessor(exporter, schedule_delay_millis=500),
                key,
            )
    return state.provider


def add_span_processor(processor: SpanProcessor) -> None:
    """Add a processor (an in-memory exporter in tests, another backend) to the provider."""
    setup_tracing().add_span_processor(processor)


def flush(timeout_s: float = 10.0) -> bool:
    """Send what is buffered (the LangFuse batch) now; True when everything went out."""
    with _lock:
        state = _state
    return True if state is None else state.provider.force_flush(int(timeout_s * 1000))


@functools.cache
def tracer() -> trace.Tracer:
    """Our tracer (a proxy until a provider is installed, then the provider's)."""
    return trace.get_tracer(TRACER)


# --- attributes --------------------------------------------------------------------------------


def clip(text: str, limit: int = MAX_ATTRIBUTE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more chars)"


def as_attribute(value: Any) -> Any:
    """A value OpenTelemetry takes: primitives and lists of one primitive type as they are,
    anything else as (bounded) JSON text."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, list | tuple) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {str, int, float, bool}:
            return [clip(v) if isinstance(v, str) else v for v in value]
    return clip(json.dumps(value, default=str, ensure_ascii=False))


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Set every attribute that is not None, converted by ``as_attribute``."""
    if not span.is_recording():
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, as_attribute(value))


# --- spans -------------------------------------------------------------------------------------


@contextmanager
def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, observation: str = "span"
) -> Iterator[Span]:
    """A child span of the current one; ``observation`` is LangFuse's type (span, generation,
    tool, agent, retriever, chain). An exception marks it failed, with its code when ours."""
    with tracer().start_as_current_span(
        name, record_exception=False, set_status_on_exception=False
    ) as current:
        set_attributes(current, {"langfuse.observation.type": observation, **(attributes or {})})
        try:
            yield current
        except BaseException as exc:
            failed(current, exc)
            raise


def failed(current: Span, exc: BaseException) -> None:
    """Mark ``current`` failed by ``exc``: our errors with their code and hint."""
    if not current.is_recording():
        return
    if isinstance(exc, OdaError):
        set_attributes(current, {"error.type": exc.code, "oda.error.hint": exc.hint})
        message = exc.message
    else:
        current.set_attribute("error.type", type(exc).__qualname__)
        message = str(exc) or type(exc).__name__
    current.record_exception(exc)
    current.set_status(Status(StatusCode.ERROR, clip(message, 500)))


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the current span (a rejected query, a cache hit)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.add_event(name, {k: as_attribute(v) for k, v in (attributes or {}).items()
                                 if v is not None})  # fmt: skip


@dataclass(frozen=True)
class TraceHandle:
    """The trace a request belongs to: its id and the local file it is written to."""

    trace_id: str
    path: Path
    span: Span


@contextmanager
def request_trace(
    name: str,
    *,
    settings: Settings | None = None,
    attributes: Mapping[str, Any] | None = None,
    observation: str = "agent",
) -> Iterator[TraceHandle]:
    """A request's span — the root of a new trace, or a child of the caller's — and where the
    trace's file is written (when the trace's first local span ends)."""
    settings = settings or get_settings()
    setup_tracing(settings)
    with span(name, attributes, observation=observation) as current:
        ctx = current.get_span_context()
        assert _state is not None
        path = _state.files.route(ctx.trace_id, settings.traces_location)
        yield TraceHandle(trace_id_hex(ctx.trace_id), path, current)


def current_trace_id() -> str | None:
    ctx = trace.get_current_span().get_span_context()
    return trace_id_hex(ctx.trace_id) if ctx.is_valid else None
