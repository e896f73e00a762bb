"""What to generate: profiles, per-plugin windows, node and metric selections."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from oda_analyst.errors import UsageError
from oda_analyst.lake import topology
from oda_analyst.lake.schema import JOB_TABLE, JOB_TABLE_METRIC, METRIC_DTYPES, PLUGINS
from oda_analyst.lake.synth import jobs

DEFAULT_SEED = 2022
DEFAULT_PROFILE = "demo"
NODE_PLUGINS = frozenset({"ipmi", "ganglia", "nagios"})


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 moment (UTC when it has no offset)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"cannot read {what} time {text!r}", hint="use ISO 8601, e.g. 2022-06-01T08:00"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class PluginRequest:
    """One plugin to generate: its metrics and its window [start, end) in UTC ms."""

    plugin: str
    metrics: tuple[str, ...]
    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class GenerationSpec:
    """A fully resolved generation: the seed, the node selection and one request per plugin."""

    seed: int
    nodes: tuple[int, ...]
    requests: tuple[PluginRequest, ...]
    profile: str | None = None

    def request(self, plugin: str) -> PluginRequest | None:
        return next((r for r in self.requests if r.plugin == plugin), None)


@dataclass(frozen=True)
class Profile:
    """A named selection: default window, per-plugin windows and metrics (None = all)."""

    description: str
    start: str
    end: str
    nodes: str = "0-979"
    metrics: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    windows: dict[str, tuple[str, str]] = field(default_factory=dict)


_ALL: dict[str, tuple[str, ...] | None] = {p: None for p in PLUGINS}
_GPU = tuple(f"Gpu{g}_{s}" for s in ("gpu_utilization", "power_usage") for g in range(4))
_SAMPLE_METRICS: dict[str, tuple[str, ...] | None] = {
    "ipmi": (
        "total_power",
        "ambient",
        "ps0_input_power",
        "ps1_input_power",
        "pcie",
        "p0_power",
        "p1_power",
    ),
    "ganglia": (*_GPU, "cpu_user", "cpu_system", "cpu_idle"),
    "slurm": (
        "cluster_cpu_util",
        "s21.cluster_cpu_util",
        "s21.cluster_gpu_util",
        "s21.cluster_mem_util",
        "total_nodes_alloc",
        "total_nodes_idle",
        "total_nodes_down",
        "total_cpus_alloc",
        "s21.totals.total_nodes_alloc",
        "s21.totals.gpus_alloc",
        "s21.totals.cpus_alloc",
    ),
    "logics": ("Tot_ict", "Pue", "Potenza_attiva"),
    "weather": None,
    "job_table": None,
}

_MONTH_METRICS: dict[str, tuple[str, ...] | None] = {
    "ipmi": ("total_power", "ambient"),
    "ganglia": tuple(f"Gpu{g}_gpu_temp" for g in range(4)),
    "job_table": None,
}

PROFILES: dict[str, Profile] = {
    "sample": Profile(
        "Every metric the paper's 14 Appendix-A questions need: all 980 nodes on 1 June 2022, "
        "the job table for 1-10 June 2022, weather for May-June 2022.",
        "2022-06-01",
        "2022-06-02",
        metrics=_SAMPLE_METRICS,
        windows={
            "weather": ("2022-05-01", "2022-07-01"),
            "job_table": ("2022-06-01", "2022-06-11"),
        },
    ),
    "month": Profile(
        "What the month-scale questions need: all 980 nodes over June 2022, node power, inlet "
        "(ambient) temperature and the four GPU temperatures, and the job table for the month.",
        "2022-06-01",
        "2022-07-01",
        metrics=_MONTH_METRICS,
    ),
    "tiny": Profile(
        "All 9 plugins and 573 metrics, nodes 0-3 and 900, 1 June 2022 00:00-01:00 UTC.",
        "2022-06-01T00:00",
        "2022-06-01T01:00",
        nodes="0-3,900",
        metrics=_ALL,
    ),
    "demo": Profile(
        "All metrics for nodes 0-39 and 900-920 over 1 June 2022 (the default).",
        "2022-06-01",
        "2022-06-02",
        nodes="0-39,900-920",
        metrics=_ALL,
    ),
}


def _plugin_metrics(plugin: str) -> tuple[str, ...]:
    return tuple(METRIC_DTYPES[plugin])


def _select(
    profile: Profile, plugins: str | None, metrics: str | None
) -> dict[str, tuple[str, ...]]:
    """plugin -> metrics, from the profile or narrowed by --plugins / --metrics."""
    chosen: dict[str, list[str]] = {}
    if plugins is None and metrics is None:
        for plugin, listed in profile.metrics.items():
            chosen[plugin] = list(listed or _plugin_metrics(plugin))
    if plugins is not None:
        plugin_names = topology.parse_name_list(
            ",".join(p.strip().removesuffix("_pub") for p in plugins.split(",")),
            PLUGINS,
            what="plugin",
        )
        if not plugin_names:
            raise UsageError(
                "--plugins names no plugin", hint=f"choose among: {', '.join(PLUGINS)}"
            )
        for plugin in plugin_names:
            chosen[plugin] = list(_plugin_metrics(plugin))
    if metrics is not None:
        by_name = {m: p for p in PLUGINS for m in METRIC_DTYPES[p]}
        metric_names = topology.parse_name_list(metrics, by_name, what="metric")
        if not metric_names:
            raise UsageError("--metrics names no metric", hint="e.g. total_power,ambient")
        for metric in metric_names:
            chosen.setdefault(by_name[metric], [])
            if metric not in chosen[by_name[metric]]:
                chosen[by_name[metric]].append(metric)
    chosen.setdefault(JOB_TABLE, [JOB_TABLE_METRIC])  # the job table is always written
    return {p: tuple(chosen[p]) for p in PLUGINS if p in chosen}


def build_spec(
    profile: str | None = None,
    *,
    start: str | None = None,
    end: str | None = None,
    nodes: str | None = None,
    plugins: str | None = None,
    metrics: str | None = None,
    seed: int | None = None,
) -> GenerationSpec:
    """Resolve a profile and explicit options (which override or narrow it) into a spec."""
    name = profile or DEFAULT_PROFILE
    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}", hint=f"choose among: {', '.join(PROFILES)}")
    prof = PROFILES[name]
    start_dt = parse_time(start, "start") if start else None
    end_dt = parse_time(end, "end") if end else None
    node_ids = topology.parse_int_list(
        nodes if nodes is not None else prof.nodes, hi=topology.N_NODES - 1, what="node"
    )
    if not node_ids:
        raise UsageError("--nodes selects no node", hint="e.g. 0-9,900,920")
    requests = []
    for plugin, names in _select(prof, plugins, metrics).items():
        p_start, p_end = prof.windows.get(plugin, (prof.start, prof.end))
        s = start_dt or parse_time(p_start, "start")
        e = end_dt or parse_time(p_end, "end")
        if e <= s:
            raise UsageError(
                f"window end {e.isoformat()} is not after start {s.isoformat()}",
                hint="give --end later than --start",
            )
        if _ms(s) < jobs.VALID_FROM_MS or _ms(e) > jobs.VALID_TO_MS:
            raise UsageError(
                f"window {s.date()}..{e.date()} is outside the synthetic M100 era",
                hint="M100 data spans 2020-03 to 2022-09; use a window in 2020-01-01..2022-10-20",
            )
        requests.append(PluginRequest(plugin, names, _ms(s), _ms(e)))
    return GenerationSpec(
        seed=DEFAULT_SEED if seed is None else int(seed),
        nodes=tuple(node_ids),
        requests=tuple(requests),
        profile=name,
    )


def with_seed(spec: GenerationSpec, seed: int) -> GenerationSpec:
    return replace(spec, seed=seed)
