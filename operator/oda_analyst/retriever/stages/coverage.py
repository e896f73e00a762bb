"""What the lake holds for one request: no data is an answer, never a number.

SPARQL's ``AVG``/``SUM``/``COUNT`` over an empty group is 0, so a window the lake does not cover
would otherwise complete with ``avg_value = 0``. Two checks keep that from happening: before a
graph is built, the partition listing says which of the request's metrics have no file at all in
its window (one listing, no data read); after it is built, an ``ASK`` says whether the graph holds
any reading (the partition may exist while the asked nodes or hours have none).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from oda_analyst.lake import Lake
from oda_analyst.lake.schema import plugin_from_folder
from oda_analyst.lake.storage import FileInfo
from oda_analyst.ontology.namespaces import oda
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.request import GroundedRequest

_ASK_READINGS = f"ASK {{ {{ ?r <{oda('value')}> ?v }} UNION {{ ?r <{oda('textValue')}> ?v }} }}"


def readings_span(request: GroundedRequest) -> tuple[datetime | None, datetime | None]:
    """The span the request's readings come from: its window, or that of its job windows."""
    if request.job_windows:
        return (min(w.start for w in request.job_windows), max(w.end for w in request.job_windows))
    return request.start, request.end


def request_files(lake: Lake, request: GroundedRequest) -> list[FileInfo]:
    """The lake files the request reads: its metrics over its span, and the job table when jobs
    are involved (one listing, no data read)."""
    start, end = readings_span(request)
    jobs = bool(request.jobs or request.include_jobs or request.job_windows)
    return lake.partition_files(request.metrics, start=start, end=end, jobs=jobs)


def metrics_without_files(request: GroundedRequest, files: Sequence[FileInfo]
                          ) -> list[tuple[str, str]]:  # fmt: skip
    """The request's ``(plugin, metric)`` pairs with no file among ``request_files``."""
    held = set()
    for f in files:  # year_month=YY-MM/plugin=<folder>/metric=<metric>/...
        parts = f.rel.split("/")
        if len(parts) > 2:
            plugin = plugin_from_folder(parts[1].removeprefix("plugin="))
            held.add((plugin, parts[2].removeprefix("metric=")))
    return [pair for pair in request.metrics if pair not in held]


def graph_has_readings(store: GraphStore, graph: str) -> bool:
    """Whether ``graph`` holds at least one reading value."""
    return bool(store.query(_ASK_READINGS, default_graph=graph).boolean)


def _window_text(request: GroundedRequest) -> str:
    start, end = readings_span(request)
    if start is None or end is None:
        return "the lake"
    fmt = "%Y-%m-%d %H:%M"
    span = f"{start:{fmt}}–{end:{fmt}} UTC"
    return f"the jobs' runs ({span})" if request.job_windows else span


def _names(metrics: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{p}/{m}" for p, m in metrics)


def no_data_message(request: GroundedRequest, metrics: Sequence[tuple[str, str]] | None = None
                    ) -> str:  # fmt: skip
    """'no data for ipmi/ambient in 2022-07-01 00:00–2022-07-02 00:00 UTC' (the months the lake
    holds are added by the caller, which knows the lake)."""
    return f"no data for {_names(metrics or request.metrics)} in {_window_text(request)}"


def partial_note(missing: Sequence[tuple[str, str]], request: GroundedRequest) -> str:
    """The warning when some, not all, of the request's metrics have no data in its span."""
    kept = [m for m in request.metrics if m not in missing]
    return f"{no_data_message(request, missing)}: the answer covers only {_names(kept)}"
