"""Stage 3: execution over a small hand-built VKG, labels, inline vs CSV, handles, chunking.

The graph is written in the docs/vkg.md shape with the namespaces helpers; every expected value
is computed in plain Python from the same in-memory data, never hard-coded.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.errors import AccessDeniedError, QueryRejectedError, StoreError, UsageError
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import QueryPlan, load_paper_plans, parse_plan
from oda_analyst.sparql.chunks import (
    ChunkPlan,
    Partial,
    PartialTable,
    execute_chunked,
    plan_chunks,
    split_window,
)
from oda_analyst.sparql.compiler import CompiledQuery, compile_plan
from oda_analyst.sparql.diagnostics import Diagnostic, ValidationReport, report
from oda_analyst.sparql.executor import (
    ExecutionError,
    ValidationFailedError,
    authored_query,
    execute,
)
from oda_analyst.sparql.labels import instance_label, label
from oda_analyst.sparql.post import quantile
from oda_analyst.sparql.results import (
    PREVIEW_ROWS,
    ResultWriter,
    csv_cell,
    open_csv,
    sweep_expired,
)
from oda_analyst.vkg.protocol import QueryResult
from oda_analyst.vkg.store import OxigraphStore

GRAPH = ns.instance_iri("graph", "vkg", "executor-test")
DAY = datetime(2022, 6, 1, tzinfo=UTC)
NODES = (20, 900, 920)
GPU_NODES = (900, 920)
NODE_METRICS = ("total_power", "ambient")
PREFIX = f"PREFIX oda: <{ns.ONTOLOGY_NS}>\n"


@dataclass(frozen=True)
class Reading:
    node: int
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


JOBS = (
    Job(3423336, 1234, (900,), DAY + timedelta(hours=2), DAY + timedelta(hours=7.5)),
    Job(4835969, 1235, (920,), DAY + timedelta(hours=5), DAY + timedelta(hours=11)),
    Job(3776044, 1234, (900, 920), DAY + timedelta(hours=12), DAY + timedelta(hours=20)),
)


def _ts(t: datetime) -> str:
    return f'"{t.strftime("%Y-%m-%dT%H:%M:%S")}.000Z"^^<{ns.XSD_NS}dateTime>'


def _int(v: int) -> str:
    return f'"{v}"^^<{ns.XSD_NS}integer>'


@cache
def dataset() -> tuple[tuple[Reading, ...], bytes]:
    rng = random.Random(11)
    readings: list[Reading] = []
    lines: list[str] = []

    def add(s: str, p: str, o: str) -> None:
        lines.append(f"<{s}> <{p}> {o} .")

    def typed(s: str, cls: str, text: str) -> None:
        add(s, ns.RDF_NS + "type", f"<{ns.oda(cls)}>")
        add(s, ns.RDFS_NS + "label", f'"{text}"')

    def series(plugin: str, metric: str, entity: str, key: Any, node: int, days: int) -> None:
        m, s = ns.metric_iri(plugin, metric), ns.sensor_iri(plugin, metric, key)
        typed(m, "Metric", metric)
        add(m, ns.oda("metricName"), f'"{metric}"')
        add(m, ns.oda("plugin"), f'"{plugin}"')
        typed(s, "Sensor", f"{metric} of {key}")
        add(s, ns.oda("observes"), f"<{entity}>")
        add(s, ns.oda("observesMetric"), f"<{m}>")
        add(entity, ns.oda("hasSensor"), f"<{s}>")
        step = timedelta(minutes=10 if plugin == "ipmi" else 30)
        t = DAY
        while t < DAY + timedelta(days=days):
            v = round(rng.uniform(150, 1800) if metric == "total_power" else rng.uniform(0, 100), 2)
            r = ns.reading_iri(s, int(t.timestamp() * 1000))
            add(r, ns.oda("fromSensor"), f"<{s}>")
            add(r, ns.oda("timestamp"), _ts(t))
            add(r, ns.oda("value"), f'"{v}"^^<{ns.XSD_NS}double>')
            readings.append(Reading(node, metric, t, v))
            t += step

    room = ns.room_iri()
    typed(room, "Room", "M100-room")
    for node in NODES:
        n, rack = ns.node_iri(node), ns.rack_iri(node // 20)
        typed(n, "ComputeNode", f"node {node}")
        add(n, ns.oda("nodeId"), _int(node))
        typed(rack, "Rack", f"rack {node // 20}")
        add(rack, ns.oda("rackId"), _int(node // 20))
        add(rack, ns.oda("hasNode"), f"<{n}>")
        add(room, ns.oda("hasRack"), f"<{rack}>")
        for metric in NODE_METRICS:
            series("ipmi", metric, n, node, node, days=2)
        if node in GPU_NODES:
            for g in range(4):
                gpu = ns.gpu_iri(node, g)
                typed(gpu, "GPU", f"GPU {g} of node {node}")
                add(gpu, ns.oda("gpuIndex"), _int(g))
                add(n, ns.oda("hasGPU"), f"<{gpu}>")
                series("ganglia", f"Gpu{g}_gpu_utilization", gpu, (node, g), node, days=1)
    for job in JOBS:
        j, u = ns.job_iri(job.job_id), ns.user_iri(job.user)
        typed(j, "Job", f"job {job.job_id}")
        add(j, ns.oda("jobId"), _int(job.job_id))
        add(j, ns.oda("startTime"), _ts(job.start))
        add(j, ns.oda("endTime"), _ts(job.end))
        add(j, ns.oda("numNodes"), _int(len(job.nodes)))
        add(j, ns.oda("submittedBy"), f"<{u}>")
        typed(u, "User", f"user {job.user}")
        add(u, ns.oda("userId"), _int(job.user))
        for node in job.nodes:
            add(j, ns.oda("runsOn"), f"<{ns.node_iri(node)}>")
    return tuple(readings), "\n".join(lines).encode()


class CountingStore(OxigraphStore):
    """The real in-memory store, counting the queries it was asked to run."""

    def __init__(self) -> None:
        super().__init__(None)
        self.queries = 0

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        self.queries += 1
        return super().query(sparql, default_graph=default_graph, timeout_s=timeout_s)


@pytest.fixture(scope="module")
def store() -> Iterator[CountingStore]:
    st = CountingStore()
    st.load_ntriples(GRAPH, dataset()[1])
    yield st
    st.close()


@cache
def paper_plans() -> dict[str, list[QueryPlan]]:
    return {q.id: q.plans for q in load_paper_plans()}


def compiled(qid: str, index: int = 0) -> CompiledQuery:
    return compile_plan(paper_plans()[qid][index], graph=GRAPH)


def plan(**fields: Any) -> QueryPlan:
    return parse_plan({"target": "readings", **fields})


def window(start_h: float, end_h: float) -> dict[str, str]:
    def iso(h: float) -> str:
        return (DAY + timedelta(hours=h)).isoformat().replace("+00:00", "Z")

    return {"start": iso(start_h), "end": iso(end_h)}


def run(st: CountingStore, query: CompiledQuery, tmp: Path, limit: int = 10_000, **kw: Any) -> Any:
    return execute(st, query, graph=GRAPH, row_limit=limit, out_dir=tmp, request_id="r1", **kw)


def raw(nodes: set[int], metrics: set[str], lo: datetime, hi: datetime) -> list[tuple[Any, ...]]:
    rows = [
        (r.node, r.metric, r.t, r.v)
        for r in dataset()[0]
        if r.node in nodes and r.metric in metrics and lo <= r.t < hi
    ]
    return sorted(rows, key=lambda x: (x[0], x[1], x[2]))


def read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


# --- execution, inline vs CSV -----------------------------------------------------------------


def test_q2_runs_and_returns_the_rows_inline(store: CountingStore, tmp_path: Path) -> None:
    result = run(store, compiled("Q2"), tmp_path)
    expected = raw({900}, {"total_power"}, DAY + timedelta(hours=20), DAY + timedelta(hours=24))
    assert len(expected) == 24
    assert result.columns == ("node_id", "metric_name", "timestamp", "value")
    assert list(result.rows) == expected
    assert (result.row_count, result.truncated, result.csv_path) == (24, False, None)


@pytest.mark.parametrize("delta", [0, -1])
def test_row_limit_boundary_switches_to_csv(
    store: CountingStore, tmp_path: Path, delta: int
) -> None:
    full = run(store, compiled("Q3"), tmp_path)
    n = full.row_count
    assert n > PREVIEW_ROWS
    result = run(store, compiled("Q3"), tmp_path, limit=n + delta)
    if delta == 0:  # exactly at the limit: inline
        assert result.rows == full.rows and result.csv_path is None and not result.truncated
        assert result.csv_handle is None and not list(tmp_path.glob("*.csv"))
        return
    assert result.rows is None and result.truncated and result.row_count == n
    assert result.preview == full.rows[:PREVIEW_ROWS]
    assert result.csv_path == tmp_path / "r1.csv" and result.csv_handle
    table = read_csv(result.csv_path)
    assert table[0] == list(full.columns)
    assert table[1:] == [[csv_cell(v) for v in row] for row in full.rows]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_preview_never_exceeds_the_row_limit(store: CountingStore, tmp_path: Path) -> None:
    result = run(store, compiled("Q2"), tmp_path, limit=5)
    assert result.row_count == 24 and len(result.preview) == 5 and result.rows is None


def test_csv_values_read_back(store: CountingStore, tmp_path: Path) -> None:
    full = run(store, compiled("Q4"), tmp_path)
    result = run(store, compiled("Q4"), tmp_path, limit=1)
    table = read_csv(result.csv_path)
    assert len(table) == full.row_count + 1
    for row, got in zip(full.rows, table[1:], strict=True):
        node, metric, t, v = row
        assert got == [str(node), metric, t.isoformat().replace("+00:00", "Z"), repr(v)]
        assert float(got[3]) == v


@pytest.mark.parametrize("limit", [1, 7, PREVIEW_ROWS + 3])
def test_writer_cells_keep_types_apart_and_extend_equals_add(tmp_path: Path, limit: int) -> None:
    # Equal values of different types (True == 1 == 1.0) repeat across rows and must keep their
    # own text; rows given one by one or all at once give the same file and preview.
    t = datetime(2022, 6, 1, 8, 0, 13, tzinfo=UTC)
    values: list[Any] = [True, 1, 1.0, None, "a,b", t, Decimal("1.10"), 0.1 + 0.2, float("nan")]
    rows = [tuple(values[(i + k) % len(values)] for k in range(4)) for i in range(60)]
    results = []
    for mode in ("add", "extend"):
        with ResultWriter(("a", "b", "c", "d"), row_limit=limit, out_dir=tmp_path, stem=mode) as w:
            if mode == "add":
                for row in rows:
                    w.add(row)
            else:
                w.extend(iter(rows))
            results.append(w.finish())
    for result in results:
        assert result.row_count == 60 and result.truncated and result.csv_path is not None
        table = read_csv(result.csv_path)
        assert table[1:] == [[csv_cell(v) for v in row] for row in rows]
        assert result.preview == tuple(rows[: min(PREVIEW_ROWS, limit)])
    assert results[0].csv_path.read_bytes() == results[1].csv_path.read_bytes()  # type: ignore[union-attr]


def test_post_steps_are_applied(store: CountingStore, tmp_path: Path) -> None:
    q7 = paper_plans()["Q7"][0]
    result = run(store, compile_plan(q7, graph=GRAPH), tmp_path)
    assert result.columns == ("job_id", "cv_value", "avg_value")
    metrics = {m.metric for m in q7.metrics}
    assert [r[0] for r in result.rows] == sorted(j.job_id for j in JOBS)
    for job_id, cv, avg in result.rows:
        job = next(j for j in JOBS if j.job_id == job_id)
        values = [
            r.v for r in dataset()[0]
            if r.metric in metrics and r.node in job.nodes and job.start <= r.t < job.end
        ]  # fmt: skip
        mean = statistics.fmean(values)
        assert avg == pytest.approx(mean, rel=1e-9)
        assert cv == pytest.approx(statistics.stdev(values) / mean, rel=1e-9)


# --- labels -----------------------------------------------------------------------------------


LABELLED_SPARQL = f"""{PREFIX}SELECT ?node ?rack ?gpu ?metric ?sensor ?job ?user ?room
FROM <{GRAPH}>
WHERE {{
  ?room oda:hasRack ?rack .
  ?rack oda:hasNode ?node .
  ?node oda:hasGPU ?gpu .
  ?sensor oda:observes ?gpu .
  ?sensor oda:observesMetric ?metric .
  ?job oda:runsOn ?node .
  ?job oda:submittedBy ?user .
}}
ORDER BY ?job ?gpu ?metric
"""


def test_projected_iris_become_labels(store: CountingStore, tmp_path: Path) -> None:
    query = authored_query(LABELLED_SPARQL, graph=GRAPH)
    result = run(store, query, tmp_path)
    assert result.row_count == 4 * 4  # 900: 2 jobs x 4 GPUs; 920: 2 jobs x 4 GPUs
    text = json.dumps(result.to_json())
    assert ns.INSTANCE_NS not in text and "https://" not in text
    first = dict(zip(result.columns, result.rows[0], strict=True))
    job = sorted(JOBS, key=lambda j: ns.job_iri(j.job_id))[0]
    node = min(job.nodes, key=lambda n: ns.gpu_iri(n, 0))
    assert first == {
        "node": f"node {node}",
        "rack": f"rack {node // 20}",
        "gpu": f"GPU 0 of node {node}",
        "metric": "Gpu0_gpu_utilization",
        "sensor": f"ganglia/Gpu0_gpu_utilization sensor of {node}/0",
        "job": f"job {job.job_id}",
        "user": f"user {job.user}",
        "room": "room M100-room",
    }


@pytest.mark.parametrize(
    ("iri", "expected"),
    [
        (ns.node_iri(900), "node 900"),
        (ns.rack_iri(45), "rack 45"),
        (ns.gpu_iri(900, 0), "GPU 0 of node 900"),
        (ns.cpu_iri(900, 1), "CPU 1 of node 900"),
        (ns.memory_iri(900, 15), "memory module 15 of node 900"),
        (ns.fan_iri(7, 3), "fan 3 of node 7"),
        (ns.psu_iri(7, 1), "power supply 1 of node 7"),
        (ns.job_iri(3423336), "job 3423336"),
        (ns.user_iri(1234), "user 1234"),
        (ns.metric_iri("ipmi", "total_power"), "total_power"),
        (ns.metric_iri("nagios", "alive::ping"), "alive::ping"),
        (ns.metric_iri("schneider", "PLC_PLC_Q101.Temp_mandata"), "PLC_PLC_Q101.Temp_mandata"),
        (ns.crac_iri("CDZ01"), "CRAC CDZ01"),
        (ns.plc_iri("Q101"), "PLC Q101"),
        (ns.panel_iri("QGBT1", "main_ict"), "panel QGBT1 main_ict"),
        (ns.system_iri(), "system M100"),
        (ns.weather_iri(), "weather station bologna"),
        (ns.sensor_iri("ipmi", "total_power", 900), "ipmi/total_power sensor of 900"),
        (ns.time_iri(0, 3_600_000), "interval 1970-01-01T00:00:00Z to 1970-01-01T01:00:00Z"),
        (ns.reading_iri("x", 1_654_041_600_000), "reading at 2022-06-01T00:00:00Z"),
        (ns.instance_iri("time", "a", "b"), "time a b"),  # malformed: generic, no namespace
        (ns.instance_iri("newkind", "x y"), "newkind x y"),
    ],
)
def test_instance_labels(iri: str, expected: str) -> None:
    assert instance_label(iri) == expected
    assert label(iri) == expected


def test_label_leaves_other_values_and_shortens_vocabulary() -> None:
    assert label(ns.oda("ComputeNode")) == "oda:ComputeNode"
    assert label(ns.XSD_NS + "double") == "xsd:double"
    assert label(ns.INSTANCE_NS) == "m100"
    for value in (900, 1.5, None, "node 900", "http://example.org/x", DAY):
        assert label(value) == value


# --- JSON -------------------------------------------------------------------------------------


def test_to_json_is_json_safe(store: CountingStore, tmp_path: Path) -> None:
    sparql = f"""{PREFIX}SELECT ?node_id (AVG(?node_id) AS ?mean_id) (MIN(?t) AS ?first)
FROM <{GRAPH}>
WHERE {{
  ?node oda:nodeId ?node_id .
  ?sensor oda:observes ?node .
  ?reading oda:fromSensor ?sensor .
  ?reading oda:timestamp ?t .
}}
GROUP BY ?node_id
ORDER BY ?node_id
"""
    result = run(store, authored_query(sparql, graph=GRAPH), tmp_path)
    assert isinstance(result.rows[0][1], Decimal)  # AVG of integers is xsd:decimal
    data = result.to_json()
    back = json.loads(json.dumps(data, allow_nan=False))
    assert back["rows"] == [[n, float(n), "2022-06-01T00:00:00Z"] for n in NODES]
    assert all(row[2].endswith("Z") for row in back["rows"])
    assert back["row_count"] == len(NODES) and back["csv"] is None


def test_to_json_of_a_csv_result(store: CountingStore, tmp_path: Path) -> None:
    result = run(store, compiled("Q2"), tmp_path, limit=3)
    back = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert back["rows"] is None and back["truncated"] is True and back["row_count"] == 24
    assert back["csv"] == str(tmp_path / "r1.csv") and back["csv_handle"] == result.csv_handle
    assert [r[2] for r in back["preview"]] == [
        "2022-06-01T20:00:00Z",
        "2022-06-01T20:10:00Z",
        "2022-06-01T20:20:00Z",
    ]


# --- validation and engine errors -------------------------------------------------------------


# Passes the validator, but the engine refuses an alias that re-binds a variable in scope.
REBOUND_ALIAS = f"""{PREFIX}SELECT (?node_id AS ?node_id)
FROM <{GRAPH}>
WHERE {{
  ?node oda:nodeId ?node_id .
}}
"""


def test_engine_rejection_is_an_execution_error_with_position(
    store: CountingStore, tmp_path: Path
) -> None:
    # the validator passes it; pyoxigraph refuses "The SELECT overrides an existing variable"
    query = authored_query(REBOUND_ALIAS, graph=GRAPH)
    with pytest.raises(ExecutionError) as info:
        run(store, query, tmp_path)
    err = info.value
    assert err.kind == "syntax" and err.retryable and err.code == "execution_error"
    assert err.line is not None and err.column is not None
    assert 1 <= err.line <= len(REBOUND_ALIAS.splitlines()) + 1  # the engine may point at EOF
    assert f"line {err.line}" in err.message and "error at" in err.engine_message
    data = err.to_dict()
    assert (data["line"], data["column"], data["kind"]) == (err.line, err.column, "syntax")
    assert not list(tmp_path.iterdir())


def test_unknown_property_is_rejected_before_execution(
    store: CountingStore, tmp_path: Path
) -> None:
    bad = compiled("Q2")
    bad = CompiledQuery(
        bad.sparql.replace("oda:nodeId", "oda:nodeNumber"),
        bad.graph,
        bad.columns,
        bad.sparql_columns,
        bad.post,
        bad.explanation,
    )
    before = store.queries
    with pytest.raises(ValidationFailedError) as info:
        run(store, bad, tmp_path)
    assert store.queries == before  # never reached the store
    assert isinstance(info.value, QueryRejectedError)
    assert "unknown_property" in info.value.message
    assert [d["code"] for d in info.value.to_dict()["diagnostics"]] == ["unknown_property"]


def test_another_graph_is_rejected(store: CountingStore, tmp_path: Path) -> None:
    other = compile_plan(paper_plans()["Q2"][0], graph=GRAPH + "-other")
    with pytest.raises(ValidationFailedError, match="graph_forbidden"):
        run(store, other, tmp_path)


def test_only_select_is_executed(store: CountingStore, tmp_path: Path) -> None:
    ask = f"{PREFIX}ASK FROM <{GRAPH}> WHERE {{ ?n oda:nodeId 900 . }}"
    with pytest.raises(QueryRejectedError, match="only SELECT"):
        authored_query(ask, graph=GRAPH)


def test_an_injected_validator_decides(store: CountingStore, tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def refuse(sparql: str, graph: str) -> ValidationReport:
        seen.append((sparql, graph))

        return report([Diagnostic("disjoint_types", "refused by policy")], query_form="SELECT")

    query = compiled("Q2")
    with pytest.raises(ValidationFailedError, match="refused by policy"):
        run(store, query, tmp_path, validator=refuse)
    assert seen == [(query.sparql, GRAPH)]


class FailingStore(OxigraphStore):
    def __init__(self, error: StoreError) -> None:
        super().__init__(None)
        self.error = error

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        raise self.error


def test_timeouts_and_store_failures(tmp_path: Path) -> None:
    slow = FailingStore(StoreError("the query ran longer than 5.0 s", hint="narrow it"))
    with pytest.raises(ExecutionError) as info:
        run(slow, compiled("Q2"), tmp_path)  # type: ignore[arg-type]
    assert info.value.kind == "timeout" and not info.value.retryable
    down = FailingStore(StoreError("query: cannot reach the SPARQL endpoint", hint="check it"))
    with pytest.raises(StoreError) as failed:
        run(down, compiled("Q2"), tmp_path)  # type: ignore[arg-type]
    assert not isinstance(failed.value, ExecutionError)


def test_bad_arguments(store: CountingStore, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        execute(store, compiled("Q2"), row_limit=0, out_dir=tmp_path, request_id="r1")
    for rid in ("../x", "a/b", "..", ""):
        with pytest.raises(UsageError):
            execute(store, compiled("Q2"), row_limit=5, out_dir=tmp_path, request_id=rid)


# --- downloads --------------------------------------------------------------------------------


def _csv_result(store: CountingStore, tmp_path: Path, user: str | None = "alice") -> Any:
    return run(store, compiled("Q2"), tmp_path, limit=2, user=user)


def test_open_csv_by_handle(store: CountingStore, tmp_path: Path) -> None:
    result = _csv_result(store, tmp_path)
    path = open_csv(result.csv_handle, out_dir=tmp_path, user="alice")
    assert path == result.csv_path.resolve()
    assert len(read_csv(path)) == result.row_count + 1
    assert "r1" in result.csv_handle and str(tmp_path) not in result.csv_handle


def test_open_csv_rejects_steered_and_unknown_handles(store: CountingStore, tmp_path: Path) -> None:
    result = _csv_result(store, tmp_path)
    token = result.csv_handle.rsplit("-", 1)[1]
    (tmp_path.parent / "secret.csv").write_text("x")
    bad = [
        f"../secret-{token}",
        f"..-{token}",
        f"r1/../r1-{token}",
        f"/etc/passwd-{token}",
        "r1",
        "r1-" + "0" * 24,  # right shape, wrong token
        f"r2-{token}",  # a token of another result
        result.csv_handle + "0",
        "",
    ]
    for handle in bad:
        with pytest.raises(UsageError):
            open_csv(handle, out_dir=tmp_path, user="alice")


def test_open_csv_owner_and_expiry(store: CountingStore, tmp_path: Path) -> None:
    result = _csv_result(store, tmp_path)
    with pytest.raises(AccessDeniedError):
        open_csv(result.csv_handle, out_dir=tmp_path, user="bob")
    with pytest.raises(AccessDeniedError):
        open_csv(result.csv_handle, out_dir=tmp_path, user=None)
    later = datetime.now(UTC) + timedelta(days=2)
    with pytest.raises(UsageError, match="expired"):
        open_csv(result.csv_handle, out_dir=tmp_path, user="alice", now=later)
    assert sweep_expired(tmp_path, now=later) == ["r1"]
    assert not list(tmp_path.glob("r1*"))


def test_rerun_retires_the_old_handle(store: CountingStore, tmp_path: Path) -> None:
    first = _csv_result(store, tmp_path, user=None)
    second = _csv_result(store, tmp_path, user=None)
    assert open_csv(second.csv_handle, out_dir=tmp_path, user=None) == second.csv_path.resolve()
    with pytest.raises(UsageError, match="unknown"):
        open_csv(first.csv_handle, out_dir=tmp_path, user=None)


# --- split_window -----------------------------------------------------------------------------


def test_split_window_covers_exactly() -> None:
    rng = random.Random(5)
    for _ in range(300):
        start = DAY + timedelta(seconds=rng.randrange(0, 86_400 * 30))
        end = start + timedelta(seconds=rng.randrange(1, 86_400 * 20))
        span = timedelta(seconds=rng.randrange(60, 86_400 * 3))
        align = rng.choice([None, timedelta(minutes=1), timedelta(hours=1)])
        if align is not None:
            span = max(align, span // align * align)
        chunks = split_window(start, end, max_span=span, align=align)
        assert chunks[0][0] == start and chunks[-1][1] == end
        assert all(a < b and b - a <= span for a, b in chunks)
        assert all(chunks[i][1] == chunks[i + 1][0] for i in range(len(chunks) - 1))
        if align is not None:
            assert all((b - datetime(1970, 1, 1, tzinfo=UTC)) % align == timedelta(0)
                       for _, b in chunks[:-1])  # fmt: skip


def test_split_window_examples() -> None:
    end = DAY + timedelta(days=1)
    assert split_window(DAY, end, max_span=timedelta(days=1)) == [(DAY, end)]
    assert len(split_window(DAY, end, max_span=timedelta(hours=7))) == 4
    odd = DAY + timedelta(minutes=30)
    chunks = split_window(odd, end, max_span=timedelta(hours=2), align=timedelta(hours=1))
    assert chunks[0] == (odd, DAY + timedelta(hours=2))  # first boundary on the hour grid


@pytest.mark.parametrize(
    ("start", "end", "span", "align"),
    [
        (DAY, DAY, timedelta(hours=1), None),  # empty
        (DAY + timedelta(hours=1), DAY, timedelta(hours=1), None),  # reversed
        (DAY.replace(tzinfo=None), DAY + timedelta(1), timedelta(hours=1), None),  # naive
        (DAY, DAY + timedelta(1), timedelta(0), None),
        (DAY, DAY + timedelta(1), timedelta(hours=-1), None),
        (DAY, DAY + timedelta(1), timedelta(microseconds=10), None),
        (DAY, DAY + timedelta(1), timedelta(minutes=90), timedelta(hours=1)),
        (DAY, DAY + timedelta(days=365), timedelta(minutes=1), None),  # too many chunks
    ],
)
def test_split_window_rejects(
    start: datetime, end: datetime, span: timedelta, align: timedelta | None
) -> None:
    with pytest.raises(UsageError):
        split_window(start, end, max_span=span, align=align)


# --- merging partial statistics ---------------------------------------------------------------

FNS = ("count", "sum", "avg", "min", "max", "std", "cv", "median", "p90", "p99")


def direct(values: list[float], fn: str) -> Any:
    fns: dict[str, Any] = {
        "count": len,
        "sum": sum,
        "avg": statistics.fmean,
        "min": min,
        "max": max,
        "std": statistics.stdev,
        "cv": lambda v: statistics.stdev(v) / statistics.fmean(v),
        "median": statistics.median,
        "p90": lambda v: quantile(v, 0.9),
        "p99": lambda v: quantile(v, 0.99),
    }
    return fns[fn](values)


def test_merged_partials_equal_the_unchunked_statistics() -> None:
    rng = random.Random(20220601)
    for trial in range(200):
        n = rng.randrange(2, 400)
        scale = rng.choice([1.0, 1e3, 1e6])
        values = [rng.gauss(scale, scale / 10) for _ in range(n)]
        cuts = sorted(rng.sample(range(0, n + 1), rng.randrange(0, min(n, 12))))
        parts = [values[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        merged = Partial()
        for part in rng.sample(parts, len(parts)):  # any order
            merged = merged.merge(Partial.of(part, keep_values=True))
        for fn in FNS:
            assert merged.result(fn) == pytest.approx(direct(values, fn), rel=1e-9), (trial, fn)


def test_partials_from_query_rows_merge_like_values() -> None:
    rng = random.Random(3)
    values = [round(rng.uniform(0, 1000), 2) for _ in range(50)]
    rows = []
    for part in (values[:1], values[1:20], values[20:]):
        rows.append(
            {
                "count_value": len(part),
                "sum_value": sum(part),
                "min_value": min(part),
                "max_value": max(part),
                "var_value": statistics.variance(part) if len(part) > 1 else float("nan"),
                "values_value": " ".join(str(v) for v in part),
            }
        )
    merged = Partial()
    for row in rows:
        merged = merged.merge(Partial.from_row(row))
    for fn in FNS:
        assert merged.result(fn) == pytest.approx(direct(values, fn), rel=1e-9), fn


def test_partial_edge_cases() -> None:
    assert Partial().result("count") == 0 and Partial().result("min") is None
    one = Partial.of([5.0])
    assert (one.result("std"), one.result("cv"), one.result("avg")) == (None, None, 5.0)
    assert Partial.of([0.0, 0.0]).result("cv") is None  # mean 0: undefined, not an error


# --- chunked execution ------------------------------------------------------------------------


@dataclass
class GraphPerChunk:
    """Stands in for the pipeline's VKG build: hands out the test graph, one chunk at a time."""

    active: int = 0
    built: int = 0
    plans: list[QueryPlan] | None = None

    @contextmanager
    def __call__(self, chunk_plan: QueryPlan) -> Iterator[str]:
        assert self.active == 0, "two chunk graphs alive at once"
        self.active += 1
        self.built += 1
        (self.plans if self.plans is not None else []).append(chunk_plan)
        try:
            yield GRAPH
        finally:
            self.active -= 1


def both(
    st: CountingStore, p: QueryPlan, span: timedelta, tmp: Path, limit: int = 10_000
) -> tuple[Any, Any, ChunkPlan, GraphPerChunk]:
    single = execute(
        st, compile_plan(p, graph=GRAPH), row_limit=10_000, out_dir=tmp, request_id="one"
    )
    chunking = plan_chunks(p, max_span=span)
    graphs = GraphPerChunk(plans=[])
    chunked = execute_chunked(
        st, chunking, chunk_graph=graphs, row_limit=limit, out_dir=tmp, request_id="many"
    )
    assert graphs.built == max(1, len(chunking.windows)) and graphs.active == 0
    return single, chunked, chunking, graphs


def assert_same_rows(a: Any, b: Any) -> None:
    assert a.columns == b.columns and len(a.rows) == len(b.rows)
    for x, y in zip(a.rows, b.rows, strict=True):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            if isinstance(u, float) or isinstance(v, float):
                assert v == pytest.approx(u, rel=1e-9, abs=1e-9)
            else:
                assert u == v


def test_chunked_aggregates_equal_the_single_query(store: CountingStore, tmp_path: Path) -> None:
    aggs = ["avg", "min", "max", "sum", "count", "std", "cv", "median", "p90"]
    p = plan(
        metrics=[{"plugin": "ipmi", "metric": "total_power"}],
        entities=[{"kind": "node", "all": True}],
        window=window(3.5, 46),
        aggregations=[{"fn": f, "of": "value"} for f in aggs],
        group_by=["node", "day"],
        order_by=[{"key": "std_value", "desc": True}],
        limit=5,
    )
    single, chunked, chunking, graphs = both(store, p, timedelta(hours=7), tmp_path)
    assert chunking.mode == "partials" and len(chunking.windows) == 7
    assert "7 time chunks" in chunked.notes[0]
    assert single.row_count == 5  # 3 nodes x 2 days, top 5 by std
    assert_same_rows(single, chunked)
    # each chunk ran the partials variant over its own window, not the plan's order/limit
    assert graphs.plans is not None
    assert all(cp.limit is None and not cp.order_by for cp in graphs.plans)
    assert [(cp.window.start, cp.window.end) for cp in graphs.plans if cp.window] == list(
        chunking.windows
    )


@pytest.mark.parametrize("fn", ["max", "min", "sum"])
def test_a_chunked_statistic_alone_equals_the_single_query(
    store: CountingStore, tmp_path: Path, fn: str
) -> None:
    # Without a count beside it, merging chunks kept the last chunk's figure only.
    p = plan(
        metrics=[{"plugin": "ipmi", "metric": "total_power"}],
        entities=[{"kind": "node", "all": True}],
        window=window(3.5, 46),
        aggregations=[{"fn": fn, "of": "value"}],
        group_by=["node"],
    )
    single, chunked, chunking, _ = both(store, p, timedelta(hours=7), tmp_path)
    assert chunking.mode == "partials" and len(chunking.windows) == 7
    assert single.row_count == 3
    assert_same_rows(single, chunked)


def test_chunked_aggregate_by_metric(store: CountingStore, tmp_path: Path) -> None:
    # (a plan with aggregations and no group_by does not compile yet: no ORDER BY, see report)
    p = plan(
        metrics=[
            {"plugin": "ipmi", "metric": "ambient"},
            {"plugin": "ipmi", "metric": "total_power"},
        ],
        entities=[{"kind": "node", "ids": [20, 920]}],
        window=window(0, 48),
        aggregations=[{"fn": "avg", "of": "value"}, {"fn": "cv", "of": "value"}],
        group_by=["metric"],
    )
    single, chunked, chunking, _ = both(store, p, timedelta(hours=5), tmp_path)
    assert chunking.mode == "partials" and single.row_count == 2
    assert_same_rows(single, chunked)


def test_chunked_raw_rows_keep_the_single_query_order(store: CountingStore, tmp_path: Path) -> None:
    p = plan(
        metrics=[
            {"plugin": "ipmi", "metric": "total_power"},
            {"plugin": "ipmi", "metric": "ambient"},
        ],
        entities=[{"kind": "node", "ids": [900, 920]}],
        window=window(1, 40),
    )
    single, chunked, chunking, _ = both(store, p, timedelta(hours=6), tmp_path, limit=50)
    assert chunking.mode == "rows" and len(chunking.windows) == 7
    assert chunked.rows is None and chunked.row_count == single.row_count
    table = read_csv(chunked.csv_path)
    assert table[1:] == [[csv_cell(v) for v in row] for row in single.rows]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".many")]  # runs removed


def test_chunked_top_k_rows(store: CountingStore, tmp_path: Path) -> None:
    p = plan(
        metrics=[{"plugin": "ipmi", "metric": "total_power"}],
        entities=[{"kind": "node", "all": True}],
        window=window(0, 48),
        order_by=[{"key": "value", "desc": True}],
        limit=7,
    )
    single, chunked, _, _ = both(store, p, timedelta(hours=5), tmp_path)
    assert single.row_count == 7 and chunked.rows == single.rows


def test_chunked_hourly_series_split_on_the_hour(store: CountingStore, tmp_path: Path) -> None:
    p = plan(
        metrics=[{"plugin": "ipmi", "metric": "ambient"}],
        entities=[{"kind": "node", "ids": [900]}],
        window=window(0.5, 30.5),
        granularity="hour",
    )
    single, chunked, chunking, _ = both(store, p, timedelta(minutes=150), tmp_path)
    assert all(b.minute == 0 for _, b in chunking.windows[:-1])
    assert_same_rows(single, chunked)


def test_job_plans_run_as_one_chunk_with_a_note(store: CountingStore, tmp_path: Path) -> None:
    q7 = paper_plans()["Q7"][0]
    chunking = plan_chunks(q7, max_span=timedelta(hours=1))
    assert chunking.mode == "single" and "jobs" in chunking.note
    single, chunked, _, graphs = both(store, q7, timedelta(hours=1), tmp_path)
    assert graphs.built == 1 and chunked.rows == single.rows and chunked.notes


def test_short_windows_are_not_split() -> None:
    q2 = paper_plans()["Q2"][0]
    chunking = plan_chunks(q2, max_span=timedelta(days=1))
    assert chunking.mode == "single" and len(chunking.windows) == 1 and not chunking.note


def test_partial_table_of_nothing_matches_sparql() -> None:
    p = plan(
        metrics=[{"plugin": "ipmi", "metric": "ambient"}],
        entities=[{"kind": "node", "ids": [20]}],
        window=window(0, 1),
        aggregations=[{"fn": "count", "of": "value"}, {"fn": "max", "of": "value"}],
    )
    assert PartialTable(p).rows() == (["count_value", "max_value"], [[0, None]])
