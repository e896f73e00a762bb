"""Plan -> SPARQL: deterministic, parseable, valid, and right on a small hand-built VKG.

The graph below is written in the docs/vkg.md shape with the namespaces helpers; every expected
result is computed in plain Python from the same in-memory data, never hard-coded.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

import pyoxigraph as ox
import pytest
from rdflib.plugins.sparql import prepareQuery

from oda_analyst.errors import UsageError
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import PaperQuestion, QueryPlan, load_paper_plans, parse_plan
from oda_analyst.sparql.compiler import CompiledQuery, compile_plan
from oda_analyst.sparql.patterns import hours_between
from oda_analyst.sparql.post import apply_post, quantile
from oda_analyst.sparql.validator import validate

GRAPH = ns.instance_iri("graph", "vkg", "test")
DAY = datetime(2022, 6, 1, tzinfo=UTC)
NODES = (5, 301, 318, 900, 920)
NODE_METRICS = (("ipmi", "total_power"), ("ipmi", "ambient"), ("ganglia", "cpu_system"))
GPU_METRICS = tuple(("ganglia", f"Gpu{g}_gpu_utilization") for g in range(4))
STEP = timedelta(minutes=10)


@dataclass(frozen=True)
class Reading:
    node: int | None  # None for system/weather sensors
    metric: str
    t: datetime
    v: float


@dataclass(frozen=True)
class Job:
    job_id: int
    user: int
    nodes: tuple[int, ...]
    start: datetime
    end: datetime
    cpus: int
    gpus: int


def h(hours: float) -> datetime:
    return DAY + timedelta(hours=hours)


JOBS = (
    Job(3423336, 11, (900, 920), h(1), h(5.5), 256, 8),
    Job(4835969, 12, (301,), h(-3), h(2.25), 128, 4),  # started on 31 May
    Job(3776044, 11, (900,), h(6), h(13.75), 64, 2),
    Job(5000001, 13, (318,), h(10), h(49), 32, 1),  # runs 1-3 June
    Job(5000002, 12, (5,), h(20.5), h(23.9), 16, 0),
    Job(5000003, 13, (920,), h(14), h(16), 8, 0),
    Job(5000004, 14, (301, 318), h(100), h(130), 64, 0),  # 5-6 June
)


def _ts(t: datetime) -> str:
    return f'"{t.strftime("%Y-%m-%dT%H:%M:%S")}.000Z"^^<{ns.XSD_NS}dateTime>'


def _int(v: int) -> str:
    return f'"{v}"^^<{ns.XSD_NS}integer>'


def _str(v: str) -> str:
    return f'"{v}"'


@cache
def dataset() -> tuple[list[Reading], bytes]:
    rng = random.Random(7)
    readings: list[Reading] = []
    lines: list[str] = []

    def add(s: str, p: str, o: str) -> None:
        lines.append(f"<{s}> <{p}> {o} .")

    def node_type(s: str, cls: str, label: str) -> None:
        add(s, ns.RDF_NS + "type", f"<{ns.oda(cls)}>")
        add(s, ns.RDFS_NS + "label", _str(label))

    def sensor(plugin: str, metric: str, entity: str, key: Any) -> str:
        s = ns.sensor_iri(plugin, metric, key)
        m = ns.metric_iri(plugin, metric)
        add(m, ns.RDF_NS + "type", f"<{ns.oda('Metric')}>")
        add(m, ns.oda("metricName"), _str(metric))
        add(m, ns.oda("plugin"), _str(plugin))
        node_type(s, "Sensor", f"{metric} of {key}")
        add(s, ns.oda("observes"), f"<{entity}>")
        add(s, ns.oda("observesMetric"), f"<{m}>")
        add(entity, ns.oda("hasSensor"), f"<{s}>")
        return s

    def series(
        s: str,
        node: int | None,
        metric: str,
        start: datetime,
        end: datetime,
        lo: float,
        hi: float,
        step: timedelta = STEP,
    ) -> None:
        t = start
        while t < end:
            v = round(rng.uniform(lo, hi), 2)
            r = ns.reading_iri(s, int(t.timestamp() * 1000))
            add(r, ns.oda("fromSensor"), f"<{s}>")
            add(r, ns.oda("timestamp"), _ts(t))
            add(r, ns.oda("value"), f'"{v}"^^<{ns.XSD_NS}double>')
            readings.append(Reading(node, metric, t, v))
            t += step

    system = ns.system_iri()
    node_type(system, "HPCSystem", "M100")
    add(system, ns.oda("systemName"), _str("M100"))
    room = ns.room_iri()
    node_type(room, "Room", "M100-room")
    for node in NODES:
        n, rack = ns.node_iri(node), ns.rack_iri(node // 20)
        node_type(n, "ComputeNode", f"node {node}")
        add(n, ns.oda("nodeId"), _int(node))
        node_type(rack, "Rack", f"rack {node // 20}")
        add(rack, ns.oda("rackId"), _int(node // 20))
        add(rack, ns.oda("hasNode"), f"<{n}>")
        add(room, ns.oda("hasRack"), f"<{rack}>")
        add(system, ns.oda("hasComputeNode"), f"<{n}>")
        end = DAY + timedelta(days=1) if node != 318 else DAY + timedelta(days=2)
        for plugin, metric in NODE_METRICS:
            s = sensor(plugin, metric, n, node)
            series(
                s,
                node,
                metric,
                DAY,
                end,
                200 if metric == "total_power" else 15,
                1800 if metric == "total_power" else 45,
            )
        for g, (plugin, metric) in enumerate(GPU_METRICS):
            gpu = ns.gpu_iri(node, g)
            node_type(gpu, "GPU", f"GPU {g} of node {node}")
            add(gpu, ns.oda("gpuIndex"), _int(g))
            add(n, ns.oda("hasGPU"), f"<{gpu}>")
            series(sensor(plugin, metric, gpu, (node, g)), node, metric, DAY, end, 0, 100)
    for metric in ("s21.cluster_cpu_util", "s21.cluster_gpu_util"):
        series(sensor("slurm", metric, system, "M100"), None, metric, h(14), h(17), 40, 100)
    weather = ns.weather_iri()
    node_type(weather, "Weather", "Bologna")
    s = sensor("weather", "temp", weather, "bologna")
    for month in (5, 6):
        start = datetime(2022, month, 1, tzinfo=UTC)
        series(s, None, "temp", start, start + timedelta(days=8), 10, 30, timedelta(hours=1))
    for job in JOBS:
        j, u = ns.job_iri(job.job_id), ns.user_iri(job.user)
        node_type(j, "Job", f"job {job.job_id}")
        add(j, ns.oda("jobId"), _int(job.job_id))
        add(j, ns.oda("startTime"), _ts(job.start))
        add(j, ns.oda("endTime"), _ts(job.end))
        add(j, ns.oda("numNodes"), _int(len(job.nodes)))
        add(j, ns.oda("numCPUs"), _int(job.cpus))
        add(j, ns.oda("numGPUs"), _int(job.gpus))
        add(j, ns.oda("jobState"), _str("COMPLETED"))
        add(j, ns.oda("submittedBy"), f"<{u}>")
        node_type(u, "User", f"user {job.user}")
        add(u, ns.oda("userId"), _int(job.user))
        for node in job.nodes:
            add(j, ns.oda("runsOn"), f"<{ns.node_iri(node)}>")
    return readings, "\n".join(lines).encode()


@pytest.fixture(scope="module")
def store() -> ox.Store:
    st = ox.Store()
    st.load(dataset()[1], format=ox.RdfFormat.N_TRIPLES, to_graph=ox.NamedNode(GRAPH))
    return st


def _py(term: Any) -> Any:
    if term is None:
        return None
    if not isinstance(term, ox.Literal):
        return term.value
    dt = term.datatype.value.removeprefix(ns.XSD_NS)
    if dt in {"integer", "int", "long"}:
        return int(term.value)
    if dt in {"double", "float"}:
        return float(term.value)
    if dt == "decimal":
        return Decimal(term.value)
    if dt == "dateTime":
        return datetime.fromisoformat(term.value.replace("Z", "+00:00"))
    if dt == "date":
        return date.fromisoformat(term.value.removesuffix("Z"))
    return term.value


def run(st: ox.Store, plan: QueryPlan) -> list[dict[str, Any]]:
    compiled = compile_plan(plan, graph=GRAPH)
    solutions = st.query(compiled.sparql)
    assert isinstance(solutions, ox.QuerySolutions)
    names = [v.value for v in solutions.variables]
    rows = [[_py(sol[n]) for n in names] for sol in solutions]
    cols, out = apply_post(compiled, names, rows)
    return [dict(zip(cols, r, strict=True)) for r in out]


@cache
def questions() -> dict[str, PaperQuestion]:
    return {q.id: q for q in load_paper_plans()}


def paper(qid: str, index: int = 0) -> QueryPlan:
    return questions()[qid].plans[index]


def in_window(t: datetime, plan: QueryPlan) -> bool:
    assert plan.window is not None
    return plan.window.start <= t < plan.window.end


def approx(value: Any) -> Any:
    return pytest.approx(float(value), rel=1e-9, abs=1e-9)


# --- every paper plan ---------------------------------------------------------------------------


ALL_PLANS = [(q.id, i) for q in load_paper_plans() for i in range(len(q.plans))]


@pytest.mark.parametrize(("qid", "index"), ALL_PLANS)
def test_paper_plan_compiles_deterministically_and_validates(qid: str, index: int) -> None:
    plan = paper(qid, index)
    first = compile_plan(plan, graph=GRAPH)
    again = compile_plan(parse_plan(plan.model_dump_json()), graph=GRAPH)
    assert first == again
    assert f"FROM <{GRAPH}>" in first.sparql and "ORDER BY" in first.sparql
    assert "GRAPH" not in first.sparql.replace(f"<{GRAPH}>", "")
    prepareQuery(first.sparql)  # rdflib parses it
    ox.Store().query(first.sparql)  # pyoxigraph parses it
    report = validate(first.sparql, allowed_graph=GRAPH)
    assert report.ok, [d.message for d in report.errors]
    assert not validate(first.sparql, allowed_graph=GRAPH + "-other").ok


def test_compile_rejects_a_bad_graph_iri() -> None:
    with pytest.raises(UsageError):
        compile_plan(paper("Q2"), graph="urn:x> } DROP ALL {")


# --- results equal a direct computation on the same data ---------------------------------------


def _raw(plan: QueryPlan, nodes: set[int] | None, metrics: set[str]) -> list[tuple[Any, ...]]:
    rows = [
        (r.node, r.metric, r.t, r.v)
        for r in dataset()[0]
        if r.metric in metrics and (nodes is None or r.node in nodes) and in_window(r.t, plan)
    ]
    return sorted(rows, key=lambda x: (x[0], x[1], x[2]))


def _as_tuples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["node_id"], r["metric_name"], r["timestamp"], r["value"]) for r in rows]


def test_q2_raw_total_power(store: ox.Store) -> None:
    plan = paper("Q2")
    expected = _raw(plan, {900}, {"total_power"})
    assert len(expected) == 24  # 20:00 .. 23:50 every 10 min; the window end is excluded
    assert _as_tuples(run(store, plan)) == expected


def test_q3_gpu_utilisation_through_the_gpu_path(store: ox.Store) -> None:
    plan = paper("Q3")
    expected = _raw(plan, {900, 920}, {"Gpu0_gpu_utilization"})
    assert {e[0] for e in expected} == {900, 920}
    assert _as_tuples(run(store, plan)) == expected


def test_q4_all_nodes(store: ox.Store) -> None:
    plan = paper("Q4")
    assert _as_tuples(run(store, plan)) == _raw(plan, None, {"ambient"})


def test_q13_mixes_node_and_gpu_sensors(store: ox.Store) -> None:
    plan = paper("Q13")
    metrics = {m.metric for m in plan.metrics}
    expected = _raw(plan, {900}, metrics)
    got = _as_tuples(run(store, plan))
    assert got == expected
    assert {g[1] for g in got} == metrics


def _job_readings(job: Job, metrics: set[str]) -> list[float]:
    return [
        r.v for r in dataset()[0]
        if r.metric in metrics and r.node in job.nodes and job.start <= r.t < job.end
    ]  # fmt: skip


def test_q7_coefficient_of_variation_per_job(store: ox.Store) -> None:
    plan = paper("Q7")
    metrics = {m.metric for m in plan.metrics}
    wanted = {int(i) for i in plan.entities[0].ids}
    rows = run(store, plan)
    assert [r["job_id"] for r in rows] == sorted(wanted)
    for row in rows:
        job = next(j for j in JOBS if j.job_id == row["job_id"])
        values = _job_readings(job, metrics)
        mean = statistics.fmean(values)
        assert row["avg_value"] == approx(mean)
        assert row["cv_value"] == pytest.approx(statistics.stdev(values) / mean, rel=1e-9)
    assert list(rows[0]) == ["job_id", "cv_value", "avg_value"]


def _duration_h(job: Job) -> float:
    return (job.end - job.start).total_seconds() / 3600


def test_q9_top3_single_node_jobs_and_power_stats(store: ox.Store) -> None:
    plan = paper("Q9")
    assert plan.window is not None
    day = [
        j
        for j in JOBS
        if len(j.nodes) == 1 and j.start < plan.window.end and j.end > plan.window.start
    ]
    top = sorted(day, key=lambda j: (-_duration_h(j), j.job_id))[:3]
    rows = run(store, plan)
    assert [r["job_id"] for r in rows] == [j.job_id for j in top]
    for row, job in zip(rows, top, strict=True):
        values = _job_readings(job, {"total_power"})
        assert row["duration_h"] == approx(_duration_h(job))
        assert (row["min_value"], row["max_value"]) == (min(values), max(values))
        assert row["avg_value"] == approx(statistics.fmean(values))
    series = run(store, paper("Q9", 1))  # the same jobs' raw series, for the line plot
    assert sorted({r["job_id"] for r in series}) == sorted(j.job_id for j in top)
    assert len(series) == sum(len(_job_readings(j, {"total_power"})) for j in top)


def test_q12_jobs_per_day_count_every_day_a_job_runs(store: ox.Store) -> None:
    plan = paper("Q12")
    rows = run(store, plan)
    days = [date(2022, 6, d) for d in range(1, 11)]
    assert [r["day"] for r in rows] == days  # days without jobs are present with 0
    for row in rows:
        start = datetime(row["day"].year, row["day"].month, row["day"].day, tzinfo=UTC)
        expected = sum(1 for j in JOBS if j.start < start + timedelta(days=1) and j.end > start)
        assert row["count_job"] == expected
    assert rows[-1]["count_job"] == 0 and rows[0]["count_job"] > 0


def _overlap_h(job: Job, lo: datetime, hi: datetime) -> float:
    return max(0.0, (min(job.end, hi) - max(job.start, lo)).total_seconds() / 3600)


def test_q8_cpu_and_gpu_hours_of_the_morning(store: ox.Store) -> None:
    plan = paper("Q8")
    assert plan.window is not None
    lo, hi = plan.window.start, plan.window.end
    (row,) = run(store, plan)
    running = [j for j in JOBS if j.start < hi and j.end > lo]
    assert row["count_job"] == len(running)
    assert float(row["sum_cpu_hours"]) == approx(
        sum(_overlap_h(j, lo, hi) * j.cpus for j in running)
    )
    assert row["sum_gpu_hours"] == approx(sum(_overlap_h(j, lo, hi) * j.gpus for j in running))


def test_q10_and_q11_facility_sensors(store: ox.Store) -> None:
    plan = paper("Q10")
    rows = run(store, plan)
    for row in rows:
        vals = [
            r.v for r in dataset()[0] if r.metric == row["metric_name"] and in_window(r.t, plan)
        ]
        assert row["avg_value"] == approx(statistics.fmean(vals))
    assert [r["metric_name"] for r in rows] == ["s21.cluster_cpu_util", "s21.cluster_gpu_util"]
    for index in (0, 1):
        plan = paper("Q11", index)
        rows = run(store, plan)
        assert len(rows) == 7
        for row in rows:
            vals = [r.v for r in dataset()[0] if r.metric == "temp" and r.t.date() == row["day"]]
            assert row["avg_value"] == approx(statistics.fmean(vals))


def test_q14_users_by_job_count_with_power(store: ox.Store) -> None:
    plan = paper("Q14")
    assert plan.window is not None
    lo, hi = plan.window.start, plan.window.end
    running = [j for j in JOBS if j.start < hi and j.end > lo]
    by_user: dict[int, list[Job]] = {}
    for job in running:
        by_user.setdefault(job.user, []).append(job)
    rows = run(store, plan)
    order = sorted(by_user, key=lambda u: (-len(by_user[u]), u))[:10]
    assert [r["user_id"] for r in rows] == order
    for row in rows:
        values = [v for j in by_user[row["user_id"]] for v in _job_readings(j, {"total_power"})]
        assert row["count_job"] == len(by_user[row["user_id"]])
        assert row["avg_value"] == approx(statistics.fmean(values))


def test_q1_counts_the_system_nodes(store: ox.Store) -> None:
    assert run(store, paper("Q1")) == [{"count_node": len(NODES)}]


# --- post steps: std, percentiles, ordering by a computed column, granularity ------------------


def test_percentiles_std_and_post_ordering(store: ox.Store) -> None:
    plan = parse_plan({
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "ambient"}],
        "entities": [{"kind": "node", "all": True}],
        "window": {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T12:00:00Z"},
        "aggregations": [{"fn": "median"}, {"fn": "p95"}, {"fn": "std"}, {"fn": "count"}],
        "group_by": ["node"],
        "order_by": [{"key": "std_value", "desc": True}],
        "limit": 3,
    })  # fmt: skip
    compiled = compile_plan(plan, graph=GRAPH)
    assert [s.op for s in compiled.post] == ["quantile", "quantile", "std", "sort", "limit"]
    assert "LIMIT" not in compiled.sparql  # the limit follows the post sort
    rows = run(store, plan)
    per_node = {n: sorted(r.v for r in dataset()[0]
                          if r.node == n and r.metric == "ambient" and in_window(r.t, plan))
                for n in NODES}  # fmt: skip
    top = sorted(NODES, key=lambda n: -statistics.stdev(per_node[n]))[:3]
    assert [r["node_id"] for r in rows] == top
    for row in rows:
        vals = per_node[row["node_id"]]
        assert row["median_value"] == approx(statistics.median(vals))
        assert row["p95_value"] == approx(quantile(vals, 0.95))
        assert row["std_value"] == pytest.approx(statistics.stdev(vals), rel=1e-9)
        assert row["count_value"] == len(vals)


def test_quantile_interpolates_linearly() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([10.0, 0.0], 0.95) == pytest.approx(9.5)
    assert quantile([], 0.5) is None


def test_hour_granularity_means_per_bucket(store: ox.Store) -> None:
    plan = parse_plan({
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "rack", "ids": [45]}],
        "window": {"start": "2022-06-01T10:00:00Z", "end": "2022-06-01T13:00:00Z"},
        "granularity": "hour",
    })  # fmt: skip
    rows = run(store, plan)
    assert {r["node_id"] for r in rows} == {900}  # rack 45 holds node 900 of our nodes
    assert [r["timestamp"].hour for r in rows] == [10, 11, 12]
    for row in rows:
        vals = [r.v for r in dataset()[0] if r.node == 900 and r.metric == "total_power"
                and row["timestamp"] <= r.t < row["timestamp"] + timedelta(hours=1)]  # fmt: skip
        assert row["value"] == approx(statistics.fmean(vals))


@pytest.mark.parametrize(
    "delta",
    [
        timedelta(0),
        timedelta(minutes=1, milliseconds=250),
        timedelta(hours=5, seconds=7),
        timedelta(days=2, hours=5),
        timedelta(days=10),
        timedelta(days=1, minutes=59, seconds=59),
    ],
)
def test_hours_between_reads_durations_back(delta: timedelta) -> None:
    a = datetime(2022, 6, 1, tzinfo=UTC)
    query = "\n".join([
        f"PREFIX xsd: <{ns.XSD_NS}>",
        "SELECT ?h WHERE {",
        f'  BIND("{a.isoformat()}"^^xsd:dateTime AS ?a)',
        f'  BIND("{(a + delta).isoformat()}"^^xsd:dateTime AS ?b)',
        *hours_between("?b", "?a", "?h"),
        "}",
    ])  # fmt: skip
    solutions = ox.Store().query(query)
    assert isinstance(solutions, ox.QuerySolutions)
    (sol,) = list(solutions)
    assert float(_py(sol["h"])) == pytest.approx(delta.total_seconds() / 3600, abs=1e-12)


def test_compiled_query_declares_columns_and_meaning() -> None:
    compiled: CompiledQuery = compile_plan(paper("Q7"), graph=GRAPH)
    assert compiled.column_names == ("job_id", "cv_value", "avg_value")
    assert compiled.sparql_columns == ("job_id", "var_value", "mean_value", "avg_value")
    assert "coefficient of variation" in compiled.columns[1].meaning
    assert compiled.explanation in compiled.sparql


# --- other plan shapes: compile, parse and validate ---------------------------------------------

W: dict[str, Any] = {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T09:00:00Z"}
J: list[dict[str, Any]] = [{"kind": "job", "all": True}]
SHAPES: dict[str, dict[str, Any]] = {
    "gpu_group": {
        "target": "readings",
        "metrics": [
            {"plugin": "ganglia", "metric": "Gpu0_gpu_temp"},
            {"plugin": "ganglia", "metric": "Gpu1_gpu_temp"},
        ],
        "entities": [{"kind": "gpu", "ids": [900], "index": [0, 1]}],
        "window": W,
        "aggregations": [{"fn": "max"}],
        "group_by": ["gpu"],
    },
    "rack_room": {
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "room", "all": True}],
        "window": W,
        "aggregations": [{"fn": "sum"}, {"fn": "p99"}],
        "group_by": ["rack", "hour"],
    },
    "cpu_raw": {
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "p0_power"}],
        "entities": [{"kind": "cpu", "all": True}],
        "window": W,
        "filters": [{"about": "value", "op": "gt", "value": 100}],
    },
    "crac_raw": {
        "target": "readings",
        "metrics": [{"plugin": "vertiv", "metric": "Supply_Air_Temperature"}],
        "entities": [{"kind": "crac", "ids": ["CDZ01", "CDZ02"]}],
        "window": W,
    },
    "panel_raw": {
        "target": "readings",
        "metrics": [{"plugin": "logics", "metric": "Potenza_attiva"}],
        "entities": [{"kind": "panel", "ids": ["QGBT1/main_ict"]}],
        "window": W,
        "granularity": "minute",
    },
    "text": {
        "target": "readings",
        "metrics": [{"plugin": "ganglia", "metric": "os_name"}],
        "entities": [{"kind": "node", "ids": [1]}],
        "window": W,
    },
    "jobs_list": {
        "target": "jobs",
        "entities": [*J, {"kind": "node", "ids": [900]}],
        "window": W,
        "derived": ["job_duration", "cpu_hours"],
        "filters": [
            {"about": "job", "field": "state", "op": "in", "value": ["FAILED", "TIMEOUT"]},
            {"about": "job", "field": "num_cpus", "op": "ge", "value": 64},
        ],
        "order_by": [{"key": "duration_h", "desc": True}],
        "limit": 5,
    },
    "jobs_user": {
        "target": "jobs",
        "entities": [*J, {"kind": "user", "ids": [11, 12]}],
        "window": W,
        "derived": ["gpu_hours"],
        "aggregations": [{"fn": "sum", "of": "gpu_hours"}, {"fn": "count", "of": "job"}],
        "group_by": ["user"],
        "filters": [{"about": "job", "field": "user", "op": "ne", "value": 13}],
    },
    "jobs_hour": {
        "target": "jobs",
        "entities": J,
        "window": {"start": "2022-06-01T08:30:00Z", "end": "2022-06-01T12:00:00Z"},
        "derived": ["cpu_hours"],
        "aggregations": [{"fn": "sum", "of": "cpu_hours"}, {"fn": "count", "of": "job"}],
        "group_by": ["hour"],
    },
    "jobs_node": {
        "target": "jobs",
        "entities": J,
        "window": W,
        "derived": ["job_duration"],
        "aggregations": [{"fn": "avg", "of": "duration_h"}, {"fn": "median", "of": "duration_h"}],
        "group_by": ["node"],
    },
    "entities_list": {
        "target": "entities",
        "entities": [{"kind": "rack", "ids": [45]}, {"kind": "node", "all": True}],
    },
    "entities_rack": {
        "target": "entities",
        "entities": [{"kind": "node", "all": True}],
        "aggregations": [{"fn": "count", "of": "node"}],
        "group_by": ["rack"],
    },
    "readings_jobs_global": {
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "user", "ids": [11]}],
        "window": W,
        "aggregations": [{"fn": "cv"}],
        "group_by": ["job", "day"],
        "order_by": [{"key": "cv_value", "desc": True}],
        "limit": 2,
    },
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_other_plan_shapes_compile_and_validate(name: str) -> None:
    compiled = compile_plan(parse_plan(SHAPES[name]), graph=GRAPH)
    ox.Store().query(compiled.sparql)
    report = validate(compiled.sparql, allowed_graph=GRAPH)
    assert report.ok, [d.message for d in report.errors]


def test_cpu_hours_per_hour_clip_to_the_window(store: ox.Store) -> None:
    plan = parse_plan(SHAPES["jobs_hour"])
    assert plan.window is not None
    rows = run(store, plan)
    assert [r["hour"].hour for r in rows] == [8, 9, 10, 11]
    for row in rows:
        lo = max(row["hour"], plan.window.start)
        hi = row["hour"] + timedelta(hours=1)
        running = [j for j in JOBS if j.start < hi and j.end > lo]
        assert row["count_job"] == len(running)
        assert float(row["sum_cpu_hours"]) == approx(
            sum(_overlap_h(j, lo, hi) * j.cpus for j in running)
        )
