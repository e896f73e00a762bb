"""The local trace file: every span of one trace in one JSON file, ``<trace_id>.json``.

Spans are handed over one by one as they end (children before their parent). They wait in
memory per trace until the trace's local root ends — the span this process started without a
parent, or whose parent lives in another process (an MCP call carries the caller's trace
context) — and are then merged into the file. Merging, not overwriting, lets a retriever or
code-agent server that shares the data folder add its spans to the coordinator's file of the
same trace.

Format (``FORMAT``)::

    {"format": "oda-analyst-trace/1", "trace_id": "<32 hex>",
     "spans": [{"span_id", "parent_span_id", "name", "kind", "start", "end", "duration_s",
                "status", "status_message", "attributes": {...}, "events": [...]}, ...]}

Spans are sorted by start time; ``parent_span_id`` is null for the trace's root.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

FORMAT = "oda-analyst-trace/1"
MAX_OPEN_TRACES = 256
"""Traces kept in memory while their root is still open; the oldest is written out beyond it
(a root that never ends must not hold memory forever)."""
MAX_ROUTES = 4096
"""Traces whose folder is remembered. A trace may be written in several parts (each local root
that ends, e.g. an in-process MCP server's span, then the caller's), all to its folder."""


def trace_id_hex(trace_id: int) -> str:
    return f"{trace_id:032x}"


def span_id_hex(span_id: int) -> str:
    return f"{span_id:016x}"


def _time(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat().replace("+00:00", "Z")


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _attributes(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: _value(v) for k, v in (attrs or {}).items()}


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """One span as the trace file holds it."""
    ctx = span.get_span_context()
    assert ctx is not None
    parent = span.parent
    start, end = span.start_time, span.end_time
    return {
        "span_id": span_id_hex(ctx.span_id),
        "parent_span_id": None if parent is None else span_id_hex(parent.span_id),
        "name": span.name,
        "kind": span.kind.name.lower(),
        "start": _time(start),
        "end": _time(end),
        "duration_s": None if start is None or end is None else round((end - start) / 1e9, 6),
        "status": span.status.status_code.name.lower(),
        "status_message": span.status.description,
        "attributes": _attributes(span.attributes),
        "events": [
            {"name": e.name, "time": _time(e.timestamp), "attributes": _attributes(e.attributes)}
            for e in span.events
        ],
    }


def _local_root(span: ReadableSpan) -> bool:
    return span.parent is None or span.parent.is_remote


class TraceFileExporter(SpanExporter):
    """Writes each trace to ``<folder>/<trace_id>.json``; ``route`` sends one trace elsewhere."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._open: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._routes: OrderedDict[int, Path] = OrderedDict()

    def route(self, trace_id: int, folder: Path) -> Path:
        """Write trace ``trace_id`` under ``folder`` (the settings of the request that began
        it); return its file's path."""
        with self._lock:
            self._routes.setdefault(trace_id, folder)
            while len(self._routes) > MAX_ROUTES:
                self._routes.popitem(last=False)
            return self._path(trace_id)

    def path(self, trace_id: int) -> Path:
        with self._lock:
            return self._path(trace_id)

    def _path(self, trace_id: int) -> Path:
        folder = self._routes.get(trace_id, self.folder)
        return folder / f"{trace_id_hex(trace_id)}.json"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ready: list[tuple[Path, list[dict[str, Any]]]] = []
        with self._lock:
            for span in spans:
                ctx = span.get_span_context()
                if ctx is None:
                    continue
                self._open.setdefault(ctx.trace_id, []).append(span_record(span))
                if _local_root(span):
                    ready.append(self._take(ctx.trace_id))
            while len(self._open) > MAX_OPEN_TRACES:
                ready.append(self._take(next(iter(self._open))))
        try:
            for path, records in ready:
                merge_into(path, records)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _take(self, trace_id: int) -> tuple[Path, list[dict[str, Any]]]:
        return self._path(trace_id), self._open.pop(trace_id, [])

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        with self._lock:
            pending = [self._take(t) for t in list(self._open)]
        for path, records in pending:
            try:
                merge_into(path, records)
            except OSError:
                continue


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_suffix(".lock")
    with open(lock, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def merge_into(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Add ``records`` to the trace file at ``path`` (created if absent), atomically."""
    if not records:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        spans: dict[str, dict[str, Any]] = {}
        if path.is_file():
            try:
                for old in read_trace(path)["spans"]:
                    spans[old["span_id"]] = old
            except (ValueError, KeyError, TypeError):
                spans = {}  # a torn file from a crash: this write replaces it
        for rec in records:
            spans[rec["span_id"]] = rec
        body = {
            "format": FORMAT,
            "trace_id": path.stem,
            "spans": sorted(spans.values(), key=lambda s: (s["start"] or "", s["span_id"])),
        }
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        # One line, no indent: json's C encoder only runs without one (5-10x faster).
        tmp.write_text(json.dumps(body, separators=(",", ":"), default=str), "utf-8")
        os.replace(tmp, path)


def read_trace(path: Path) -> dict[str, Any]:
    """A trace file's content."""
    data = json.loads(path.read_text("utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not an oda-analyst trace file")
    return data
