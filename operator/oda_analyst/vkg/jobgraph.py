"""Jobs of a VKG: the deduplicated job table as N-Triples, with job–node edges and users.

Every job gets its id, times, state, partition, QoS, sizes (nodes, CPUs, GPUs from
``tres_alloc_str``, tasks), time limit, group, exit code, its user (``oda:submittedBy``) and its
workload manager, and one ``oda:runsOn`` edge per allocated node, so "the power of the nodes of
job X" is a traversal job -> node -> sensor -> reading. Triples are built with Polars
expressions; only the distinct nodes and the workload manager go through ``StaticGraph``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.ontology import namespaces as ns
from oda_analyst.vkg.base import StaticGraph
from oda_analyst.vkg.ntriples import (
    RDF_TYPE,
    RDFS_LABEL,
    count_triples,
    e_datetime_lit,
    e_int_lit,
    e_iri,
    e_string_lit,
    e_triple,
    frame_to_ntriples,
    oda,
)
from oda_analyst.vkg.request import JOB_CORE_PROPERTIES, GroundedRequest

_COLUMNS: dict[str, pl.DataType] = {
    "job_id": pl.Int64(),
    "user_id": pl.Int64(),
    "group_id": pl.Int64(),
    "submit_time": pl.Datetime("ms", "UTC"),
    "start_time": pl.Datetime("ms", "UTC"),
    "end_time": pl.Datetime("ms", "UTC"),
    "job_state": pl.String(),
    "partition": pl.String(),
    "qos": pl.String(),
    "num_nodes": pl.Int64(),
    "num_cpus": pl.Int64(),
    "num_tasks": pl.Int64(),
    "time_limit": pl.Int64(),
    "exit_code": pl.String(),
    "tres_alloc_str": pl.String(),
    "node_list": pl.List(pl.Int32()),
}
_GPUS = r"gres/gpu(?::[^=,]*)?=(\d+)"


@dataclass(frozen=True)
class JobTriples:
    """The jobs of a VKG, read and deduplicated; ``chunks`` serialises them lazily."""

    jobs: pl.DataFrame
    node_terms: dict[int, str]
    wlm: str
    properties: frozenset[str] | None = None  # None: every property

    def chunks(self, rows: int) -> Iterator[tuple[bytes, int]]:
        """(N-Triples, triple count) per ``rows`` jobs, then the users."""
        for offset in range(0, self.jobs.height, rows):
            part = self.jobs.slice(offset, rows)
            frames = _job_frames(part, self.node_terms, self.wlm, self.properties)
            yield (
                b"".join(frame_to_ntriples(f) for f in frames),
                sum(count_triples(f) for f in frames),
            )
        if self.jobs.height == 0:
            return  # most requests read no job: spare the users' Polars calls
        users = _user_frame(self.jobs)
        if users.height:
            yield frame_to_ntriples(users), count_triples(users)


def _select(lf: pl.LazyFrame) -> pl.LazyFrame:
    present = set(lf.collect_schema().names())
    return lf.select(
        [
            pl.col(name).cast(dtype) if name in present else pl.lit(None, dtype).alias(name)
            for name, dtype in _COLUMNS.items()
        ]
    )


def _filtered(request: GroundedRequest, lf: pl.LazyFrame) -> pl.LazyFrame:
    f = request.job_filters
    if f.single_node is not None:
        lf = lf.filter((pl.col("num_nodes") == 1) == f.single_node)
    if f.states:
        lf = lf.filter(pl.col("job_state").is_in(list(f.states)))
    if f.partitions:
        lf = lf.filter(pl.col("partition").is_in(list(f.partitions)))
    if f.users:
        lf = lf.filter(pl.col("user_id").is_in(list(f.users)))
    return lf


def read_jobs(request: GroundedRequest, lake: Lake) -> pl.DataFrame:
    """One row per job the request materialises (explicit ids and ``include_jobs``)."""
    frames = []
    ids = request.job_ids()
    try:
        if ids:
            frames.append(_select(lake.jobs(job_ids=list(ids))))
        if request.include_jobs:
            frames.append(
                _filtered(request, _select(lake.jobs(start=request.start, end=request.end)))
            )
        if not frames:
            return pl.DataFrame(schema=_COLUMNS)
        table = pl.concat(frames).unique(subset="job_id", keep="first", maintain_order=True)
        jobs = table.sort("job_id").collect()
    except OdaError as exc:
        raise VKGBuildError(f"reading the job table failed: {exc.message}", hint=exc.hint) from None
    except Exception as exc:  # Polars/Arrow errors of a damaged job-table partition
        raise VKGBuildError(
            f"reading the job table failed: {type(exc).__name__}: {exc}",
            hint="a job_table Parquet file is unreadable; rewrite or remove it",
        ) from None
    missing = sorted(set(ids) - set(jobs["job_id"].to_list()))
    if missing:
        raise VKGBuildError(
            f"job(s) {', '.join(map(str, missing[:5]))} are not in the job table",
            hint="check the job ids; `oda-analyst lake describe` shows the months present",
        )
    return jobs


def job_triples(request: GroundedRequest, lake: Lake, static: StaticGraph) -> JobTriples:
    """The request's jobs; their nodes (with containers) and the WLM are added to ``static``."""
    jobs = read_jobs(request, lake)
    if jobs.height == 0:
        return JobTriples(jobs, {}, "")
    props = None
    if request.job_properties is not None:
        props = frozenset(request.job_properties) | frozenset(JOB_CORE_PROPERTIES)
    wlm = static.wlm() if props is None or "managedBy" in props else ""
    nodes = jobs.select(pl.col("node_list").explode().drop_nulls().unique().sort()).to_series()
    terms = {int(n): static.node(int(n)) for n in nodes.to_list()}
    return JobTriples(jobs, terms, wlm, props)


_JOB = e_iri(ns.INSTANCE_NS + "job/", pl.col("job_id"))
_USER = e_iri(ns.INSTANCE_NS + "user/", pl.col("user_id"))


def _job_frames(
    jobs: pl.DataFrame, node_terms: dict[int, str], wlm: str, properties: frozenset[str] | None
) -> list[pl.DataFrame]:
    job = _JOB
    # An allocation without gres/gpu is a CPU-only job: 0 GPUs, not unknown (CPU/GPU hours of
    # Q8 sum over every job). No allocation at all (never started) stays unknown.
    tres = pl.col("tres_alloc_str")
    gpus = (
        pl.when(tres.is_not_null() & (tres != ""))
        .then(tres.str.extract(_GPUS, 1).cast(pl.Int64).fill_null(0))
        .otherwise(None)
    )
    columns = {
        "type": e_triple(job, RDF_TYPE, pl.lit(oda("Job"))),
        "label": e_triple(job, RDFS_LABEL, e_string_lit(pl.format("job {}", pl.col("job_id")))),
        "jobId": e_triple(job, oda("jobId"), e_int_lit(pl.col("job_id"))),
        "submittedBy": e_triple(job, oda("submittedBy"), _USER),
        "managedBy": e_triple(job, oda("managedBy"), pl.lit(wlm)),
        "submitTime": e_triple(job, oda("submitTime"), e_datetime_lit(pl.col("submit_time"))),
        "startTime": e_triple(job, oda("startTime"), e_datetime_lit(pl.col("start_time"))),
        "endTime": e_triple(job, oda("endTime"), e_datetime_lit(pl.col("end_time"))),
        "jobState": e_triple(job, oda("jobState"), e_string_lit(pl.col("job_state"))),
        "partition": e_triple(job, oda("partition"), e_string_lit(pl.col("partition"))),
        "qos": e_triple(job, oda("qos"), e_string_lit(pl.col("qos"))),
        "numNodes": e_triple(job, oda("numNodes"), e_int_lit(pl.col("num_nodes"))),
        "numCPUs": e_triple(job, oda("numCPUs"), e_int_lit(pl.col("num_cpus"))),
        "numGPUs": e_triple(job, oda("numGPUs"), e_int_lit(gpus)),
        "numTasks": e_triple(job, oda("numTasks"), e_int_lit(pl.col("num_tasks"))),
        "timeLimit": e_triple(job, oda("timeLimit"), e_int_lit(pl.col("time_limit"))),
        "groupId": e_triple(job, oda("groupId"), e_int_lit(pl.col("group_id"))),
        "exitCode": e_triple(job, oda("exitCode"), e_string_lit(pl.col("exit_code"))),
    }
    chosen = [c.alias(n) for n, c in columns.items() if properties is None or n in properties]
    job_frame = jobs.select(chosen)
    edges = jobs.select("job_id", pl.col("node_list").alias("node")).explode("node").drop_nulls()
    term = pl.col("node").replace_strict(node_terms, return_dtype=pl.String)
    edge_frame = edges.select(e_triple(job, oda("runsOn"), term).alias("e"))
    return [job_frame, edge_frame]


def _user_frame(jobs: pl.DataFrame) -> pl.DataFrame:
    users = jobs.select(pl.col("user_id").drop_nulls().unique().sort())
    label = e_string_lit(pl.format("user {}", pl.col("user_id")))
    return users.select(
        e_triple(_USER, RDF_TYPE, pl.lit(oda("User"))).alias("a"),
        e_triple(_USER, RDFS_LABEL, label).alias("b"),
        e_triple(_USER, oda("userId"), e_int_lit(pl.col("user_id"))).alias("c"),
    )
