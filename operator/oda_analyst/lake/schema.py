"""Arrow schemas of the M100 ExaData lake, per plugin and per metric.

Shared by the synthetic generator (which writes exactly these types) and the reader.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from oda_analyst.errors import UsageError
from oda_analyst.lake.m100_metrics import JOB_TABLE_COLUMNS, METRIC_DTYPES

__all__ = [
    "JOB_TABLE",
    "JOB_TABLE_COLUMNS",
    "JOB_TABLE_METRIC",
    "METRIC_DTYPES",
    "PLUGINS",
    "TAG_COLUMNS",
    "all_metrics",
    "check_plugin",
    "folder_name",
    "job_table_schema",
    "metric_dtype",
    "metric_schema",
    "plugin_from_folder",
    "plugin_of_metric",
    "sampling_period_s",
    "tag_columns",
]

PLUGINS: tuple[str, ...] = tuple(METRIC_DTYPES)
JOB_TABLE = "job_table"
JOB_TABLE_METRIC = "job_info_marconi100"

# Tag columns (besides timestamp and value) of each plugin, in file order.
TAG_COLUMNS: dict[str, tuple[str, ...]] = {
    "ipmi": ("node",),
    "ganglia": ("node",),
    "vertiv": ("device",),
    "schneider": ("panel",),
    "logics": ("panel", "device"),
    "weather": (),
    "nagios": ("node", "description", "host_group", "nagiosdrained", "state_type"),
    "slurm": (),  # slurm tags vary per metric: see slurm_tags()
    "job_table": (),
}

# Tags that are dictionary-encoded strings in the real lake; the others are plain strings.
DICTIONARY_TAGS = frozenset(
    {
        "node",
        "panel",
        "device",
        "description",
        "host_group",
        "job_state",
        "partition",
        "qos",
    }
)

DICT_STRING = pa.dictionary(pa.int16(), pa.string())
TIMESTAMP = pa.timestamp("ms", tz="UTC")

_VALUE_TYPES: dict[str, Any] = {
    "int32": pa.int32(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": DICT_STRING,
}

_JOB_TYPES: dict[str, Any] = {
    "dictionary": DICT_STRING,
    "timestamp": TIMESTAMP,
    "string": pa.string(),
    "bool": pa.bool_(),
    "int32": pa.int32(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
}


def folder_name(plugin: str) -> str:
    """Folder name of a plugin in the lake (``ipmi`` -> ``ipmi_pub``; ``job_table`` as is)."""
    return plugin if plugin == JOB_TABLE else f"{plugin}_pub"


def plugin_from_folder(folder: str) -> str:
    """Inverse of folder_name: ``ipmi_pub`` -> ``ipmi``."""
    return folder.removesuffix("_pub")


def check_plugin(plugin: str) -> str:
    """Normalise a plugin name (with or without ``_pub``) or raise a UsageError."""
    name = plugin_from_folder(plugin.strip())
    if name not in METRIC_DTYPES:
        raise UsageError(f"unknown plugin {plugin!r}", hint=f"choose among: {', '.join(PLUGINS)}")
    return name


def metric_dtype(plugin: str, metric: str) -> str:
    """Value dtype name of a metric ("int32", "float32", "float64" or "string")."""
    try:
        return METRIC_DTYPES[plugin][metric]
    except KeyError:
        raise UsageError(
            f"unknown metric {metric!r} for plugin {plugin!r}",
            hint="`oda-analyst lake describe` lists the metrics of a lake",
        ) from None


def plugin_of_metric(metric: str) -> str:
    """The plugin that carries a metric (metric names are unique across plugins)."""
    for plugin, metrics in METRIC_DTYPES.items():
        if metric in metrics:
            return plugin
    raise UsageError(f"unknown metric {metric!r}", hint="check the name against the catalogue")


def slurm_tags(metric: str) -> tuple[str, ...]:
    """Tag columns of a slurm metric, which differ by metric family in the real lake."""
    if metric in ("job_id", "num_nodes"):
        return ("partition", "user_id", "job_state")
    if metric.startswith("s21.jobs."):
        return ("qos", "partition", "job_state")
    if metric.startswith("s21.totals.") or metric.startswith("s21.cluster_"):
        return ("partition",)
    return ()


def tag_columns(plugin: str, metric: str) -> tuple[str, ...]:
    """Tag columns of one metric's files."""
    return slurm_tags(metric) if plugin == "slurm" else TAG_COLUMNS[plugin]


def _tag_type(tag: str) -> Any:
    return DICT_STRING if tag in DICTIONARY_TAGS else pa.string()


def metric_schema(plugin: str, metric: str) -> pa.Schema:
    """Arrow schema of ``year_month=*/plugin=<plugin>_pub/metric=<metric>/a_0.parquet``."""
    if plugin == JOB_TABLE:
        return job_table_schema()
    fields = [pa.field("timestamp", TIMESTAMP)]
    fields += [pa.field(tag, _tag_type(tag)) for tag in tag_columns(plugin, metric)]
    fields.append(pa.field("value", _VALUE_TYPES[metric_dtype(plugin, metric)]))
    return pa.schema(fields)


def job_table_schema() -> pa.Schema:
    """Arrow schema of the job table (89 Slurm columns)."""
    return pa.schema([pa.field(name, _JOB_TYPES[kind]) for name, kind in JOB_TABLE_COLUMNS.items()])


def all_metrics() -> list[tuple[str, str]]:
    """Every (plugin, metric) pair of the lake, 573 in all."""
    return [(p, m) for p, metrics in METRIC_DTYPES.items() for m in metrics]


# Ganglia node metrics are sampled at their own periods (seconds); GPU metrics at ~20 s.
_GANGLIA_PERIODS: dict[str, int] = {
    "cpu_": 60,
    "load_": 60,
    "mem_": 120,
    "swap_": 120,
    "bytes_": 60,
    "pkts_": 60,
    "proc_": 80,
    "disk_": 300,
    "part_max_used": 300,
    "boottime": 300,
    "os_": 1200,
    "machine_type": 1200,
    "gexec": 300,
}

_PLUGIN_PERIODS: dict[str, int] = {
    "ipmi": 20,
    "vertiv": 10,
    "schneider": 20,
    "logics": 60,
    "weather": 600,
    "nagios": 900,
    "slurm": 10,
}


def sampling_period_s(plugin: str, metric: str) -> int | None:
    """Nominal sampling period of a metric in seconds (None for the job table: per state poll).

    The synthetic generator samples at these periods and the catalogue documents them.
    """
    if plugin == JOB_TABLE:
        return None
    if plugin == "ganglia":
        if metric.startswith("Gpu"):
            return 20
        for prefix, period in _GANGLIA_PERIODS.items():
            if metric.startswith(prefix):
                return period
        return 60
    if plugin == "slurm" and not metric.startswith("s21."):
        return 5
    return _PLUGIN_PERIODS[plugin]
