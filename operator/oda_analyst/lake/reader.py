"""One reader over an M100 ExaData lake, in a local folder or on S3/MinIO.

Layout: ``year_month=YY-MM/plugin=<plugin>[_pub]/metric=<metric>/*.parquet``. A request names a
plugin, metrics and a time window; the reader lists only the partitions of the months the window
touches and of the named metrics (pruning by path, never a glob over the lake), checks their
Parquet footers, and returns a Polars LazyFrame whose node, tag and time predicates are pushed
into the Parquet scan. It reads the real M100 folders unchanged: several files per partition,
missing months, and plugin folders with or without ``_pub``.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from oda_analyst.errors import LakeError, LakeNotFoundError, UsageError
from oda_analyst.lake import exprs
from oda_analyst.lake import jobs as jobrules
from oda_analyst.lake.describe import (
    LakeDescription,
    PluginDescription,
    PluginTally,
    format_description,
    metric_of,
)
from oda_analyst.lake.m100_metrics import METRIC_DTYPES
from oda_analyst.lake.schema import JOB_TABLE, JOB_TABLE_METRIC, plugin_from_folder, tag_columns
from oda_analyst.lake.storage import GENERATE_HINT, FileInfo, Storage, open_storage

if TYPE_CHECKING:
    from oda_analyst.config import Settings

__all__ = [
    "Lake", "LakeDescription", "Partition", "PluginDescription", "files_fingerprint",
    "format_description",
]  # fmt: skip

_MONTH_DIR = re.compile(r"^year_month=(\d{2}-\d{2})$")
_DESCRIBE_HINT = "`oda-analyst lake describe` lists the plugins, metrics and months of the lake"
_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class Partition:
    """One ``year_month/plugin/metric`` folder and the Parquet files under it."""

    month: str
    plugin: str
    metric: str
    files: tuple[FileInfo, ...]


def files_fingerprint(files: Sequence[FileInfo]) -> str:
    """A digest of the files (path, size and stamp of each): it changes when a partition is
    rewritten, gains a file or loses one (``Lake.partition_files`` lists them)."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.rel}\0{f.size}\0{f.stamp}\n".encode())
    return digest.hexdigest()[:32]


def _unknown(what: str, name: str, known: Sequence[str]) -> UsageError:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    if close:
        hint = f"did you mean: {', '.join(close)}?"
    else:
        listed = ", ".join(known[:12]) + (" …" if len(known) > 12 else "")
        hint = f"choose among: {listed}" if known else _DESCRIBE_HINT
    return UsageError(f"unknown {what} {name!r}", hint=hint)


def _parallel(func: Callable[[_T], _R], items: Sequence[_T], workers: int) -> list[_R]:
    # Listing and footer reads are I/O-bound round trips on S3; threads overlap them.
    if workers <= 1 or len(items) <= 2:
        return [func(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(func, items))


class Lake:
    """An M100 ExaData lake in a local folder or under ``s3://bucket/prefix``."""

    def __init__(
        self, location: str | Path, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.location = str(location)
        self.storage_options = dict(storage_options or {})
        self._storage: Storage = open_storage(location, storage_options)
        self._workers = 1 if self._storage.polars_options() is None else 8
        self._checked = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Lake:
        """The lake named by ``ODA_LAKE`` (and ``ODA_S3_*`` for an s3:// lake)."""
        location = settings.lake_location
        options = settings.storage_options() if location.startswith("s3://") else None
        return cls(location, options)

    def __repr__(self) -> str:
        return f"Lake({self.location!r})"

    # -- listing ---------------------------------------------------------------------------

    def check(self) -> None:
        """Raise LakeNotFoundError unless the location exists and holds month partitions."""
        self._storage.check()
        if not self._list_months():
            raise LakeNotFoundError(
                f"{self.location} holds no year_month=YY-MM partitions", hint=GENERATE_HINT
            )
        self._checked = True

    def _ensure(self) -> None:
        if not self._checked:
            self.check()

    def _list_months(self) -> list[str]:
        found = (_MONTH_DIR.match(name) for name in self._storage.list_dirs(""))
        return sorted(m.group(1) for m in found if m)

    def months(self) -> list[str]:
        """``YY-MM`` months present in the lake, in order."""
        self._ensure()
        return self._list_months()

    def _plugin_folders(self, month: str) -> dict[str, str]:
        """Plugin name (no ``_pub``) -> folder name, for one month."""
        folders: dict[str, str] = {}
        for name in self._storage.list_dirs(f"year_month={month}"):
            if name.startswith("plugin="):
                folder = name.removeprefix("plugin=")
                folders.setdefault(plugin_from_folder(folder), folder)
        return folders

    def _folders_by_month(self, months: Sequence[str]) -> dict[str, dict[str, str]]:
        found = _parallel(self._plugin_folders, months, self._workers)
        return dict(zip(months, found, strict=True))

    def plugins(self) -> list[str]:
        """Plugin names (without ``_pub``) present in any month."""
        by_month = self._folders_by_month(self.months())
        return sorted({plugin for folders in by_month.values() for plugin in folders})

    def metrics(self, plugin: str) -> list[str]:
        """Metric names of a plugin present in any month."""
        months = self.months()
        name = self._resolve_plugin(plugin, months)
        return self._lake_metrics(name, months)

    def _lake_metrics(self, plugin: str, months: Sequence[str]) -> list[str]:
        by_month = self._folders_by_month(months)
        dirs = [
            f"year_month={m}/plugin={by_month[m][plugin]}" for m in months if plugin in by_month[m]
        ]
        names = _parallel(self._storage.list_dirs, dirs, self._workers)
        return sorted(
            {n.removeprefix("metric=") for ns in names for n in ns if n.startswith("metric=")}
        )

    def _resolve_plugin(self, plugin: str, months: Sequence[str]) -> str:
        name = plugin_from_folder(plugin.strip())
        if name in METRIC_DTYPES:
            return name
        present = sorted({p for f in self._folders_by_month(months).values() for p in f})
        if name in present:
            return name
        raise _unknown("plugin", plugin, sorted(set(METRIC_DTYPES) | set(present)))

    def _resolve_metrics(
        self, plugin: str, metrics: str | Sequence[str], months: Sequence[str]
    ) -> list[str]:
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        if not names:
            raise UsageError("no metric given", hint=f"name at least one metric of {plugin}")
        catalogue = METRIC_DTYPES.get(plugin, {})
        unknown = [m for m in names if m not in catalogue]
        if unknown:
            # Only list the lake when the catalogue does not know a name: a real lake may hold
            # metrics the catalogue lacks.
            present = self._lake_metrics(plugin, months)
            for name in unknown:
                if name not in present:
                    raise _unknown(
                        f"metric of {plugin}", name, sorted(set(catalogue) | set(present))
                    )
        return list(dict.fromkeys(names))

    def _partitions(
        self, plugin: str, metrics: Sequence[str], months: Sequence[str]
    ) -> list[Partition]:
        """The partitions of these metrics in these months that exist, files listed."""
        by_month = self._folders_by_month(months)
        wanted = [
            (m, metric, f"year_month={m}/plugin={by_month[m][plugin]}/metric={metric}")
            for m in months
            if plugin in by_month[m]
            for metric in metrics
        ]
        listed = _parallel(self._storage.list_files, [w[2] for w in wanted], self._workers)
        return [
            Partition(m, plugin, metric, tuple(files))
            for (m, metric, _), files in zip(wanted, listed, strict=True)
            if files
        ]

    def _schemas(self, files: Sequence[FileInfo]) -> list[pa.Schema]:
        """Arrow schemas from the footers; a damaged file raises LakeError naming its path."""
        footers: list[pq.FileMetaData] = _parallel(
            self._storage.read_metadata, files, self._workers
        )
        return [footer.schema.to_arrow_schema() for footer in footers]

    def _scan_files(self, files: Sequence[FileInfo]) -> list[tuple[pa.Schema, pl.LazyFrame]]:
        """One Polars scan per run of files that share a schema (files of one partition agree)."""
        groups: dict[pa.Schema, list[str]] = {}
        for file, schema in zip(files, self._schemas(files), strict=True):
            groups.setdefault(schema, []).append(self._storage.uri(file.rel))
        return [
            (
                schema,
                pl.scan_parquet(
                    uris,
                    hive_partitioning=False,
                    storage_options=self._storage.polars_options(),
                ),
            )
            for schema, uris in groups.items()
        ]

    @staticmethod
    def _missing(what: str, months: Sequence[str], present: Sequence[str]) -> LakeError:
        if months:
            where = f"months {months[0]}..{months[-1]}"
        else:
            where = f"the asked window (the lake holds months {present[0]}..{present[-1]})"
        return LakeError(f"no partitions of {what} in {where}", hint=_DESCRIBE_HINT)

    # -- metrics ---------------------------------------------------------------------------

    def scan(
        self,
        plugin: str,
        metrics: str | Sequence[str],
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        nodes: Sequence[int | str] | None = None,
        tags: Mapping[str, Sequence[str]] | None = None,
        tags_as_stored: bool = False,
    ) -> pl.LazyFrame:
        """Rows of ``metrics`` of ``plugin`` in [start, end), optionally of some nodes or tags.

        Columns: ``timestamp`` (Datetime ms UTC), ``metric`` (String), the plugin's tag columns
        (String; a tag a file lacks is null), ``value`` (the metric's dtype; the common supertype
        when numeric metrics of different dtypes are scanned together). An empty ``nodes`` or tag
        list selects nothing. Naive datetimes are taken as UTC. ``tags_as_stored`` keeps the tag
        columns as the files store them (dictionary tags as Categorical: a group by over a
        month of rows then hashes codes, not strings).
        """
        start, end = exprs.as_utc(start, "start"), exprs.as_utc(end, "end")
        exprs.check_window(start, end)
        present = self.months()
        name = self._resolve_plugin(plugin, present)
        if name == JOB_TABLE:
            raise UsageError("the job table has no metrics to scan", hint="use Lake.jobs()")
        names = self._resolve_metrics(name, metrics, present)
        self._check_value_dtypes(name, names)
        out_tags = list(dict.fromkeys(t for m in names for t in tag_columns(name, m)))
        filters = self._tag_filters(name, names, out_tags, nodes, tags)

        months = exprs.months_touching(present, start, end)
        partitions = self._partitions(name, names, months)
        if not partitions:
            raise self._missing(f"{name} metric(s) {', '.join(names)}", months, present)
        frames = []
        for metric in names:
            files = [f for p in partitions if p.metric == metric for f in p.files]
            for schema, lf in self._scan_files(files):
                frames.append(
                    self._metric_frame(
                        lf, schema, metric, out_tags, filters, start, end, tags_as_stored
                    )
                )
        return pl.concat(frames, how="vertical_relaxed")

    def _check_value_dtypes(self, plugin: str, metrics: Sequence[str]) -> None:
        kinds = {METRIC_DTYPES[plugin].get(m) for m in metrics} - {None}
        if "string" in kinds and len(kinds) > 1:
            raise UsageError(
                f"cannot scan string and numeric metrics together: {', '.join(metrics)}",
                hint="scan the string-valued metrics in a separate call",
            )

    def _tag_filters(
        self,
        plugin: str,
        metrics: Sequence[str],
        out_tags: Sequence[str],
        nodes: Sequence[int | str] | None,
        tags: Mapping[str, Sequence[str]] | None,
    ) -> dict[str, list[str]]:
        filters: dict[str, list[str]] = {}
        if nodes is not None:
            if "node" not in out_tags:
                raise UsageError(
                    f"{plugin} metrics {', '.join(metrics)} have no node column",
                    hint=f"filter on its tags instead: {', '.join(out_tags) or 'none'}",
                )
            filters["node"] = [str(int(n)) if isinstance(n, int) else str(n).strip() for n in nodes]
        for tag, values in (tags or {}).items():
            if tag not in out_tags:
                raise _unknown(f"tag of {plugin}", tag, list(out_tags))
            wanted = [values] if isinstance(values, str) else [str(v) for v in values]
            # Filters on the same column intersect.
            filters[tag] = [v for v in filters[tag] if v in wanted] if tag in filters else wanted
        return filters

    def _metric_frame(
        self,
        lf: pl.LazyFrame,
        schema: pa.Schema,
        metric: str,
        out_tags: Sequence[str],
        filters: Mapping[str, Sequence[str]],
        start: datetime | None,
        end: datetime | None,
        tags_as_stored: bool = False,
    ) -> pl.LazyFrame:
        names = set(schema.names)
        for required in ("timestamp", "value"):
            if required not in names:
                raise LakeError(
                    f"metric {metric!r} has a file without a {required!r} column "
                    f"(columns: {', '.join(schema.names)})",
                    hint="the lake is not in the M100 ExaData layout",
                )
        predicate = exprs.time_bounds(schema.field("timestamp").type, start, end)
        for tag, values in filters.items():
            # A file without the tag column cannot match a filter on it.
            matches = exprs.is_in(tag, schema.field(tag).type, values) if tag in names else False
            predicate = predicate & matches
        # Filter the raw columns first (Categorical/int as stored) so the predicate reaches
        # the Parquet reader; cast afterwards.
        columns = [
            exprs.as_utc_ms("timestamp", schema.field("timestamp").type),
            pl.lit(metric, pl.String).alias("metric"),
            *(
                pl.col(t)
                if t in names and tags_as_stored
                else exprs.stringify(schema.field(t).type, pl.col(t)).cast(pl.String)
                if t in names
                else pl.lit(None, pl.String).alias(t)
                for t in out_tags
            ),
            exprs.stringify(schema.field("value").type, pl.col("value")),
        ]
        return lf.filter(predicate).select(columns)

    # -- jobs ------------------------------------------------------------------------------

    def jobs(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        job_ids: Sequence[int] | None = None,
        dedupe: bool = True,
        submitted: bool = False,
    ) -> pl.LazyFrame:
        """Jobs that ran during [start, end), one row per job (see jobs.dedupe_last_state);
        with ``submitted``, the jobs submitted in [start, end) instead, started or not (their
        polls may sit in the month after ``end`` too, which is read as well).

        Polls of a job may sit in any month's partition, so months from two months before
        ``start`` to ``end`` are read. A job overlaps when it started before ``end`` and has
        no ``end_time`` or ended after ``start``; the rule is applied after dedupe so a stale
        poll cannot stand in for the job's last state. Dictionary columns come back as String;
        ``node_list`` (List[Int32]) is parsed from ``nodes``. ``dedupe=False`` keeps every poll
        and applies the overlap rule per poll.
        """
        start, end = exprs.as_utc(start, "start"), exprs.as_utc(end, "end")
        exprs.check_window(start, end)
        present = self.months()
        read_from = None if start is None else exprs.months_back(start, 2)
        read_to = end
        if submitted and end is not None:  # a job submitted late in a month may start after it
            read_to = exprs.months_back(end, -2)
        months = exprs.months_touching(present, read_from, read_to)
        partitions = self._partitions(JOB_TABLE, [JOB_TABLE_METRIC], months)
        if not partitions:
            raise self._missing(f"the job table ({JOB_TABLE_METRIC})", months, present)
        files = [f for p in partitions for f in p.files]
        frames = []
        for schema, scan in self._scan_files(files):
            lf = scan
            if job_ids is not None:
                # A job-level predicate is safe before dedupe and reaches the Parquet reader.
                lf = lf.filter(pl.col("job_id").is_in([int(j) for j in job_ids]))
            frames.append(lf.select(self._job_columns(schema)))
        polls = pl.concat(frames, how="diagonal_relaxed")
        table = jobrules.dedupe_last_state(polls) if dedupe else polls
        if submitted:
            table = table.filter(jobrules.submitted_filter(start, end))
        else:
            table = table.filter(jobrules.overlap_filter(start, end))
        if "nodes" in table.collect_schema().names():
            table = table.with_columns(jobrules.node_list("nodes"))
        return table

    @staticmethod
    def _job_columns(schema: pa.Schema) -> list[pl.Expr]:
        return [
            exprs.as_utc_ms(fld.name, fld.type)
            if isinstance(fld.type, pa.TimestampType)
            else exprs.stringify(fld.type, pl.col(fld.name))
            for fld in schema
        ]

    def metric_months(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """``(plugin, metric)`` -> the months holding a partition of it: folder listings only,
        no file read (``describe`` reads every footer)."""
        months = self.months()
        by_month = self._folders_by_month(months)
        dirs = [(m, p, f"year_month={m}/plugin={folder}")
                for m in months for p, folder in sorted(by_month[m].items())]  # fmt: skip
        listed = _parallel(self._storage.list_dirs, [d[2] for d in dirs], self._workers)
        out: dict[tuple[str, str], list[str]] = {}
        for (month, plugin, _), names in zip(dirs, listed, strict=True):
            for name in names:
                if name.startswith("metric="):
                    out.setdefault((plugin, name.removeprefix("metric=")), []).append(month)
        return {k: tuple(v) for k, v in out.items()}

    # -- fingerprints ----------------------------------------------------------------------

    def partition_files(
        self,
        metrics: Sequence[tuple[str, str]],
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        jobs: bool = False,
    ) -> list[FileInfo]:
        """The files a scan of ``metrics`` (``(plugin, metric)`` pairs) in [start, end) reads,
        and with ``jobs`` those of the job table read for that window: one listing, no data
        read. Unknown plugins contribute nothing here (the scan itself reports them)."""
        start, end = exprs.as_utc(start, "start"), exprs.as_utc(end, "end")
        present = self.months()
        files: list[FileInfo] = []
        by_plugin: dict[str, list[str]] = {}
        for plugin, metric in metrics:
            by_plugin.setdefault(plugin_from_folder(plugin), []).append(metric)
        months = exprs.months_touching(present, start, end)
        for plugin, names in sorted(by_plugin.items()):
            for part in self._partitions(plugin, sorted(set(names)), months):
                files.extend(part.files)
        if jobs:
            read_from = None if start is None else exprs.months_back(start, 2)
            job_months = exprs.months_touching(present, read_from, end)
            for part in self._partitions(JOB_TABLE, [JOB_TABLE_METRIC], job_months):
                files.extend(part.files)
        return files

    # -- describe --------------------------------------------------------------------------

    def describe(self) -> LakeDescription:
        """Per plugin: metrics, months, files, rows (from footers) and bytes (from listing)."""
        months = self.months()
        by_month = self._folders_by_month(months)
        dirs = [
            (m, plugin, folder) for m in months for plugin, folder in sorted(by_month[m].items())
        ]
        listed = _parallel(
            self._storage.list_files,
            [f"year_month={m}/plugin={folder}" for m, _, folder in dirs],
            self._workers,
        )
        all_files = [f for files in listed for f in files]
        rows = dict(
            zip(
                (f.rel for f in all_files),
                (
                    meta.num_rows
                    for meta in _parallel(self._storage.read_metadata, all_files, self._workers)
                ),
                strict=True,
            )
        )
        tallies: dict[str, PluginTally] = {}
        for (month, plugin, folder), files in zip(dirs, listed, strict=True):
            tally = tallies.setdefault(plugin, PluginTally(folder))
            for f in files:
                metric = metric_of(f.rel)
                if metric is not None:
                    tally.add(month, metric, rows[f.rel], f.size)
        plugins = tuple(
            tallies[plugin].result(plugin) for plugin in sorted(tallies) if tallies[plugin].files
        )
        return LakeDescription(location=self.location, months=tuple(months), plugins=plugins)
