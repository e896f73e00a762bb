"""Prometheus metrics on prometheus_client's default REGISTRY (what ``/metrics`` serves).

Names follow Prometheus conventions: the ``oda_`` prefix, base units in the name (seconds,
bytes), ``_total`` on counters (prometheus_client adds it to a Counter's name). Label values are
small closed sets (a status, a stage, an error code, a backend): never a user, a question or a
request id.

The recording functions are what the instrumented code calls; they never raise.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter(
    "oda_requests",
    "Requests answered, by component (retriever, coordinator) and final status.",
    ["component", "status"],
)
STAGE_SECONDS = Histogram(
    "oda_stage_duration_seconds",
    "Time spent in one stage of a request (seconds).",
    ["component", "stage"],
    buckets=_SECONDS,
)
LLM_TOKENS = Counter(
    "oda_llm_tokens",
    "Model tokens billed by the server, by component (the stage that called), model and "
    "type (input, output).",
    ["component", "model", "type"],
)
LLM_SECONDS = Histogram(
    "oda_llm_request_duration_seconds",
    "Latency of one model call (seconds), by component, model and outcome (ok, error).",
    ["component", "model", "outcome"],
    buckets=_SECONDS,
)
VALIDATIONS = Counter(
    "oda_sparql_validations",
    "SPARQL texts checked by the ontology validator, by source (compiled, model, repair) and "
    "outcome (passed, rejected).",
    ["source", "outcome"],
)
REJECTIONS = Counter(
    "oda_validator_rejections",
    "Validator errors that rejected a SPARQL text, by diagnostic code and source.",
    ["code", "source"],
)
VKG_HITS = Counter("oda_vkg_cache_hits", "Per-query graphs served from the VKG cache.")
VKG_MISSES = Counter("oda_vkg_cache_misses", "Per-query graphs built because none was cached.")
VKG_EVICTIONS = Counter("oda_vkg_cache_evictions", "Per-query graphs evicted (LRU) and dropped.")
VKG_BUILT_BYTES = Counter("oda_vkg_built_bytes", "Bytes of the per-query graphs built.")
VKG_BYTES = Gauge(
    "oda_vkg_cache_bytes", "Bytes held by the graphs in the VKG cache (as of its last change)."
)
VKG_GRAPHS = Gauge("oda_vkg_cache_graphs", "Graphs in the VKG cache (as of its last change).")
SANDBOX_RUNS = Counter(
    "oda_sandbox_executions",
    "Code runs by the code agent, by backend (gvisor, bwrap, none) and outcome (ok, refused, "
    "error, timeout, killed).",
    ["backend", "outcome"],
)
SANDBOX_SECONDS = Histogram(
    "oda_sandbox_execution_duration_seconds",
    "Wall-clock time of one sandboxed run (seconds).",
    ["backend"],
    buckets=_SECONDS,
)


def request_done(component: str, status: str) -> None:
    REQUESTS.labels(component=component, status=status).inc()


def stage_time(component: str, stage: str, seconds: float) -> None:
    STAGE_SECONDS.labels(component=component, stage=stage).observe(max(seconds, 0.0))


def llm_call(component: str, model: str, *, input_tokens: int, output_tokens: int,
             seconds: float, ok: bool) -> None:  # fmt: skip
    LLM_TOKENS.labels(component=component, model=model, type="input").inc(max(input_tokens, 0))
    LLM_TOKENS.labels(component=component, model=model, type="output").inc(max(output_tokens, 0))
    outcome = "ok" if ok else "error"
    LLM_SECONDS.labels(component=component, model=model, outcome=outcome).observe(seconds)


def validation(source: str, codes: list[str]) -> None:
    """One validator verdict: ``codes`` are its error codes (empty: it passed)."""
    VALIDATIONS.labels(source=source, outcome="rejected" if codes else "passed").inc()
    for code in codes:
        REJECTIONS.labels(code=code, source=source).inc()


def vkg_hit() -> None:
    VKG_HITS.inc()


def vkg_built(size_bytes: int) -> None:
    VKG_MISSES.inc()
    VKG_BUILT_BYTES.inc(max(size_bytes, 0))


def vkg_evicted(count: int = 1) -> None:
    VKG_EVICTIONS.inc(count)


def vkg_held(graphs: int, size_bytes: int) -> None:
    VKG_GRAPHS.set(graphs)
    VKG_BYTES.set(size_bytes)


def sandbox_run(backend: str, outcome: str, seconds: float | None) -> None:
    SANDBOX_RUNS.labels(backend=backend, outcome=outcome).inc()
    if seconds is not None:
        SANDBOX_SECONDS.labels(backend=backend).observe(max(seconds, 0.0))
