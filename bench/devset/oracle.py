"""Independent expected answers for retrieval questions, computed with Polars on the Parquet files.

Nothing here imports the product's lake reader, VKG, SPARQL or retriever code: files are found
from the documented M100 layout (``year_month=YY-MM/plugin=<plugin>_pub/metric=<metric>/``),
scanned with ``pl.scan_parquet`` and filtered by hand, so a bug in those layers shows up as a
difference. Only ``oda_analyst.lake.synth`` is used, by the callers, to write the lake.

Definitions (the paper's Appendix A and ``ontology/examples/paper_plans.yaml``):

- Windows are half-open [start, end) in UTC; "to 23:59" means up to 24:00.
- Job table rows are state polls. One row per job: the poll with the most advanced state
  (PENDING < RUNNING/other active < final), then the latest ``last_sched_eval``, then the poll
  read last (months in order, rows in file order). A job's run is [start_time, end_time) of that
  poll; a job whose last poll is RUNNING carries Slurm's expected end there, which is used as is
  (it is the only end the table holds). Jobs with no start or end time never overlap anything.
- A job overlaps [a, b) when start_time < b and end_time > a. Jobs per day count a job on every
  UTC day its run overlaps (days without jobs report 0).
- CPU (GPU) hours in a window = hours of the job's run inside the window x ``num_cpus`` (x the
  ``gres/gpu=N`` count of ``tres_alloc_str``, 0 when absent).
- Readings of a job: the readings of the job's nodes (``nodes``, "[12, 13]" or ranges) inside the
  job's own run, and inside the question's window when there is one. Statistics over several
  metrics (Gpu0..Gpu3) pool their readings. Per-user statistics pool the readings of each of the
  user's jobs (a reading shared by two jobs of the user counts once per job).
- std and cv are sample statistics (ddof = 1), cv = std / mean; quantiles interpolate linearly.
- Daily / hourly buckets are UTC calendar buckets.

Comparison rules (``compare``):

- Columns are mapped explicitly, per expectation kind (``COLUMNS``): oracle column -> the
  answer's column name. Extra answer columns are ignored; a missing mapped column fails.
- Timestamps (``ts``, ``hour``, ``start``, ``end``) compare as UTC epoch milliseconds; ``day`` as
  an ISO date; ids and counts as integers; other numbers as floats with
  ``math.isclose(rel_tol=1e-6, abs_tol=1e-9)``; strings exactly.
- Rows compare as multisets: both sides sorted by their exact-valued columns, then pairwise.
  Row counts must be equal. Results written to CSV (beyond the row limit) are read in full from
  the CSV file the answer names.
- Top-k with ties (``top_jobs``, ``top_users``): the oracle returns every entity tied at the
  cut; the answer must hold k rows, each matching one candidate exactly, and the chosen ranks
  must be the k best.
- ``nodes`` (a job's node list) compares as the sorted tuple of the node ids it names (a list,
  "[12, 13]" or "12-13"); ``rack``, ``num_nodes`` and the ``count_*`` columns as integers.

Answer forms added for the blind set (``blind4.yaml``), one kind each; oracle columns first,
the answer column each maps to in brackets (``rack`` -> ``rack_id``, as ``node`` -> ``node_id``):

- ``nearest`` {metrics, nodes | all, at, within_s, facility?}: the reading nearest the instant
  ``at`` per (node, metric), among readings with |ts - at| <= within_s (one sampling period);
  a tie goes to the earlier reading. Columns node [node_id], metric [metric_name], ts
  [timestamp], value [value]; ``facility: true`` drops node.
- ``node_rack`` {nodes}: the rack of each node that reports ``ipmi/total_power`` anywhere in
  the lake (rack = node // 20). Columns node [node_id], rack [rack_id].
- ``rack_nodes`` {racks}: the nodes of the racks that report ``ipmi/total_power`` anywhere in
  the lake. Column node [node_id].
- ``job_attrs`` {jobs, fields}: one row per job of the table (start or end may be null), ``job``
  [job_id] plus the asked fields among user [user_id], state [job_state], start [start_time],
  end [end_time], num_nodes [num_nodes], nodes [nodes], duration_h [duration_h] (end - start in
  hours; null when either is). With ``fields: [nodes]`` alone the answer may instead list the
  nodes one per row (node [node_id]): the same set, compared exactly.
- ``job_distinct`` {of: user | node | rack, window?, filters?, on_nodes?}: distinct users
  (nodes, racks) of the chosen jobs (``on_nodes``: only jobs holding one of these nodes).
  Column count_user | count_node | count_rack [same name].
- ``job_entities`` {of: user | node | job, window?, filters?, on_nodes?}: the distinct list of
  the same. Column user [user_id] | node [node_id] | job [job_id].
- ``top_users`` {k, rank?: count_job | sum_cpu_hours | sum_gpu_hours, window, filters?}: the k
  users with the most jobs overlapping the window (or the most CPU/GPU hours inside it), ties
  kept as candidates. Columns user [user_id], <rank> [same name].
- ``where_list`` {metrics, window, nodes?, op: gt|lt|ge|le, threshold, agg?: <fn>,
  entity?: node | rack, fns?}: the nodes (racks) where some reading (no ``agg``) or the
  entity's aggregate ``agg`` (avg, max, ...) of its readings in [s, e) passes the threshold;
  ``fns`` adds the entity's aggregates over all its readings in [s, e). Column node [node_id]
  | rack [rack_id], plus each fn [<fn>_value].
- ``where_count`` {same keys, no fns}: how many. Column count_node | count_rack [same name].
- ``stats`` also accepts ``by: [rack]`` (rack = node // 20; column rack [rack_id]).
- ``stats`` ``by: [metric]`` over one metric per GPU of the same family (``Gpu0_power_usage`` ..
  ``Gpu3_power_usage``) is the same grouping as by GPU: an answer with gpu [gpu_index] in place
  of metric [metric_name] is compared on the same values ("each of its GPUs" can be either).
  An hourly mean (``fns: [avg]``, ``by`` with hour) may come as readings at hourly granularity:
  hour [timestamp] (the hour's start), avg [value]. Values are compared all the same.

Added for the retrieval set (``bench/sets/retrieval.yaml``):

- ``job_events`` {event: start | end, window, filters?, of?: job | user | node, form?: count |
  list}: the jobs whose run *starts* (``start_time``) or *ends* (``end_time``) inside [s, e),
  after the usual filters ("jobs that failed on D" are the FAILED jobs that ended on D, not the
  ones merely running then); ``of`` takes their distinct users or nodes instead (default job).
  ``form: count`` gives one column count_job | count_user | count_node; ``list`` (default) the
  column job [job_id] | user [user_id] | node [node_id].

Added for the sixth blind set (``bench/sets/blind6.yaml``):

- ``filters`` of every job kind also take ``partitions: [name, ...]``: only jobs whose Slurm
  ``partition`` is one of them (``m100_usr_prod``, ``m100_usr_dbg``, ``m100_all_serial``).
- ``job_attrs`` also gives ``duration_h`` (above).

Added when the job-state convention was settled (2 Dec 2026): every kind that selects jobs by
their window (``job_count``, ``job_list``, ``jobs_per_bucket``, ``job_distinct``,
``job_entities``, ``top_users``…) also takes ``event: start | end``: the jobs whose run starts
(ends) inside the window instead of those overlapping it, and ``jobs_per_bucket`` then counts
each job in the one bucket of that instant. "How many jobs failed / timed out / were cancelled
on D" is ``event: end``: the day the job reached that state. Every blind writer who could
express it read it so (the retrieval set, blind6, blind7); the earlier sets, written before any
kind could, are rewritten to it.

No-data expectations, ``{status: completed, no_data: true}``, are checked by the harness
(``retrieval_eval.py``): the answer must complete, and no result may hold a row with any non-null
value (all-null rows count as empty).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

JOB_TABLE = "job_table"
JOB_METRIC = "job_info_marconi100"
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
     "BOOT_FAIL", "DEADLINE"}
)  # fmt: skip
MS = pl.Datetime("ms", "UTC")
RACK_SIZE = 20  # rack = node // 20 (M100: 49 racks of 20 nodes)


def utc(text: str) -> datetime:
    """'2022-06-01T08:00' (UTC when no offset) -> aware datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# --- reading the lake ---------------------------------------------------------------------------


def _months(start: datetime, end: datetime) -> list[str]:
    """The YY-MM partitions [start, end) touches."""
    last = end - timedelta(milliseconds=1)
    out, y, m = [], start.year, start.month
    while (y, m) <= (last.year, last.month):
        out.append(f"{y % 100:02d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def _files(root: Path, plugin: str, metric: str, months: Iterable[str] | None) -> list[str]:
    folder = plugin if plugin == JOB_TABLE else f"{plugin}_pub"
    pattern = f"year_month=*/plugin={folder}/metric={metric}/*.parquet"
    found = sorted(root.glob(pattern))
    if months is not None:
        wanted = {f"year_month={m}" for m in months}
        found = [f for f in found if f.parent.parent.parent.name in wanted]
    return [str(f) for f in found]


def series(root: Path, plugin: str, metric: str, start: datetime, end: datetime,
           nodes: Sequence[int] | None = None) -> pl.DataFrame:  # fmt: skip
    """Raw readings in [start, end): columns node (Int64 or null), metric, ts (ms), value."""
    files = _files(root, plugin, metric, _months(start, end))
    if not files:
        return pl.DataFrame(schema={"node": pl.Int64, "metric": pl.String, "ts": pl.Int64,
                                    "value": pl.Float64})  # fmt: skip
    lf = pl.scan_parquet(files, hive_partitioning=False)
    names = lf.collect_schema().names()
    lf = lf.filter((pl.col("timestamp") >= start) & (pl.col("timestamp") < end))
    node = (
        pl.col("node").cast(pl.String).cast(pl.Int64) if "node" in names else pl.lit(None, pl.Int64)
    )
    lf = lf.select(
        node.alias("node"),
        pl.lit(metric).alias("metric"),
        pl.col("timestamp").dt.epoch("ms").alias("ts"),
        pl.col("value").cast(pl.Float64).alias("value"),
    )
    if nodes is not None:
        lf = lf.filter(pl.col("node").is_in([int(n) for n in nodes]))
    return lf.collect()


def readings(root: Path, metrics: Sequence[str], start: datetime, end: datetime,
             nodes: Sequence[int] | None = None) -> pl.DataFrame:  # fmt: skip
    """Raw readings of several ``plugin/metric`` names, stacked."""
    parts = []
    for name in metrics:
        plugin, metric = name.split("/", 1)
        parts.append(series(root, plugin, metric, start, end, nodes))
    return pl.concat(parts)


def jobs(root: Path) -> pl.DataFrame:
    """One row per job (see the module docstring), with node_list and gpus parsed."""
    frames = []
    for i, f in enumerate(_files(root, JOB_TABLE, JOB_METRIC, None)):
        df = pl.read_parquet(f, hive_partitioning=False).with_row_index("_row")
        frames.append(df.with_columns(pl.lit(i).alias("_file")))
    polls = pl.concat(frames, how="diagonal_relaxed").with_columns(
        pl.col("job_state").cast(pl.String)
    )
    rank = (
        pl.when(pl.col("job_state") == "PENDING").then(0)
        .when(pl.col("job_state").is_in(list(FINAL_STATES))).then(2)
        .otherwise(1)
    )  # fmt: skip
    last = (
        polls.with_columns(rank.alias("_rank"))
        .sort(["job_id", "_rank", "last_sched_eval", "_file", "_row"], nulls_last=False)
        .group_by("job_id", maintain_order=True)
        .last()
    )
    gpus = pl.col("tres_alloc_str").str.extract(r"gres/gpu(?::[^=,]*)?=(\d+)", 1).cast(pl.Int64)
    return last.select(
        pl.col("job_id").cast(pl.Int64),
        pl.col("user_id").cast(pl.Int64),
        "job_state",
        pl.col("partition").cast(pl.String),
        pl.col("num_nodes").cast(pl.Int64),
        pl.col("num_cpus").cast(pl.Int64),
        gpus.fill_null(0).alias("gpus"),
        pl.col("start_time").dt.epoch("ms").alias("start"),
        pl.col("end_time").dt.epoch("ms").alias("end"),
        pl.col("nodes").map_elements(_node_list, return_dtype=pl.List(pl.Int64)).alias("nodes"),
    )


def _node_list(text: str | None) -> list[int]:
    out: list[int] = []
    for item in re.findall(r"\d+(?:-\d+)?", text or ""):
        lo, _, hi = item.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def select_jobs(table: pl.DataFrame, *, start: datetime | None = None,
                end: datetime | None = None, ids: Sequence[int] | None = None,
                states: Sequence[str] | None = None, single_node: bool | None = None,
                min_nodes: int | None = None, gpu_jobs: bool | None = None,
                users: Sequence[int] | None = None,
                partitions: Sequence[str] | None = None) -> pl.DataFrame:  # fmt: skip
    """Jobs with a run ([start, end) known) that overlap the window and pass the filters."""
    df = table.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
    if ids is not None:
        df = df.filter(pl.col("job_id").is_in([int(i) for i in ids]))
    if start is not None and end is not None:
        df = df.filter((pl.col("start") < _ms(end)) & (pl.col("end") > _ms(start)))
    if states:
        df = df.filter(pl.col("job_state").is_in(list(states)))
    if single_node is not None:
        df = df.filter((pl.col("num_nodes") == 1) == single_node)
    if min_nodes is not None:
        df = df.filter(pl.col("num_nodes") >= min_nodes)
    if gpu_jobs is not None:
        df = df.filter((pl.col("gpus") > 0) == gpu_jobs)
    if users:
        df = df.filter(pl.col("user_id").is_in([int(u) for u in users]))
    if partitions:
        df = df.filter(pl.col("partition").is_in([str(p) for p in partitions]))
    return df


def job_readings(
    root: Path,
    metrics: Sequence[str],
    chosen: pl.DataFrame,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Readings of each chosen job's nodes inside its run (and the window): job, user, node,
    metric, ts, value, duration_h."""  # fmt: skip
    if chosen.height == 0:
        return pl.DataFrame(schema={"job": pl.Int64, "user": pl.Int64, "node": pl.Int64,
                                    "metric": pl.String, "ts": pl.Int64, "value": pl.Float64,
                                    "duration_h": pl.Float64})  # fmt: skip
    first, last = chosen.select(pl.col("start").min(), pl.col("end").max()).row(0)
    lo = start or datetime.fromtimestamp(first / 1000, UTC)
    hi = end or datetime.fromtimestamp(last / 1000 + 1, UTC)
    pairs = chosen.select(
        pl.col("job_id").alias("job"), pl.col("user_id").alias("user"), "start", "end",
        ((pl.col("end") - pl.col("start")) / 3_600_000).alias("duration_h"), "nodes",
    ).explode("nodes").rename({"nodes": "node"})  # fmt: skip
    nodes = pairs["node"].unique().to_list()
    raw = readings(root, metrics, lo, hi, nodes)
    return (
        pairs.join(raw, on="node", how="inner")
        .filter((pl.col("ts") >= pl.col("start")) & (pl.col("ts") < pl.col("end")))
        .select("job", "user", "node", "metric", "ts", "value", "duration_h")
    )


# --- statistics ------------------------------------------------------------------------------


def agg_exprs(fns: Sequence[str], col: str = "value") -> list[pl.Expr]:
    """Polars expressions for the aggregation names (output column = the name)."""
    x = pl.col(col)
    table: dict[str, pl.Expr] = {
        "avg": x.mean(), "min": x.min(), "max": x.max(), "sum": x.sum(),
        "count": x.count(), "std": x.std(ddof=1), "cv": x.std(ddof=1) / x.mean(),
        "median": x.quantile(0.5, "linear"), "p90": x.quantile(0.9, "linear"),
        "p95": x.quantile(0.95, "linear"), "p99": x.quantile(0.99, "linear"),
    }  # fmt: skip
    return [table[f].alias(f) for f in fns]


def with_buckets(df: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Add UTC ``hour`` (ms of the bucket start) / ``day`` (ISO date) columns when grouped."""
    t = pl.from_epoch(pl.col("ts"), time_unit="ms")
    if "hour" in by:
        df = df.with_columns(t.dt.truncate("1h").dt.epoch("ms").alias("hour"))
    if "day" in by:
        df = df.with_columns(t.dt.date().cast(pl.String).alias("day"))
    if "rack" in by:
        df = df.with_columns((pl.col("node") // RACK_SIZE).alias("rack"))
    return df


def stats(df: pl.DataFrame, fns: Sequence[str], by: Sequence[str]) -> pl.DataFrame:
    """Aggregate readings by ``by`` (node, metric, job, user, hour, day; none = pooled)."""
    df = with_buckets(df, by)
    if not by:
        return df.select(agg_exprs(fns))
    return df.group_by(list(by)).agg(agg_exprs(fns))


def hour_buckets(df: pl.DataFrame) -> pl.DataFrame:
    """Job readings reduced to one mean per (job, node, metric, UTC hour): the documented VKG
    coarsening of large average-only plans (a bucket cut by the job's start is labelled with
    it, which does not change its members)."""
    return (
        df.with_columns(((pl.col("ts") // 3_600_000) * 3_600_000).alias("ts"))
        .group_by(["job", "user", "node", "metric", "ts"])
        .agg(pl.col("value").mean(), pl.col("duration_h").first())
    )


# --- jobs ------------------------------------------------------------------------------------


def overlap_hours(df: pl.DataFrame, start: datetime, end: datetime) -> pl.Expr:
    lo = pl.max_horizontal(pl.col("start"), pl.lit(_ms(start)))
    hi = pl.min_horizontal(pl.col("end"), pl.lit(_ms(end)))
    return ((hi - lo).clip(lower_bound=0)) / 3_600_000


def job_hours(chosen: pl.DataFrame, start: datetime, end: datetime,
              wanted: Sequence[str]) -> pl.DataFrame:  # fmt: skip
    """Sums of cpu_hours / gpu_hours of the chosen jobs inside [start, end), and count_job."""
    h = overlap_hours(chosen, start, end)
    cols = {"cpu_hours": (h * pl.col("num_cpus")).sum(), "gpu_hours": (h * pl.col("gpus")).sum()}
    out = [cols[w].alias(f"sum_{w}") for w in wanted]
    return chosen.select(*out, pl.len().cast(pl.Int64).alias("count_job"))


def jobs_per_bucket(chosen: pl.DataFrame, start: datetime, end: datetime,
                    unit: str = "day", event: str | None = None) -> pl.DataFrame:  # fmt: skip
    """count_job per UTC day (hour) of [start, end); a job counts in each bucket it overlaps, or
    with ``event`` (start | end) in the one bucket holding that instant of its run."""
    step = timedelta(days=1) if unit == "day" else timedelta(hours=1)
    rows: list[dict[str, Any]] = []
    lo = start
    while lo < end:
        hi = min(lo + step, end)
        if event is None:
            inside = (pl.col("start") < _ms(hi)) & (pl.col("end") > _ms(lo))
        else:
            inside = (pl.col(event) >= _ms(lo)) & (pl.col(event) < _ms(hi))
        n = chosen.filter(inside).height
        rows.append({unit: lo.date().isoformat() if unit == "day" else _ms(lo), "count_job": n})
        lo = hi
    return pl.DataFrame(rows, schema={unit: pl.String if unit == "day" else pl.Int64,
                                      "count_job": pl.Int64})  # fmt: skip


def daily_buckets(start: datetime, end: datetime) -> list[str]:
    out, d = [], start.date()
    while datetime(d.year, d.month, d.day, tzinfo=UTC) < end:
        out.append(d.isoformat())
        d = d + timedelta(days=1)
    return out


# --- comparison ------------------------------------------------------------------------------

TIME_COLS = frozenset({"ts", "hour", "start", "end"})
INT_COLS = frozenset({"node", "job", "user", "gpu", "count", "count_job", "count_node",
                      "count_value", "rack", "num_nodes", "count_user", "count_rack"})  # fmt: skip
TEXT_COLS = frozenset({"metric", "day", "state"})
LIST_COLS = frozenset({"nodes"})  # a job's node list: the sorted tuple of its ids


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""


def _to_ms(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, int | float):
        return int(v)
    if isinstance(v, datetime):
        return _ms(v if v.tzinfo else v.replace(tzinfo=UTC))
    return _ms(utc(str(v)))


def _norm(col: str, v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if col in TIME_COLS:
        return _to_ms(v)
    if col == "day":
        return v.isoformat() if isinstance(v, date) else str(v)[:10]
    if col in LIST_COLS:
        items = v if isinstance(v, list | tuple) else _node_list(str(v))
        return tuple(sorted(int(i) for i in items))
    if col in INT_COLS:
        return int(float(v))
    if col in TEXT_COLS:
        return str(v)
    return float(v)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return bool(a == b)


def _key(row: tuple[Any, ...], exact: Sequence[int]) -> tuple[Any, ...]:
    # None sorts first; floats rounded only to order rows, never to decide equality
    return tuple((row[i] is not None, row[i]) for i in exact) + tuple(
        (v is not None, round(v, 4) if isinstance(v, float) else v) for v in row
    )


def normalise(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_norm(c, v) for c, v in zip(columns, r, strict=True)) for r in rows]


def compare(expected: pl.DataFrame, answer_columns: Sequence[str],
            answer_rows: Sequence[Sequence[Any]], mapping: dict[str, str]) -> Verdict:  # fmt: skip
    """Compare the oracle frame with an answer's rows (columns mapped by ``mapping``)."""
    cols = list(expected.columns)
    missing = [mapping.get(c, c) for c in cols if mapping.get(c, c) not in answer_columns]
    if missing:
        return Verdict(False, f"answer lacks column(s) {missing}; has {list(answer_columns)}")
    idx = [list(answer_columns).index(mapping.get(c, c)) for c in cols]
    got = normalise(cols, ([r[i] for i in idx] for r in answer_rows))
    want = normalise(cols, expected.rows())
    if len(got) != len(want):
        return Verdict(False, f"{len(got)} rows, expected {len(want)}")
    exact = [i for i, c in enumerate(cols) if c in TIME_COLS | INT_COLS | TEXT_COLS | LIST_COLS]
    got.sort(key=lambda r: _key(r, exact))
    want.sort(key=lambda r: _key(r, exact))
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        if not all(_close(a, b) for a, b in zip(g, w, strict=True)):
            bad = [c for c, a, b in zip(cols, g, w, strict=True) if not _close(a, b)]
            return Verdict(False, f"row {n} differs in {bad}: got {g}, expected {w}")
    return Verdict(True)


def compare_top(candidates: pl.DataFrame, k: int, answer_columns: Sequence[str],
                answer_rows: Sequence[Sequence[Any]], mapping: dict[str, str],
                rank_col: str = "duration_h", id_col: str = "job",
                descending: bool = True) -> Verdict:  # fmt: skip
    """Top-k with ties: k answer rows, each one candidate row, with the k best ranks."""
    if len(answer_rows) != k:
        return Verdict(False, f"{len(answer_rows)} rows, expected top-{k}")
    top = sorted(candidates[rank_col].to_list(), reverse=descending)[:k]
    for row in answer_rows:
        one = [list(row)]
        got_id = dict(zip(answer_columns, row, strict=True)).get(mapping.get(id_col, id_col))
        cand = candidates.filter(pl.col(id_col) == int(got_id if got_id is not None else -1))
        if cand.height != 1:
            return Verdict(False, f"job {got_id} is not among the {candidates.height} top "
                           "candidates (ties included)")  # fmt: skip
        v = compare(cand, answer_columns, one, mapping)
        if not v.ok:
            return Verdict(False, f"job {got_id}: {v.reason}")
    rank_answer = mapping.get(rank_col, rank_col)
    if rank_answer in answer_columns:
        i = list(answer_columns).index(rank_answer)
        got = sorted((float(r[i]) for r in answer_rows), reverse=descending)
        if not all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, top, strict=True)):
            return Verdict(False, f"{rank_col} of the chosen rows {got} are not the top {top}")
    return Verdict(True)


# --- expectation kinds (the dev set's ``expect.kind``) ---------------------------------------

# oracle column -> answer column, per kind; aggregate columns map to "<fn>_value".
READING_COLS = {"node": "node_id", "metric": "metric_name", "ts": "timestamp", "value": "value"}
GROUP_COLS = {"node": "node_id", "metric": "metric_name", "hour": "hour", "day": "day",
              "job": "job_id", "user": "user_id", "gpu": "gpu_index",
              "rack": "rack_id"}  # fmt: skip
JOB_COLS = {"job": "job_id", "start": "start_time", "end": "end_time", "num_nodes": "num_nodes",
            "duration_h": "duration_h"}  # fmt: skip


@dataclass(frozen=True)
class Expectation:
    """What one answer result must equal; ``top_k`` switches to the tie-tolerant comparison."""

    frame: pl.DataFrame
    mapping: dict[str, str]
    top_k: int | None = None
    rank: tuple[str, str, bool] = ("duration_h", "job", True)  # rank column, id column, desc
    # the same values in an equivalent form: (frame, mapping), used when the answer has its
    # columns and not the primary ones
    same_as: tuple[tuple[pl.DataFrame, dict[str, str]], ...] = ()

    def check(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Verdict:
        if self.top_k is not None:
            col, ident, desc = self.rank
            return compare_top(self.frame, self.top_k, columns, rows, self.mapping, col, ident,
                               desc)  # fmt: skip
        for frame, mapping in ((self.frame, self.mapping), *self.same_as):
            if all(mapping.get(c, c) in columns for c in frame.columns):
                return compare(frame, columns, rows, mapping)
        return compare(self.frame, columns, rows, self.mapping)


_GPU_METRIC = re.compile(r"^(?P<source>.+/)Gpu(?P<index>\d)_(?P<name>.+)$")


def _by_gpu(frame: pl.DataFrame, metrics: Sequence[str]) -> pl.DataFrame | None:
    """``frame`` grouped by metric, regrouped by GPU index when the metrics are one per GPU of
    a single family (else None)."""
    found = [_GPU_METRIC.match(m) for m in metrics]
    if "metric" not in frame.columns or not all(found):
        return None
    families = {(m["source"], m["name"]) for m in found if m}
    indices = [int(m["index"]) for m in found if m]
    if len(families) != 1 or len(set(indices)) != len(indices):
        return None
    index = pl.col("metric").str.extract(r"Gpu(\d)_", 1).cast(pl.Int64).alias("gpu")
    return (
        frame.with_columns(index)
        .drop("metric")
        .select(["gpu", *[c for c in frame.columns if c != "metric"]])
    )


def _window(spec: dict[str, Any]) -> tuple[datetime, datetime]:
    start, end = spec["window"]
    return utc(str(start)), utc(str(end))


def _nodes(spec: dict[str, Any]) -> list[int] | None:
    nodes = spec.get("nodes", "all")
    return None if nodes == "all" else [int(n) for n in nodes]


def _agg_mapping(fns: Sequence[str]) -> dict[str, str]:
    return {**GROUP_COLS, **{f: f"{f}_value" for f in fns}}


def _chosen(spec: dict[str, Any], table: pl.DataFrame) -> pl.DataFrame:
    f = dict(spec.get("filters", {}))
    start, end = _window(spec) if "window" in spec else (None, None)
    event = spec.get("event")
    if event is None or start is None or end is None:
        return select_jobs(table, start=start, end=end, ids=spec.get("jobs"), **f)
    col = {"start": "start", "end": "end"}[event]
    return select_jobs(table, ids=spec.get("jobs"), **f).filter(
        (pl.col(col) >= _ms(start)) & (pl.col(col) < _ms(end))
    )


def kind_readings(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """Raw readings of metrics M for nodes N (or a facility series) in [s, e)."""
    start, end = _window(spec)
    df = readings(root, spec["metrics"], start, end, _nodes(spec))
    if spec.get("facility"):
        df = df.drop("node")
    return Expectation(df, READING_COLS)


def kind_stats(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """fn(value) per group (node / metric / hour / day; none = pooled) over [s, e)."""
    start, end = _window(spec)
    df = readings(root, spec["metrics"], start, end, _nodes(spec))
    fns, by = spec["fns"], spec.get("by", [])
    out = stats(df, fns, by)
    if "day" in by and spec.get("all_days"):
        days = pl.DataFrame({"day": daily_buckets(start, end)})
        out = days.join(out, on="day", how="left")
    if "top" in spec:  # {k, by: fn, desc}: the k best groups, ties kept as candidates
        k, fn, desc = int(spec["top"]["k"]), spec["top"]["by"], spec["top"].get("desc", True)
        cut = sorted(out[fn].to_list(), reverse=desc)[k - 1]
        out = out.filter(pl.col(fn) >= cut if desc else pl.col(fn) <= cut)
        return Expectation(out, _agg_mapping(fns), top_k=k, rank=(fn, by[0], desc))
    return Expectation(out, _agg_mapping(fns), same_as=_equivalent_stats(out, spec, fns, by))


def _equivalent_stats(
    out: pl.DataFrame, spec: dict[str, Any], fns: Sequence[str], by: Sequence[str]
) -> tuple[tuple[pl.DataFrame, dict[str, str]], ...]:
    """Other column forms of the same statistics: by GPU for one metric per GPU, and an hourly
    mean given as readings at hourly granularity (the hour's start as timestamp, the mean as
    value)."""
    same: list[tuple[pl.DataFrame, dict[str, str]]] = []
    per_gpu = _by_gpu(out, spec["metrics"]) if "metric" in by else None
    if per_gpu is not None:
        same.append((per_gpu, _agg_mapping(fns)))
    if list(fns) == ["avg"] and "hour" in by:
        same.append((out, {**GROUP_COLS, "hour": "timestamp", "avg": "value"}))
    return tuple(same)


def kind_job_stats(spec: dict[str, Any], root: Path, table: pl.DataFrame) -> Expectation:
    """fn(value) of each job's nodes over its own run (pooled over the metrics), per job/user."""
    chosen = _chosen(spec, table)
    start, end = _window(spec) if "window" in spec else (None, None)
    df = job_readings(root, spec["metrics"], chosen, start, end)
    if spec.get("granularity") == "hour":
        df = hour_buckets(df)
    fns, by = spec["fns"], spec.get("by", ["job"])
    out = stats(df, fns, by)
    if spec.get("count_job"):
        counts = df.group_by(by).agg(pl.col("job").n_unique().cast(pl.Int64).alias("count_job"))
        out = out.join(counts, on=by)
    if "limit" in spec:
        keys = spec["order"]  # [[column, descending], ...]
        out = out.sort([k for k, _ in keys], descending=[d for _, d in keys]).head(spec["limit"])
    return Expectation(out, _agg_mapping(fns))


def kind_top_jobs(spec: dict[str, Any], root: Path, table: pl.DataFrame) -> Expectation:
    """Top-k jobs by duration (ties kept as candidates) and fn(value) over each job's run."""
    chosen = _chosen(spec, table).with_columns(
        ((pl.col("end") - pl.col("start")) / 3_600_000).alias("duration_h")
    )
    k = int(spec["k"])
    cut = sorted(chosen["duration_h"].to_list(), reverse=True)[k - 1]
    cand = chosen.filter(pl.col("duration_h") >= cut)
    fns = spec.get("fns", [])
    frame = cand.select(pl.col("job_id").alias("job"), "duration_h")
    if fns:
        start, end = _window(spec)
        df = job_readings(root, spec["metrics"], cand, start, end)
        frame = frame.join(stats(df, fns, ["job"]), on="job", how="left")
    return Expectation(frame, {**JOB_COLS, **_agg_mapping(fns)}, top_k=k)


def kind_job_readings(spec: dict[str, Any], root: Path, table: pl.DataFrame) -> Expectation:
    """Raw readings of the given jobs over their runs (``jobs`` may come from another result)."""
    chosen = select_jobs(table, ids=spec["jobs"])
    start, end = _window(spec) if "window" in spec else (None, None)
    df = job_readings(root, spec["metrics"], chosen, start, end)
    # the job's duration is not part of its readings: an answer may carry it, none must
    return Expectation(df.drop("user", "duration_h"), {**READING_COLS, **JOB_COLS})


def kind_job_hours(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """Sums of CPU/GPU hours inside the window (per day with ``by: [day]``), and count_job."""
    start, end = _window(spec)
    chosen = _chosen(spec, table)
    if "day" not in spec.get("by", []):
        return Expectation(job_hours(chosen, start, end, spec["hours"]), {})
    parts = []
    for day in daily_buckets(start, end):
        lo = max(utc(day), start)
        hi = min(utc(day) + timedelta(days=1), end)
        part = select_jobs(chosen, start=lo, end=hi)
        parts.append(job_hours(part, lo, hi, spec["hours"]).with_columns(pl.lit(day).alias("day")))
    return Expectation(pl.concat(parts), {})


def kind_jobs_per_bucket(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """Jobs per day (or hour) over the window, every bucket listed."""
    start, end = _window(spec)
    return Expectation(
        jobs_per_bucket(
            _chosen(spec, table), start, end, spec.get("unit", "day"), spec.get("event")
        ),
        {},
    )


def kind_job_count(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    n = _chosen(spec, table).height
    return Expectation(pl.DataFrame({"count_job": [n]}), {})


def kind_job_list(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    df = _chosen(spec, table).select(pl.col("job_id").alias("job"), "start", "end")
    return Expectation(df, JOB_COLS)


def kind_node_count(_: dict[str, Any], root: Path, __: pl.DataFrame) -> Expectation:
    """Distinct compute nodes that report node power anywhere in the lake."""
    files = _files(root, "ipmi", "total_power", None)
    n = (
        pl.scan_parquet(files, hive_partitioning=False)
        .select(pl.col("node").cast(pl.String).n_unique())
        .collect()
        .item()
    )
    return Expectation(pl.DataFrame({"count_node": [int(n)]}), {})


def kind_nodes_where(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """How many nodes have at least one reading with value <op> threshold in [s, e)."""
    start, end = _window(spec)
    df = readings(root, spec["metrics"], start, end, _nodes(spec))
    x, t = pl.col("value"), float(spec["threshold"])
    ops = {"gt": x > t, "lt": x < t, "ge": x >= t, "le": x <= t}
    n = df.filter(ops[spec["op"]])["node"].n_unique()
    return Expectation(pl.DataFrame({"count_node": [n]}), {})


# --- answer forms of the blind set (see the module docstring) --------------------------------

RACK_COLS = {"node": "node_id", "rack": "rack_id"}
ATTR_COLS = {"job": "job_id", "user": "user_id", "state": "job_state", "start": "start_time",
             "end": "end_time", "num_nodes": "num_nodes", "nodes": "nodes",
             "duration_h": "duration_h"}  # fmt: skip
JOB_ATTRS: dict[str, pl.Expr] = {
    "user": pl.col("user_id").alias("user"),
    "state": pl.col("job_state").alias("state"),
    "start": pl.col("start"),
    "end": pl.col("end"),
    "num_nodes": pl.col("num_nodes"),
    "nodes": pl.col("nodes"),
    "duration_h": ((pl.col("end") - pl.col("start")) / 3_600_000).alias("duration_h"),
}


def lake_nodes(root: Path) -> list[int]:
    """The compute nodes that report node power anywhere in the lake, ascending."""
    files = _files(root, "ipmi", "total_power", None)
    found = (
        pl.scan_parquet(files, hive_partitioning=False)
        .select(pl.col("node").cast(pl.String).cast(pl.Int64).unique())
        .collect()
    )
    return sorted(found["node"].to_list())


def kind_nearest(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """Per (node, metric) the reading nearest ``at`` within ``within_s`` (ties: the earlier)."""
    at, tol = utc(str(spec["at"])), timedelta(seconds=float(spec["within_s"]))
    df = readings(root, spec["metrics"], at - tol, at + tol + timedelta(milliseconds=1),
                  _nodes(spec))  # fmt: skip
    keys = ["metric"] if spec.get("facility") else ["node", "metric"]
    out = (
        df.with_columns((pl.col("ts") - _ms(at)).abs().alias("_d"))
        .sort([*keys, "_d", "ts"])
        .group_by(keys, maintain_order=True)
        .first()
        .select([*keys, "ts", "value"])
    )
    return Expectation(out, READING_COLS)


def kind_node_rack(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """The rack of each asked node the lake holds."""
    known = set(lake_nodes(root))
    nodes = [int(n) for n in spec["nodes"] if int(n) in known]
    df = pl.DataFrame({"node": nodes}, schema={"node": pl.Int64})
    return Expectation(df.with_columns((pl.col("node") // RACK_SIZE).alias("rack")), RACK_COLS)


def kind_rack_nodes(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """The nodes of the asked racks the lake holds."""
    racks = {int(r) for r in spec["racks"]}
    nodes = [n for n in lake_nodes(root) if n // RACK_SIZE in racks]
    return Expectation(pl.DataFrame({"node": nodes}, schema={"node": pl.Int64}), RACK_COLS)


def kind_job_attrs(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """Attributes of the given jobs (one row per job of the table, run known or not)."""
    df = table.filter(pl.col("job_id").is_in([int(j) for j in spec["jobs"]]))
    cols = [pl.col("job_id").alias("job"), *(JOB_ATTRS[f] for f in spec["fields"])]
    same: tuple[tuple[pl.DataFrame, dict[str, str]], ...] = ()
    if list(spec["fields"]) == ["nodes"]:  # 'which nodes did job J use': the nodes, one per row
        nodes = df.select(pl.col("nodes").explode().drop_nulls().unique().alias("node"))
        same = ((nodes, GROUP_COLS),)
    return Expectation(df.select(cols), ATTR_COLS, same_as=same)


def _chosen_on(spec: dict[str, Any], table: pl.DataFrame) -> pl.DataFrame:
    """``_chosen``, then only the jobs that hold one of ``on_nodes`` (when given)."""
    chosen = _chosen(spec, table)
    if "on_nodes" in spec:
        wanted = [int(n) for n in spec["on_nodes"]]
        chosen = chosen.filter(pl.col("nodes").list.eval(pl.element().is_in(wanted)).list.any())
    return chosen


def _job_entities(spec: dict[str, Any], table: pl.DataFrame) -> pl.Series:
    chosen = _chosen_on(spec, table)
    of = spec["of"]
    if of == "user":
        return chosen["user_id"].unique().alias("user")
    if of == "job":
        return chosen["job_id"].unique().alias("job")
    nodes = chosen.select(pl.col("nodes").explode().drop_nulls())["nodes"].unique()
    if of == "node":
        return nodes.alias("node")
    return (nodes // RACK_SIZE).unique().alias("rack")


def kind_job_distinct(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """How many distinct users / nodes / racks the chosen jobs have."""
    n = _job_entities(spec, table).len()
    return Expectation(pl.DataFrame({f"count_{spec['of']}": [n]}), {})


def kind_job_entities(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """The distinct users / nodes / jobs of the chosen jobs."""
    col = _job_entities(spec, table).cast(pl.Int64).sort()
    return Expectation(col.to_frame(), dict(GROUP_COLS))


def kind_top_users(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """Top-k users by jobs overlapping the window (or CPU/GPU hours inside it), ties kept."""
    start, end = _window(spec)
    chosen = _chosen(spec, table)
    rank = spec.get("rank", "count_job")
    h = overlap_hours(chosen, start, end)
    measure = {
        "count_job": pl.len().cast(pl.Int64),
        "sum_cpu_hours": (h * pl.col("num_cpus")).sum(),
        "sum_gpu_hours": (h * pl.col("gpus")).sum(),
    }[rank]
    per = chosen.group_by(pl.col("user_id").alias("user")).agg(measure.alias(rank))
    k = int(spec["k"])
    cut = sorted(per[rank].to_list(), reverse=True)[k - 1]
    cand = per.filter(pl.col(rank) >= cut)
    return Expectation(cand, dict(GROUP_COLS), top_k=k, rank=(rank, "user", True))


def _passing(spec: dict[str, Any], root: Path) -> tuple[pl.DataFrame, str]:
    """Readings of the window with an entity column, and the entities passing the test."""
    start, end = _window(spec)
    entity = spec.get("entity", "node")
    df = readings(root, spec["metrics"], start, end, _nodes(spec))
    if entity == "rack":
        df = df.with_columns((pl.col("node") // RACK_SIZE).alias("rack"))
    agg = spec.get("agg")  # None: any single reading
    if agg is None:
        ok = df.filter(_passes(pl.col("value"), spec)).select(pl.col(entity).unique())
    else:
        per = df.group_by(entity).agg(agg_exprs([agg]))
        ok = per.filter(_passes(pl.col(agg), spec)).select(entity)
    return df.join(ok, on=entity, how="semi"), entity


def _passes(x: pl.Expr, spec: dict[str, Any]) -> pl.Expr:
    t = float(spec["threshold"])
    return {"gt": x > t, "lt": x < t, "ge": x >= t, "le": x <= t}[spec["op"]]


def kind_where_list(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """The nodes (racks) passing the threshold test, with optional aggregates of each."""
    df, entity = _passing(spec, root)
    fns = spec.get("fns", [])
    out = df.group_by(entity).agg(agg_exprs(fns))  # no fns: the entity column alone
    return Expectation(out, _agg_mapping(fns))


def kind_where_count(spec: dict[str, Any], root: Path, _: pl.DataFrame) -> Expectation:
    """How many nodes (racks) pass the threshold test."""
    df, entity = _passing(spec, root)
    return Expectation(pl.DataFrame({f"count_{entity}": [df[entity].n_unique()]}), {})


def kind_job_events(spec: dict[str, Any], _: Path, table: pl.DataFrame) -> Expectation:
    """Jobs (their users, nodes) whose run starts or ends inside the window, filtered."""
    start, end = _window(spec)
    col = {"start": "start", "end": "end"}[spec["event"]]
    f = dict(spec.get("filters", {}))
    chosen = select_jobs(table, ids=spec.get("jobs"), **f).filter(
        (pl.col(col) >= _ms(start)) & (pl.col(col) < _ms(end))
    )
    of = spec.get("of", "job")
    if of == "node":
        found = chosen.select(pl.col("nodes").explode().drop_nulls())["nodes"].unique()
    else:
        found = chosen[{"job": "job_id", "user": "user_id"}[of]].unique()
    found = found.cast(pl.Int64).sort().alias(of)
    if spec.get("form", "list") == "count":
        return Expectation(pl.DataFrame({f"count_{of}": [found.len()]}), {})
    return Expectation(found.to_frame(), dict(GROUP_COLS))


KINDS = {
    "readings": kind_readings,
    "stats": kind_stats,
    "job_stats": kind_job_stats,
    "top_jobs": kind_top_jobs,
    "job_readings": kind_job_readings,
    "job_hours": kind_job_hours,
    "jobs_per_bucket": kind_jobs_per_bucket,
    "job_count": kind_job_count,
    "job_list": kind_job_list,
    "node_count": kind_node_count,
    "nodes_where": kind_nodes_where,
    "nearest": kind_nearest,
    "node_rack": kind_node_rack,
    "rack_nodes": kind_rack_nodes,
    "job_attrs": kind_job_attrs,
    "job_distinct": kind_job_distinct,
    "job_entities": kind_job_entities,
    "top_users": kind_top_users,
    "where_list": kind_where_list,
    "where_count": kind_where_count,
    "job_events": kind_job_events,
}


def expected(spec: dict[str, Any], root: Path, table: pl.DataFrame) -> Expectation:
    """The expectation of one result spec (``spec["kind"]`` names the function)."""
    return KINDS[spec["kind"]](spec, root, table)
