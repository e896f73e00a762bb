"""VKGs for the paper's questions on a generated slice of the ``sample`` lake.

For each question: its plans (``ontology/examples/paper_plans.yaml``) are grounded with
``from_plan``, built into an embedded store, and the readings in the named graph — counted and
summed per series by SPARQL — must equal a direct Polars scan of the lake; jobs must equal the
deduplicated job table; the compiler's query for the plan must run on the graph.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import PaperQuestion, QueryPlan, load_paper_plans
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.request import GroundedRequest, from_plan
from oda_analyst.vkg.store import OxigraphStore

METRICS = (
    "total_power,ambient,cpu_system,Gpu0_gpu_utilization,Gpu1_gpu_utilization,"
    "Gpu2_gpu_utilization,Gpu3_gpu_utilization,s21.cluster_cpu_util,s21.cluster_gpu_util,temp"
)
PREFIX = ns.sparql_prefixes()
QUESTIONS = ("Q1", "Q2", "Q3", "Q5", "Q6", "Q7", "Q8", "Q9", "Q10", "Q11", "Q12", "Q13")


@pytest.fixture(scope="session")
def questions() -> dict[str, PaperQuestion]:
    return {q.id: q for q in load_paper_plans()}


@pytest.fixture(scope="session")
def lake(tmp_path_factory: pytest.TempPathFactory, questions: dict[str, PaperQuestion]) -> Lake:
    """The sample profile for the questions' nodes and the nodes of the jobs they name."""
    root = tmp_path_factory.mktemp("sample-slice")
    generate(build_spec("sample", plugins="job_table"), root)
    jobs_lake = Lake(root)
    nodes = {900, 920, 301, 318}
    for qid in ("Q7", "Q9"):
        for plan in questions[qid].plans:
            nodes |= {n for w in from_plan(plan, jobs_lake).job_windows for n in w.nodes}
    spec = build_spec("sample", nodes=",".join(map(str, sorted(nodes))), metrics=METRICS)
    generate(spec, root)
    return Lake(root)


def _series_in_graph(store: OxigraphStore, graph: str) -> dict[tuple[str, str], tuple[int, float]]:
    rows = store.query(
        f"""{PREFIX}
SELECT ?name ?key (COUNT(?v) AS ?n) (SUM(?v) AS ?s) WHERE {{
  ?r oda:fromSensor ?sensor ; oda:value ?v .
  ?sensor oda:observesMetric ?m ; oda:entityKey ?key . ?m oda:metricName ?name .
}} GROUP BY ?name ?key""",
        default_graph=graph,
    ).rows
    return {(r[0], r[1]): (int(r[2]), float(r[3])) for r in rows}


def _key(plugin: str) -> pl.Expr:
    if plugin in ("ipmi", "ganglia"):
        return pl.col("node")
    if plugin == "weather":
        return pl.lit(ns.DEFAULT_WEATHER)
    return pl.concat_str([pl.lit(ns.DEFAULT_SYSTEM), pl.col("partition")], separator="/")


def _series_in_lake(lake: Lake, req: GroundedRequest) -> dict[tuple[str, str], tuple[int, float]]:
    """Count and sum per (metric, entity key) straight from Polars, without the builder."""
    by_plugin: dict[str, list[str]] = {}
    for plugin, metric in req.metrics:
        by_plugin.setdefault(plugin, []).append(metric)
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for plugin, metrics in by_plugin.items():
        if req.job_windows:
            frames = [
                lake.scan(plugin, metrics, start=w.start, end=w.end, nodes=list(w.nodes))
                for w in req.job_windows
            ]
            lf = pl.concat(frames).unique(subset=["metric", "node", "timestamp"])
        else:
            nodes = req.node_selection() if plugin in ("ipmi", "ganglia") else None
            lf = lake.scan(
                plugin,
                metrics,
                start=req.start,
                end=req.end,
                nodes=None if nodes is None else list(nodes),
            )
        table = (
            lf.group_by("metric", _key(plugin).alias("key"))
            .agg(pl.len().alias("n"), pl.col("value").cast(pl.Float64).sum().alias("s"))
            .collect()
        )
        for row in table.iter_rows(named=True):
            out[(row["metric"], row["key"])] = (row["n"], row["s"])
    return out


def _check_jobs(lake: Lake, store: OxigraphStore, graph: str, req: GroundedRequest) -> None:
    rows = store.query(
        f"""{PREFIX}
SELECT ?id ?start (COUNT(?node) AS ?n) WHERE {{
  ?job oda:jobId ?id ; oda:runsOn ?node . OPTIONAL {{ ?job oda:startTime ?start }}
}} GROUP BY ?id ?start""",
        default_graph=graph,
    ).rows
    table = lake.jobs(job_ids=list(req.job_ids())).collect() if req.jobs else None
    if req.include_jobs:
        table = lake.jobs(start=req.start, end=req.end).collect()
    assert table is not None
    expected = {
        j["job_id"]: (j["start_time"], len(j["node_list"])) for j in table.iter_rows(named=True)
    }
    started = {k: v for k, v in expected.items() if v[1] > 0}
    assert {r[0]: (r[1], r[2]) for r in rows} == started


@pytest.mark.parametrize("qid", QUESTIONS)
def test_paper_question_vkg(qid: str, questions: dict[str, PaperQuestion], lake: Lake) -> None:
    store = OxigraphStore(None)
    for i, plan in enumerate(questions[qid].plans):
        req = from_plan(plan, lake)
        graph = f"{ns.INSTANCE_NS}graph/vkg/{req.key()}"
        report = build_vkg(req, lake, store, graph)
        assert report.triples == store.count_triples(graph), (qid, i)
        if req.metrics:
            got = _series_in_graph(store, graph)
            want = _series_in_lake(lake, req)
            assert set(got) == set(want) and want, (qid, i)
            for key, (n, s) in want.items():
                assert got[key][0] == n and got[key][1] == pytest.approx(s, rel=1e-6), (qid, key)
            assert report.readings == sum(n for n, _ in want.values())
        if req.jobs or req.include_jobs:
            _check_jobs(lake, store, graph, req)
        _compiled_query_runs(plan, store, graph)


def _compiled_query_runs(plan: QueryPlan, store: OxigraphStore, graph: str) -> None:
    compiled = compile_plan(plan, graph=graph)
    result = store.query(compiled.sparql, default_graph=graph)
    assert result.rows, compiled.sparql


def test_q1_counts_every_node(questions: dict[str, PaperQuestion], lake: Lake) -> None:
    store = OxigraphStore(None)
    (plan,) = questions["Q1"].plans
    req = from_plan(plan, lake)
    graph = f"{ns.INSTANCE_NS}graph/vkg/{req.key()}"
    build_vkg(req, lake, store, graph)
    result = store.query(compile_plan(plan, graph=graph).sparql, default_graph=graph)
    assert result.rows[0][-1] == 980


def test_q2_compiled_rows_equal_polars(questions: dict[str, PaperQuestion], lake: Lake) -> None:
    store = OxigraphStore(None)
    (plan,) = questions["Q2"].plans
    req = from_plan(plan, lake)
    graph = f"{ns.INSTANCE_NS}graph/vkg/{req.key()}"
    build_vkg(req, lake, store, graph)
    compiled = compile_plan(plan, graph=graph)
    rows = store.query(compiled.sparql, default_graph=graph).dicts()
    start = datetime(2022, 6, 1, 20, tzinfo=UTC)
    direct = (
        lake.scan("ipmi", "total_power", start=start, end=start.replace(day=2, hour=0), nodes=[900])
        .sort("timestamp")
        .collect()
    )
    assert [(r["timestamp"], r["value"]) for r in rows] == [
        (t, float(v)) for t, v in direct.select("timestamp", "value").iter_rows()
    ]
