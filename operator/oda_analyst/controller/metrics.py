"""The operator's own Prometheus metrics, on a registry of their own (what the operator's
``/metrics`` port serves; the analyst's metrics are ``oda_analyst.observability.metrics``).

Names follow the analyst's: the ``oda_operator_`` prefix, seconds in the name, ``_total`` on
counters (prometheus_client adds it). Label values are small closed sets (a handler kind, an
outcome, a phase, a pod kind, a webhook and its decision): never a query, a user or a namespace.

The handlers and reconcilers call the recording functions below (one line each); they never
raise. The chart's PrometheusRule alerts on these names (templates/monitoring.yaml).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import kopf
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from oda_analyst.controller import names

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, memory, open fds
PlatformCollector(registry=REGISTRY)

_RECONCILE_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_QUERY_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)

RECONCILES = Counter(
    "oda_operator_reconciles",
    "Handler runs, by kind (query, schedule, cache, cache-gc, query-delete, cache-delete, "
    "alert-link) and outcome: done; waiting (kopf calls again later, e.g. for a pod); failed "
    "(permanently, said in status); error (unexpected, kopf retries).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "oda_operator_reconcile_duration_seconds",
    "Time of one handler run (seconds), by kind.",
    ["kind"],
    buckets=_RECONCILE_S,
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "oda_operator_queue_depth",
    "Queries waiting for a place with the analyst (status.admission Queued): the bounds "
    "ODA_OPERATOR_MAX_QUERIES(_PER_NAMESPACE, _PER_USER) are reached.",
    registry=REGISTRY,
)
ADMITTED = Gauge(
    "oda_operator_queries_admitted",
    "Queries the analyst works on now (at most ODA_OPERATOR_MAX_QUERIES).",
    registry=REGISTRY,
)
QUERY_SECONDS = Histogram(
    "oda_operator_query_duration_seconds",
    "Time from a query's creation to its final phase (seconds), by that phase (Completed, "
    "Rejected, Failed); observed once, when the operator writes the phase.",
    ["phase"],
    buckets=_QUERY_S,
    registry=REGISTRY,
)
PODS = Counter(
    "oda_operator_pods_launched",
    "Workloads the operator created, by kind (analysis: a query's sandbox pod; vkg-builder: "
    "a graph's builder Job).",
    ["kind"],
    registry=REGISTRY,
)
WEBHOOK = Counter(
    "oda_operator_webhook_decisions",
    "Admission webhook answers, by webhook (stamp-user, check-query) and decision (stamped, "
    "kept, allowed, refused).",
    ["webhook", "decision"],
    registry=REGISTRY,
)


_PHASES = (names.PENDING, names.BUILDING, names.RETRIEVING, names.ANALYSING, names.WAITING,
           names.COMPLETED, names.REJECTED, names.FAILED)  # fmt: skip


class _Phases(Collector):
    """``oda_operator_queries{phase}``: the queries this operator has seen, by their phase
    (forgotten when deleted). A restarted operator counts them again as kopf resumes them."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "oda_operator_queries",
            "AnalystQueries by phase, as the operator last saw or wrote it.",
            labels=["phase"],
        )
        counts = dict.fromkeys(_PHASES, 0)
        for phase in self.of.values():
            counts[phase] = counts.get(phase, 0) + 1
        for phase, n in sorted(counts.items()):
            family.add_metric([phase], n)
        yield family


PHASES = _Phases()
REGISTRY.register(PHASES)


# --- recording ---------------------------------------------------------------------------------


@contextmanager
def reconcile(kind: str) -> Iterator[None]:
    """Count and time one handler run of ``kind``, by how it ended (the exception goes on)."""
    began = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "done"
    except kopf.TemporaryError:
        outcome = "waiting"
        raise
    except kopf.PermanentError:
        outcome = "failed"
        raise
    finally:
        RECONCILES.labels(kind, outcome).inc()
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - began)


def query_phase(uid: str, phase: str | None) -> None:
    """The phase of query ``uid`` as the operator saw or wrote it (None: not started)."""
    PHASES.of[uid] = phase or names.PENDING


def query_finished(phase: str, seconds: float) -> None:
    """A query reached its final ``phase`` ``seconds`` after it was created."""
    QUERY_SECONDS.labels(phase).observe(max(0.0, seconds))


def forget_query(uid: str) -> None:
    PHASES.of.pop(uid, None)


def pod_launched(kind: str) -> None:
    PODS.labels(kind).inc()


def webhook_decision(webhook: str, decision: str) -> None:
    WEBHOOK.labels(webhook, decision).inc()


class _Queue(Protocol):
    @property
    def running(self) -> int: ...

    @property
    def waiting(self) -> int: ...


def watch_admission(admission: _Queue) -> None:
    """The queue depth and the admitted queries, read from the admission at each scrape."""
    QUEUE_DEPTH.set_function(lambda: admission.waiting)
    ADMITTED.set_function(lambda: admission.running)


# --- serving -----------------------------------------------------------------------------------

_SERVERS: dict[int, Any] = {}


def serve(port: int | None, host: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``port`` (once per process; None: not served)."""
    if port is None or port in _SERVERS:
        return
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    _SERVERS[port] = server


def stop() -> None:
    while _SERVERS:
        _port, server = _SERVERS.popitem()
        server.shutdown()
        server.server_close()
