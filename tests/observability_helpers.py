"""Spans and metrics as tests read them back: one in-memory exporter on the process's provider
(processors cannot be removed, so it is added once), and Prometheus samples by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from oda_analyst.observability.tracing import add_span_processor

_EXPORTER: list[InMemorySpanExporter] = []


def memory_spans() -> InMemorySpanExporter:
    """The process's in-memory exporter (cleared by the caller when it starts)."""
    if not _EXPORTER:
        exporter = InMemorySpanExporter()
        add_span_processor(SimpleSpanProcessor(exporter))
        _EXPORTER.append(exporter)
    return _EXPORTER[0]


def sample(name: str, labels: Mapping[str, str] | None = None) -> float:
    """A sample's value in the default registry (0 when it has not been recorded yet)."""
    value = REGISTRY.get_sample_value(name, dict(labels or {}))
    return 0.0 if value is None else value


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {[s.name for s in spans]}"
    return found[0]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    for s in spans:
        ctx = s.get_span_context()
        if ctx is not None and ctx.span_id == span.parent.span_id:
            return s
    return None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})
