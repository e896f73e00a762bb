"""The few calls instrumented code makes: each both traces and counts, so a call site is one
line and the span and the metric can never disagree."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span

from oda_analyst.observability import metrics
from oda_analyst.observability.provenance import sha256_text
from oda_analyst.observability.tracing import event, set_attributes, span


@contextmanager
def stage(component: str, name: str, attributes: Mapping[str, Any] | None = None
          ) -> Iterator[Span]:  # fmt: skip
    """A stage of a request: a span ``<component>.<name>`` and its latency in
    ``oda_stage_duration_seconds``, failed or not."""
    start = time.perf_counter()
    try:
        with span(f"{component}.{name}", {"oda.stage": name, **(attributes or {})}) as current:
            yield current
    finally:
        metrics.stage_time(component, name, time.perf_counter() - start)


def validated(source: str, sparql: str, errors: Sequence[tuple[str, str]]) -> None:
    """A validator verdict on ``sparql`` (``errors``: its error diagnostics as (code, message);
    empty when it passed): an event on the current span and the validation counters."""
    codes = [code for code, _ in errors]
    metrics.validation(source, codes)
    if errors:
        event("sparql.rejected", {
            "oda.sparql.source": source, "oda.sparql": sparql, "oda.validator.codes": codes,
            "oda.validator.messages": [message for _, message in errors],
        })  # fmt: skip
    else:
        event("sparql.validated", {"oda.sparql.source": source, "oda.sparql": sparql})


def annotate(current: Span, attributes: Mapping[str, Any]) -> None:
    """Add attributes to a span (None values are skipped)."""
    set_attributes(current, attributes)


@contextmanager
def sandbox_run(code: str, *, warm: bool) -> Iterator[Span]:
    """The span of one audited, sandboxed run of ``code``; ``sandbox_done`` completes it."""
    attrs = {"oda.code": code, "oda.code.sha256": sha256_text(code), "oda.sandbox.warm": warm}
    with span("codeagent.sandbox_execute", attrs, observation="tool") as current:
        yield current


def sandbox_done(current: Span, *, backend: str, status: str, exit_code: int | None,
                 duration_s: float | None, findings: int, files: Sequence[str],
                 note: str | None) -> None:  # fmt: skip
    """Record a run's outcome on its span and in ``oda_sandbox_executions_total``."""
    set_attributes(current, {
        "oda.sandbox.backend": backend, "oda.sandbox.status": status,
        "oda.sandbox.exit_code": exit_code, "oda.sandbox.duration_s": duration_s,
        "oda.audit.findings": findings, "oda.sandbox.files": list(files) or None,
        "oda.sandbox.note": note, "langfuse.observation.output": f"{status}: {note or ''}".strip(),
    })  # fmt: skip
    ran = status != "refused"
    metrics.sandbox_run(backend, status, duration_s if ran else None)
