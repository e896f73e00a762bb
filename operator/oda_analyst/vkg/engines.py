"""Scan engines: who runs the per-partition scan-and-aggregate step of a pushed-down request.

The step is one task per partition (month x metric): read it from the lake with the request's
predicates and group its rows by node (and day) into partial aggregates (``pushdown.partials``).
Both engines run the same task function and return the same partial frames; ``pushdown`` combines
them. ``PolarsEngine`` (the default) runs the tasks in this process, one after the other (each is
a multi-threaded streaming Polars query). ``DaskEngine`` hands them to a ``dask.distributed``
cluster — a ``LocalCluster``, or the scheduler of a Dask operator ``DaskCluster`` on Kubernetes —
whose workers read the partitions from the lake themselves (a local folder they share, or S3/MinIO
with the same storage options), so only partial aggregates travel back.

``choose_engine`` picks per request from the estimated rows to scan; a setting can force either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import polars as pl

from oda_analyst.errors import UsageError
from oda_analyst.lake.reader import Lake

if TYPE_CHECKING:
    from oda_analyst.config import Settings
    from oda_analyst.vkg.pushdown import AggregateRequest

EngineChoice = Literal["auto", "polars", "dask"]
# Rows a request must scan before ``auto`` sends it to a Dask cluster (when one is configured):
# about a month of twenty 20 s metrics of all nodes; below it one process is as fast.
DASK_MIN_ROWS = 2_000_000_000


@dataclass(frozen=True)
class PartitionTask:
    """One partition to scan and aggregate: everything a worker needs, picklable."""

    location: str
    storage_options: tuple[tuple[str, str], ...]
    plugin: str
    metric: str
    start: datetime
    end: datetime
    nodes: tuple[int, ...] | None
    request: AggregateRequest
    label: str


def run_partition(task: PartitionTask) -> pl.DataFrame:
    """The partial aggregates of one partition (runs in this process or on a Dask worker)."""
    # pushdown imports this module for its engines; a Dask worker unpickles this function alone.
    from oda_analyst.vkg.pushdown import partials  # noqa: PLC0415

    lake = Lake(task.location, dict(task.storage_options))
    lf = lake.scan(
        task.plugin,
        task.metric,
        start=task.start,
        end=task.end,
        nodes=list(task.nodes) if task.nodes else None,
        tags_as_stored=True,
    )
    part = partials(lf, task.request).collect(engine="streaming")
    # Categorical codes mean nothing outside this process: nodes travel as ids.
    return part.with_columns(
        pl.col("node").cast(pl.String).cast(pl.Int64), pl.lit(task.metric).alias("source")
    )


Done = Callable[[PartitionTask, pl.DataFrame], None]
"""Told each finished task and its partial aggregates (progress: partitions and rows)."""


class ScanEngine(Protocol):
    """Runs partition tasks; results in task order, ``done`` called as each one finishes."""

    name: str

    def run(self, tasks: Sequence[PartitionTask], done: Done) -> list[pl.DataFrame]: ...


class PolarsEngine:
    """In this process, one partition after the other (each query uses every core)."""

    name = "polars"

    def run(self, tasks: Sequence[PartitionTask], done: Done) -> list[pl.DataFrame]:
        out = []
        for task in tasks:
            part = run_partition(task)
            out.append(part)
            done(task, part)
        return out


class DaskEngine:
    """On a ``dask.distributed`` cluster: one task per partition, run on its workers."""

    name = "dask"

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def connect(cls, address: str) -> DaskEngine:
        """A client of the scheduler at ``address`` (``tcp://host:8786``)."""
        try:
            from distributed import Client  # noqa: PLC0415 (dask is optional)
        except ImportError as exc:
            raise UsageError(
                "the Dask scan engine needs dask.distributed",
                hint="pip install 'dask[distributed]', or set ODA_SCAN_ENGINE=polars",
            ) from exc
        return cls(Client(address))  # type: ignore[no-untyped-call]

    def run(self, tasks: Sequence[PartitionTask], done: Done) -> list[pl.DataFrame]:
        from distributed import as_completed  # noqa: PLC0415 (dask is optional)

        futures = self.client.map(run_partition, list(tasks), pure=False)
        position = {f.key: i for i, f in enumerate(futures)}
        out: list[pl.DataFrame | None] = [None] * len(futures)
        for future in as_completed(futures):  # type: ignore[no-untyped-call]
            i = position[future.key]
            part = future.result()  # a task's error is raised here, as in-process
            out[i] = part
            done(tasks[i], part)
        return [frame for frame in out if frame is not None]


def choose_engine(
    estimated_rows: float,
    choice: EngineChoice = "auto",
    *,
    dask: Callable[[], ScanEngine] | None = None,
    min_rows: float = DASK_MIN_ROWS,
) -> ScanEngine:
    """The engine of one request: forced by ``choice``, else Dask past ``min_rows`` when a
    cluster is configured (``dask`` makes its engine), else Polars."""
    if choice == "polars" or (choice == "auto" and (dask is None or estimated_rows < min_rows)):
        return PolarsEngine()
    if dask is None:
        raise UsageError(
            "the Dask scan engine is forced but no scheduler is configured",
            hint="set ODA_DASK_SCHEDULER to the scheduler address (tcp://host:8786)",
        )
    return dask()


def engine_for(estimated_rows: float, settings: Settings) -> ScanEngine:
    """``choose_engine`` with ODA_SCAN_ENGINE, ODA_DASK_SCHEDULER and ODA_DASK_MIN_ROWS."""
    address = settings.dask_scheduler
    dask = None if address is None else (lambda: DaskEngine.connect(address))
    return choose_engine(
        estimated_rows, settings.scan_engine, dask=dask, min_rows=settings.dask_min_rows
    )
