"""Month-scale questions end to end, with the aggregation pushed down into the lake scan.

On the ``month`` lake (all 980 nodes over June 2022: node power, inlet temperature, the four
GPU temperatures and the job table; generated once per generator version and cached like the
sample lake), each question runs three ways in one process:

- **VKG**: ``build_aggregate_vkg`` (streaming Polars scan, one partition at a time, grouped by
  node and day before anything is collected; only the aggregates become triples), loaded into
  the default store (``open_store``: the TieredStore), then the SPARQL of ``sparql.aggregates``,
  checked by the validator, and run on that graph. ``vkg_s`` is all of it.
- **floor**: the direct Polars computation of the same answer on the partition files
  (``pl.scan_parquet``, the streaming engine), the cheapest way to the numbers; ``x_floor`` =
  vkg_s / floor_s (goal <= 5).
- **dask** (unless ``--no-dask``): the same scan-and-aggregate step on a ``LocalCluster`` of two
  worker processes (``vkg.engines.DaskEngine``), timed and compared with the Polars engine's
  aggregates.
- **oracle**: an independent computation (pyarrow row groups and NumPy ``bincount``; the
  devset oracle, ``bench/devset/oracle.py``, for the job table), compared with the VKG's rows:
  the same keys in the same order, values to a relative 1e-9.

Progress (partitions done / total) is printed while a scan runs. Peak RSS is this process's
maximum resident set (``getrusage``), everything above but the Dask workers included (their own
peak is printed apart); goal <= 2 GiB.
With ``--ask``, M1-M3 are also asked in words through the retriever (no model, the default
``ODA_PUSHDOWN_MIN_READINGS``: each is routed to the pushdown), timed from the question to the
answer and their rows checked against the same oracle.
The last line is for scripts: ``month: worst_floor_ratio=<max> peak_mib=<…> correct=<N>/<N>``
(and ``ask_max_s=<…>`` with ``--ask``).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from devset import oracle as devset_oracle  # bench/ is on sys.path (retrieval_eval)
from oda_analyst.config import load_settings
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth.generate import ProgressEvent
from oda_analyst.ontology import namespaces as ns
from oda_analyst.sparql.aggregates import Combine, compile_aggregates
from oda_analyst.sparql.validator import validate
from oda_analyst.vkg.aggregates import build_aggregate_vkg
from oda_analyst.vkg.engines import DaskEngine
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.pushdown import AggregateRequest, ScanProgress, scan_aggregates
from retrieval_eval import profile_lake

START = datetime(2022, 6, 1, tzinfo=UTC)
END = datetime(2022, 7, 1, tzinfo=UTC)
START_MS, END_MS = int(START.timestamp() * 1000), int(END.timestamp() * 1000)
DAY_MS = 86_400_000
DAYS = (END_MS - START_MS) // DAY_MS
GPU_TEMPS = tuple(("ganglia", f"Gpu{g}_gpu_temp") for g in range(4))
INLET_LIMIT = 30.0
FLOAT_TOL = 1e-9
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    request: AggregateRequest
    combine: Combine | None = None
    order_desc: bool = False
    limit: int | None = None


QUESTIONS = (
    Question(
        "M1",
        "daily average node power per rack over June 2022",
        AggregateRequest(
            metrics=(("ipmi", "total_power"),),
            statistic="mean",
            level="rack",
            bucket="day",
            start=START,
            end=END,
        ),
    ),
    Question(
        "M2",
        "the 10 nodes with the highest maximum GPU temperature in June",
        AggregateRequest(metrics=GPU_TEMPS, statistic="max", level="gpu", start=START, end=END),
        combine="max",
        order_desc=True,
        limit=10,
    ),
    Question(
        "M3",
        f"hours each node's inlet was above {INLET_LIMIT:g} °C last month",
        AggregateRequest(
            metrics=(("ipmi", "ambient"),),
            statistic="hours_above",
            threshold=INLET_LIMIT,
            level="node",
            start=START,
            end=END,
        ),
    ),
    Question(
        "M4",
        "CPU and GPU hours per user over the month",
        AggregateRequest(
            quantities=("cpu_hours", "gpu_hours"),
            statistic="sum",
            level="user",
            start=START,
            end=END,
        ),
    ),
)


def files(root: Path, plugin: str, metric: str) -> list[Path]:
    return sorted(root.glob(f"year_month=22-06/plugin={plugin}_pub/metric={metric}/*.parquet"))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the VKG path ------------------------------------------------------------------------------


def progress_printer(qid: str) -> Callable[[ScanProgress], None]:
    began = time.perf_counter()

    def show(p: ScanProgress) -> None:
        print(
            f"  {qid} scan: {p.done}/{p.total} partitions ({p.label}, "
            f"{time.perf_counter() - began:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    return show


def run_vkg(
    q: Question, lake: Lake, store: GraphStore
) -> tuple[float, Rows, dict[str, Any], pl.DataFrame | None]:
    graph = f"{ns.INSTANCE_NS}graph/vkg/{q.request.key()}"
    t0 = time.perf_counter()
    report = build_aggregate_vkg(q.request, lake, store, graph, progress=progress_printer(q.id))
    built = time.perf_counter() - t0
    query = compile_aggregates(
        q.request, graph, combine=q.combine, order_desc=q.order_desc, limit=q.limit
    )
    checked = validate(query.sparql, allowed_graph=graph)
    if not checked.ok:
        raise SystemExit(f"{q.id}: the validator rejected the aggregate query: {checked}")
    result = store.query(query.sparql, default_graph=graph)
    elapsed = time.perf_counter() - t0
    info = {
        "build_s": built,
        "query_s": elapsed - built,
        "scan_s": report.stages.get("scan", 0.0),
        "rows": report.rows_scanned,
        "aggregates": report.aggregates,
        "triples": report.triples,
        "partitions": len(report.partitions),
    }
    frame = report.frame.data if report.frame is not None else None
    return elapsed, [tuple(r) for r in result.rows], info, frame


# -- the floor: the direct Polars computation ---------------------------------------------------


def _scan(root: Path, plugin: str, metric: str) -> pl.LazyFrame:
    return pl.scan_parquet(files(root, plugin, metric)).filter(
        (pl.col("timestamp") >= START) & (pl.col("timestamp") < END)
    )


def floor_m1(root: Path) -> Rows:
    day = pl.col("timestamp").dt.truncate("1d")
    per_node = (
        _scan(root, "ipmi", "total_power")
        .group_by(pl.col("node"), day.alias("day"))
        .agg(pl.col("value").cast(pl.Float64).sum().alias("s"), pl.len().alias("n"))
        .collect(engine="streaming")
    )
    rack = (pl.col("node").cast(pl.String).cast(pl.Int64) // 20).alias("rack")
    out = (
        per_node.group_by(rack, "day")
        .agg((pl.col("s").sum() / pl.col("n").sum()).alias("v"))
        .sort("rack", "day")
    )
    return list(out.iter_rows())


def floor_m2(root: Path) -> Rows:
    parts = [
        _scan(root, p, m).group_by("node").agg(pl.col("value").max()).collect(engine="streaming")
        for p, m in GPU_TEMPS
    ]
    node = pl.col("node").cast(pl.String).cast(pl.Int64)
    out = (
        pl.concat(parts, how="vertical_relaxed")
        .group_by(node.alias("node"))
        .agg(pl.col("value").max().cast(pl.Float64))
        .sort(["value", "node"], descending=[True, False])
        .head(10)
    )
    return list(out.iter_rows())


def floor_m3(root: Path) -> Rows:
    hits = (pl.col("value") > INLET_LIMIT).sum()
    per_node = (
        _scan(root, "ipmi", "ambient")
        .group_by("node")
        .agg(hits.alias("h"))
        .collect(engine="streaming")
    )
    out = per_node.select(
        pl.col("node").cast(pl.String).cast(pl.Int64), (pl.col("h") * 20 / 3600).alias("hours")
    ).sort("node")
    return list(out.iter_rows())


def floor_m4(root: Path) -> Rows:
    polls = pl.scan_parquet(
        sorted(root.glob("year_month=*/plugin=job_table/metric=*/*.parquet")),
        missing_columns="insert",
        extra_columns="ignore",
    )
    final = pl.col("job_state").cast(pl.String).is_in(list(devset_oracle.FINAL_STATES))
    rank = pl.when(pl.col("job_state") == "PENDING").then(0).when(final).then(2).otherwise(1)
    utc = pl.Datetime("ms", "UTC")
    lo, hi = pl.lit(START).cast(utc), pl.lit(END).cast(utc)
    start, end = pl.col("start_time").cast(utc), pl.col("end_time").cast(utc)
    hours = (
        pl.min_horizontal(end, hi) - pl.max_horizontal(start, lo)
    ).dt.total_milliseconds() / 3_600_000
    gpus = pl.col("tres_alloc_str").str.extract(r"gres/gpu(?::[^=,]*)?=(\d+)", 1).cast(pl.Int64)
    per_user = (
        polls.select(
            "job_id",
            "job_state",
            "last_sched_eval",
            "user_id",
            "num_cpus",
            "start_time",
            "end_time",
            "tres_alloc_str",
        )
        .with_row_index("_row")
        .with_columns(rank.alias("_rank"))
        .sort(["job_id", "_rank", "last_sched_eval", "_row"], nulls_last=False)
        .group_by("job_id", maintain_order=True)
        .last()
        .filter(start.is_not_null() & end.is_not_null() & (start < hi) & (end > lo))
        .group_by(pl.col("user_id").cast(pl.Int64))
        .agg(
            (hours * pl.col("num_cpus")).sum().alias("cpu_hours"),
            (hours * gpus.fill_null(0)).sum().alias("gpu_hours"),
        )
        .collect()
    )
    out = per_user.unpivot(index="user_id", variable_name="source").sort("user_id", "source")
    return list(out.iter_rows())


def oracle_m4(root: Path) -> Rows:
    chosen = devset_oracle.select_jobs(devset_oracle.jobs(root), start=START, end=END)
    hours = devset_oracle.overlap_hours(chosen, START, END)
    per_user = chosen.group_by("user_id").agg(
        (hours * pl.col("num_cpus")).sum().alias("cpu_hours"),
        (hours * pl.col("gpus")).sum().alias("gpu_hours"),
    )
    out = per_user.unpivot(index="user_id", variable_name="source").sort("user_id", "source")
    return list(out.iter_rows())


FLOORS = {"M1": floor_m1, "M2": floor_m2, "M3": floor_m3, "M4": floor_m4}


# -- the oracle: pyarrow row groups and NumPy, no Polars group by ------------------------------


def _batches(root: Path, plugin: str, metric: str) -> Any:
    """(node ids, epoch ms, values) per row group, as NumPy arrays."""
    for path in files(root, plugin, metric):
        parquet = pq.ParquetFile(path)
        for i in range(parquet.num_row_groups):
            table = parquet.read_row_group(i)
            node = table.column("node").combine_chunks()
            ids = np.array([int(s) for s in node.dictionary.to_pylist()], dtype=np.int64)
            nodes = ids[node.indices.to_numpy(zero_copy_only=False).astype(np.int64)]
            ms = table.column("timestamp").cast("int64").to_numpy()
            values = table.column("value").to_numpy().astype(np.float64)
            keep = (ms >= START_MS) & (ms < END_MS)
            yield nodes[keep], ms[keep], values[keep]


def oracle_m1(root: Path) -> Rows:
    size = 1000 * DAYS
    total, count = np.zeros(size), np.zeros(size)
    for nodes, ms, values in _batches(root, "ipmi", "total_power"):
        key = nodes * DAYS + (ms - START_MS) // DAY_MS
        total += np.bincount(key, weights=values, minlength=size)
        count += np.bincount(key, minlength=size)
    rack_total = total.reshape(1000, DAYS)[:980].reshape(49, 20, DAYS).sum(axis=1)
    rack_count = count.reshape(1000, DAYS)[:980].reshape(49, 20, DAYS).sum(axis=1)
    rows = []
    for rack in range(49):
        for day in range(DAYS):
            if rack_count[rack, day]:
                moment = datetime.fromtimestamp((START_MS + day * DAY_MS) / 1000, UTC)
                rows.append((rack, moment, rack_total[rack, day] / rack_count[rack, day]))
    return rows


def oracle_m2(root: Path) -> Rows:
    best = np.full(1000, -np.inf)
    for plugin, metric in GPU_TEMPS:
        for nodes, _, values in _batches(root, plugin, metric):
            np.maximum.at(best, nodes, values)
    ranked = sorted((n for n in range(1000) if np.isfinite(best[n])), key=lambda n: (-best[n], n))
    return [(n, float(best[n])) for n in ranked[:10]]


def oracle_m3(root: Path) -> Rows:
    hits, seen = np.zeros(1000), np.zeros(1000)
    for nodes, _, values in _batches(root, "ipmi", "ambient"):
        hits += np.bincount(nodes[values > INLET_LIMIT], minlength=1000)
        seen += np.bincount(nodes, minlength=1000)
    return [(n, hits[n] * 20 / 3600) for n in range(1000) if seen[n]]


ORACLES = {"M1": oracle_m1, "M2": oracle_m2, "M3": oracle_m3, "M4": oracle_m4}


# -- asked in words, through the retriever (--ask) -----------------------------------------------

# Each question as an operator types it, and the oracle's rows in the answer's shape. M4 is a job
# table question: the retriever answers it from a graph of jobs (no readings to push down).
ASKED: dict[str, tuple[str, Callable[[Rows], Rows]]] = {
    "M1": ("daily average node power per rack over June 2022",
           lambda rows: [(r, d.date().isoformat(), v) for r, d, v in rows]),
    "M2": ("the 10 nodes with the highest maximum GPU temperature in June 2022",
           lambda rows: rows),
    # a node whose inlet never passed the level has no row (the readings query's filter)
    "M3": (f"how many hours was each node's inlet above {INLET_LIMIT:g} °C in June 2022",
           lambda rows: [r for r in rows if r[-1] > 0]),
}  # fmt: skip


def say(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def ask_all(root: Path, wanted: set[str], data_dir: Path) -> tuple[list[float], int, int]:
    """The ASKED questions through a Retriever (default pushdown threshold, no model): seconds,
    status, the scan's progress lines, and the rows against the oracle."""
    from oda_analyst.retriever.service import Retriever  # noqa: PLC0415 (only with --ask)

    settings = load_settings(lake=str(root), data_dir=data_dir, sparql_endpoint=None,
                             llm_base_url=None, row_limit=100_000)  # fmt: skip
    retriever = Retriever(settings)
    print(f"{'q':>3} {'ask_s':>7} {'status':>10} {'rows':>6} {'oracle':>7}  understood as")
    seconds: list[float] = []
    correct = asked = 0
    for qid, (text, shaped) in ASKED.items():
        if wanted and qid not in wanted:
            continue
        asked += 1
        t0 = time.perf_counter()
        answer = retriever.query(text, as_of=datetime(2022, 7, 15, tzinfo=UTC), progress=say)
        seconds.append(time.perf_counter() - t0)
        rows = [tuple(r) for r in answer.rows or []]
        problem = same(rows, shaped(ORACLES[qid](root))) if answer.status == "completed" else (
            f"status {answer.status}: {answer.answer}"
        )  # fmt: skip
        correct += problem is None
        scan = answer.results[0].get("scan") if answer.results else None
        print(f"{qid:>3} {seconds[-1]:>7.2f} {answer.status:>10} {len(rows):>6} "
              f"{'ok' if problem is None else 'WRONG':>7}  {answer.understood_as}")  # fmt: skip
        if scan:
            print(f"    scan: {scan.get('partitions_done')}/{scan['partitions_total']} partitions, "
                  f"{scan.get('rows_scanned', 0):,} rows, {scan['engine']} engine")  # fmt: skip
        if problem is not None:
            print(f"    {qid} differs from the oracle: {problem}")
    return seconds, correct, asked


def same(got: Rows, want: Rows) -> str | None:
    """None when the rows agree (keys exactly, values to FLOAT_TOL); else the first difference."""
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        keys_g, keys_w = g[:-1], w[:-1]
        if tuple(keys_g) != tuple(keys_w):
            return f"row {i}: keys {keys_g}, expected {keys_w}"
        if abs(float(g[-1]) - float(w[-1])) > FLOAT_TOL * max(1.0, abs(float(w[-1]))):
            return f"row {i} {keys_g}: value {g[-1]}, expected {w[-1]}"
    return None


def start_cluster() -> tuple[Any, Any]:
    """A LocalCluster of 2 worker processes on loopback, and its client."""
    import distributed  # noqa: PLC0415 (dask is optional)

    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    return cluster, distributed.Client(cluster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, default=None, help="default: the cached month lake")
    parser.add_argument("--only", default="", help="comma-separated question ids, e.g. M1,M3")
    parser.add_argument(
        "--no-dask", action="store_true", help="skip the Dask engine (LocalCluster) timings"
    )
    parser.add_argument(
        "--ask", action="store_true",
        help="also ask M1-M3 in words through the retriever (routed to the pushdown)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    def generated(e: ProgressEvent) -> None:
        print(
            f"  generating the month lake: {e.done}/{e.total} partitions ({e.label})",
            file=sys.stderr,
            flush=True,
        )

    t0 = time.perf_counter()
    root = args.lake or profile_lake("month", progress=generated)
    print(f"month lake: {root} (ready in {time.perf_counter() - t0:.1f} s)")
    lake = Lake(root)
    wanted = {q.strip() for q in args.only.split(",") if q.strip()}
    print(
        f"{'q':>3} {'rows':>12} {'aggs':>6} {'triples':>8} {'parts':>5} {'scan_s':>7} "
        f"{'build_s':>8} {'query_s':>8} {'vkg_s':>7} {'floor_s':>8} {'x_floor':>8} "
        f"{'oracle':>7}  question"
    )
    ratios: list[float] = []
    engines: list[bool] = []
    correct = asked = 0
    cluster = None if args.no_dask else start_cluster()
    dask = None if cluster is None else DaskEngine(cluster[1])
    with tempfile.TemporaryDirectory(prefix="month-bench-") as data_dir:
        store = open_store(load_settings(data_dir=Path(data_dir), sparql_endpoint=None))
        try:
            for q in QUESTIONS:
                if wanted and q.id not in wanted:
                    continue
                asked += 1
                vkg_s, rows, info, frame = run_vkg(q, lake, store)
                t0 = time.perf_counter()
                FLOORS[q.id](root)
                floor_s = time.perf_counter() - t0
                problem = same(rows, ORACLES[q.id](root))
                correct += problem is None
                ratios.append(vkg_s / floor_s)
                print(
                    f"{q.id:>3} {info['rows']:>12,} {info['aggregates']:>6,} "
                    f"{info['triples']:>8,} {info['partitions']:>5} {info['scan_s']:>7.2f} "
                    f"{info['build_s']:>8.2f} {info['query_s']:>8.3f} {vkg_s:>7.2f} "
                    f"{floor_s:>8.2f} {vkg_s / floor_s:>8.2f} "
                    f"{'ok' if problem is None else 'WRONG':>7}  {q.text}",
                    flush=True,
                )
                if problem is not None:
                    print(f"    {q.id} differs from the oracle: {problem}")
                if dask is not None and q.request.metrics:
                    t0 = time.perf_counter()
                    other = scan_aggregates(q.request, lake, engine=dask).data
                    dask_s = time.perf_counter() - t0
                    agree = frame is not None and other.equals(frame)
                    engines.append(agree)
                    print(
                        f"    scan+aggregate: polars engine {info['scan_s']:.2f} s, dask engine "
                        f"(LocalCluster, 2 worker processes) {dask_s:.2f} s, same aggregates: "
                        f"{'yes' if agree else 'NO'}"
                    )
                if q.id == "M2":
                    print("    top nodes: " + ", ".join(f"{n} ({v:g})" for n, v in rows))
                if q.id == "M3":
                    above = [r for r in rows if r[-1] > 0]
                    top = max((r[-1] for r in rows), default=0.0)
                    print(f"    {len(above)} of {len(rows)} nodes above; most: {top:.2f} h")
        finally:
            store.close()
            if cluster is not None:
                cluster[1].close()
                cluster[0].close()
    if cluster is not None:
        # The workers are child processes: their peak shows once they have exited.
        workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"dask workers' peak RSS (largest child process): {workers:.0f} MiB")
    if engines:
        print(f"dask engine: same aggregates as the polars engine on {sum(engines)}/{len(engines)}")
    asked_line = ""
    if args.ask:
        with tempfile.TemporaryDirectory(prefix="month-ask-") as data_dir:
            seconds, right, total = ask_all(root, wanted, Path(data_dir))
        correct, asked = correct + right, asked + total
        asked_line = f" ask_max_s={max(seconds, default=float('nan')):.1f}"
    print(
        f"month: worst_floor_ratio={max(ratios, default=float('nan')):.2f} "
        f"peak_mib={peak_mib():.0f} correct={correct}/{asked}{asked_line}"
    )
    return 0 if correct == asked else 1


if __name__ == "__main__":
    raise SystemExit(main())
