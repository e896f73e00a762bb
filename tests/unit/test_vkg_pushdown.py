"""Aggregation pushed down into the lake scan, on a tiny slice of the month profile's metrics.

The slice crosses a month boundary (two partitions per metric, so partials are combined) and
holds nodes of two racks. Every expected value is computed here with plain Polars on the Parquet
files (never through the Lake reader or the product's scan).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyoxigraph as ox
import pyshacl
import pytest
import rdflib
from pydantic import ValidationError

from oda_analyst.errors import VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology.model import load_ontology_graph, load_shapes_graph
from oda_analyst.ontology.plan import Aggregation, QueryPlan, output_columns, parse_plan
from oda_analyst.sparql.aggregates import compile_aggregates, compile_pushed_plan
from oda_analyst.sparql.validator import validate
from oda_analyst.vkg.aggregates import build_aggregate_vkg
from oda_analyst.vkg.pushdown import (
    AggregateRequest,
    ScanProgress,
    aggregate_from_plan,
    float32_level,
    scan_aggregates,
)
from oda_analyst.vkg.store import OxigraphStore

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

from devset import oracle  # noqa: E402  (the devset's oracle: plain Polars on the files)

START = datetime(2022, 6, 30, 12, tzinfo=UTC)
END = datetime(2022, 7, 1, 12, tzinfo=UTC)
GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/aggregate-test"
GPU_TEMPS = tuple(("ganglia", f"Gpu{g}_gpu_temp") for g in range(2))


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("month-slice")
    spec = build_spec(
        "month",
        start=START.isoformat(),
        end=END.isoformat(),
        nodes="0-2,20-21",
        metrics="total_power,ambient,Gpu0_gpu_temp,Gpu1_gpu_temp",
    )
    generate(spec, out)
    return out


def _rows(lake_dir: Path, plugin: str, metric: str) -> pl.DataFrame:
    """Every row of one metric, straight from its files, inside [START, END)."""
    files = sorted(lake_dir.glob(f"year_month=*/plugin={plugin}_pub/metric={metric}/*.parquet"))
    assert len(files) == 2  # June and July
    frame = pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed")
    ts = pl.col("timestamp").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC")
    return frame.with_columns(
        ts.alias("timestamp"), pl.col("node").cast(pl.String).cast(pl.Int64)
    ).filter((pl.col("timestamp") >= START) & (pl.col("timestamp") < END))


def _query(
    store: OxigraphStore, req: AggregateRequest, **options: object
) -> list[tuple[object, ...]]:
    query = compile_aggregates(req, GRAPH, **options)  # type: ignore[arg-type]
    report = validate(query.sparql, allowed_graph=GRAPH)
    assert report.ok, report
    return [tuple(r) for r in store.query(query.sparql, default_graph=GRAPH).rows]


def test_daily_rack_means_are_exact_over_partitions(lake_dir: Path) -> None:
    req = AggregateRequest(
        metrics=(("ipmi", "total_power"),), statistic="mean", level="rack", bucket="day",
        start=START, end=END,
    )  # fmt: skip
    seen: list[ScanProgress] = []
    store = OxigraphStore(None)
    report = build_aggregate_vkg(req, Lake(lake_dir), store, GRAPH, progress=seen.append)
    assert [(p.done, p.total) for p in seen] == [(1, 2), (2, 2)]
    assert report.partitions == ["22-06/ipmi/total_power", "22-07/ipmi/total_power"]
    rows = _rows(lake_dir, "ipmi", "total_power")
    want = (
        rows.group_by(
            (pl.col("node") // 20).alias("rack"),
            pl.max_horizontal(pl.col("timestamp").dt.truncate("1d"), pl.lit(START)).alias("day"),
        )
        .agg(pl.col("value").cast(pl.Float64).mean())
        .sort("rack", "day")
    )
    got = _query(store, req)
    assert [(r[0], r[1]) for r in got] == list(zip(want["rack"], want["day"], strict=True))
    assert [r[2] for r in got] == pytest.approx(want["value"].to_list(), rel=1e-12)
    assert report.rows_scanned == rows.height


def test_hours_above_a_threshold_per_node(lake_dir: Path) -> None:
    rows = _rows(lake_dir, "ipmi", "ambient")
    # A level between the readings' decimals (they have one digit), as a user would type one:
    # readings are compared as the decimals their triples carry (``float32_level``).
    threshold = round(float(rows["value"].median()), 1) + 0.05  # type: ignore[arg-type]
    req = AggregateRequest(
        metrics=(("ipmi", "ambient"),), statistic="hours_above", threshold=threshold,
        level="node", start=START, end=END,
    )  # fmt: skip
    store = OxigraphStore(None)
    build_aggregate_vkg(req, Lake(lake_dir), store, GRAPH)
    want = (
        rows.group_by("node")
        .agg(((pl.col("value") > threshold).sum() * 20 / 3600).alias("hours"))
        .sort("node")
    )
    got = _query(store, req)
    assert [r[0] for r in got] == want["node"].to_list() == [0, 1, 2, 20, 21]
    assert [r[1] for r in got] == pytest.approx(want["hours"].to_list(), rel=1e-12)
    assert 0 < sum(r[1] for r in got) < 5 * 24  # type: ignore[misc]


def test_hottest_gpus_per_node_through_the_topology(lake_dir: Path) -> None:
    req = AggregateRequest(metrics=GPU_TEMPS, statistic="max", level="gpu", start=START, end=END)
    store = OxigraphStore(None)
    build_aggregate_vkg(req, Lake(lake_dir), store, GRAPH)
    frames = [_rows(lake_dir, "ganglia", m) for _, m in GPU_TEMPS]
    want = (
        pl.concat(frames)
        .group_by("node")
        .agg(pl.col("value").max().cast(pl.Float64))
        .sort(["value", "node"], descending=[True, False])
        .head(3)
    )
    got = _query(store, req, combine="max", order_desc=True, limit=3)
    assert got == list(zip(want["node"], want["value"], strict=True))
    per_gpu = _query(store, req)
    assert len(per_gpu) == 5 * 2 and {r[1] for r in per_gpu} == {0, 1}


def test_the_aggregate_graph_conforms_and_a_broken_one_does_not(lake_dir: Path) -> None:
    req = AggregateRequest(
        metrics=GPU_TEMPS, statistic="max", level="gpu", bucket="day", start=START, end=END
    )
    store = OxigraphStore(None)
    build_aggregate_vkg(req, Lake(lake_dir), store, GRAPH)
    data = store._db.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.NamedNode(GRAPH))
    graph = rdflib.Graph().parse(data=data, format="nt")
    shapes, ontology = load_shapes_graph(), load_ontology_graph()
    conforms, _, text = pyshacl.validate(
        graph, shacl_graph=shapes, ont_graph=ontology, inference="none"
    )
    assert conforms, str(text)[:2000]
    count = rdflib.URIRef("https://w3id.org/oda-analyst/ontology#sampleCount")
    victim = next(iter(graph.subjects(count, None)))
    graph.remove((victim, count, None))
    conforms, _, text = pyshacl.validate(
        graph, shacl_graph=shapes, ont_graph=ontology, inference="none"
    )
    assert not conforms and "sample count" in str(text)


def test_cpu_and_gpu_hours_per_user(lake_dir: Path) -> None:
    req = AggregateRequest(
        quantities=("cpu_hours", "gpu_hours"), statistic="sum", level="user",
        start=START, end=END,
    )  # fmt: skip
    store = OxigraphStore(None)
    build_aggregate_vkg(req, Lake(lake_dir), store, GRAPH)
    got = {(r[0], r[1]): r[2] for r in _query(store, req)}
    chosen = oracle.select_jobs(oracle.jobs(lake_dir), start=START, end=END)
    want = chosen.group_by("user_id").map_groups(
        lambda g: oracle.job_hours(g, START, END, ["cpu_hours", "gpu_hours"]).with_columns(
            pl.lit(g["user_id"][0]).alias("user_id")
        )
    )
    assert want.height > 3
    for row in want.iter_rows(named=True):
        assert got[(row["user_id"], "cpu_hours")] == pytest.approx(row["sum_cpu_hours"], rel=1e-9)
        assert got[(row["user_id"], "gpu_hours")] == pytest.approx(row["sum_gpu_hours"], rel=1e-9)
    assert len(got) == 2 * want.height


def test_requests_that_cannot_be_pushed_down_say_why(lake_dir: Path) -> None:
    with pytest.raises(ValueError, match="threshold"):
        AggregateRequest(
            metrics=(("ipmi", "ambient"),), statistic="hours_above", level="node",
            start=START, end=END,
        )  # fmt: skip
    req = AggregateRequest(
        metrics=(("ipmi", "total_power"),), statistic="max", level="gpu", start=START, end=END
    )
    with pytest.raises(VKGBuildError, match="does not observe a GPU"):
        scan_aggregates(req, Lake(lake_dir))


JUNE = {"start": "2022-06-01T00:00:00Z", "end": "2022-07-01T00:00:00Z"}


def _plan(**fields: object) -> QueryPlan:
    return parse_plan({"target": "readings", "window": JUNE, **fields})


def test_month_plans_map_to_aggregate_requests() -> None:
    power = [{"plugin": "ipmi", "metric": "total_power"}]
    gpus = [{"plugin": "ganglia", "metric": f"Gpu{g}_gpu_temp"} for g in range(4)]
    m1 = aggregate_from_plan(
        _plan(metrics=power, entities=[{"kind": "rack", "all": True}],
              aggregations=[{"fn": "avg"}], group_by=["rack", "day"])
    )  # fmt: skip
    assert m1 is not None and m1.combine is None
    assert (m1.request.level, m1.request.bucket, m1.request.statistic) == ("rack", "day", "mean")
    m2 = aggregate_from_plan(
        _plan(metrics=gpus, entities=[{"kind": "node", "all": True}],
              aggregations=[{"fn": "max"}], group_by=["node"],
              order_by=[{"key": "max_value", "desc": True}], limit=10)
    )  # fmt: skip
    assert m2 is not None and (m2.request.level, m2.combine, m2.order_desc) == ("gpu", "max", True)
    assert m2.limit == 10 and len(m2.request.metrics) == 4
    m4 = aggregate_from_plan(
        parse_plan({"target": "jobs", "window": JUNE, "entities": [{"kind": "user", "all": True}],
                    "derived": ["cpu_hours", "gpu_hours"], "group_by": ["user"],
                    "aggregations": [{"fn": "sum", "of": "cpu_hours"},
                                     {"fn": "sum", "of": "gpu_hours"}]})
    )  # fmt: skip
    assert m4 is not None and m4.request.quantities == ("cpu_hours", "gpu_hours")
    # Not decomposable, a value filter, or a mean over GPUs of unknown weights: no pushdown.
    for fields in (
        {"aggregations": [{"fn": "p90"}], "group_by": ["node"]},
        {"aggregations": [{"fn": "avg"}], "group_by": ["node"],
         "filters": [{"about": "value", "op": "gt", "value": 30}]},
        {"aggregations": [{"fn": "avg"}], "group_by": ["node"], "metrics": gpus},
    ):  # fmt: skip
        plan = _plan(**{"metrics": power, "entities": [{"kind": "node", "all": True}], **fields})
        assert aggregate_from_plan(plan) is None, fields
    some = _plan(metrics=power, entities=[{"kind": "node", "ids": [1]}],
                 aggregations=[{"fn": "avg"}], group_by=["node"])  # fmt: skip
    named = aggregate_from_plan(some)  # named nodes narrow the scan
    assert named is not None and named.request.nodes == (1,)


def test_a_plan_answered_from_aggregates_end_to_end(lake_dir: Path) -> None:
    window = {"start": START.isoformat(), "end": END.isoformat()}
    plan = parse_plan(
        {"target": "readings", "window": window, "entities": [{"kind": "node", "all": True}],
         "metrics": [{"plugin": p, "metric": m} for p, m in GPU_TEMPS],
         "aggregations": [{"fn": "max"}], "group_by": ["node"],
         "order_by": [{"key": "max_value", "desc": True}], "limit": 2}
    )  # fmt: skip
    pushed = aggregate_from_plan(plan)
    assert pushed is not None
    store = OxigraphStore(None)
    build_aggregate_vkg(pushed.request, Lake(lake_dir), store, GRAPH)
    got = _query(
        store, pushed.request, combine=pushed.combine, order_desc=pushed.order_desc,
        limit=pushed.limit,
    )  # fmt: skip
    want = (
        pl.concat([_rows(lake_dir, "ganglia", m) for _, m in GPU_TEMPS])
        .group_by("node")
        .agg(pl.col("value").max().cast(pl.Float64))
        .sort(["value", "node"], descending=[True, False])
        .head(2)
    )
    assert got == list(zip(want["node"], want["value"], strict=True))


# -- hours above a level, node selections, and the plan's own columns ---------------------------


def _hours(level: float, **fields: object) -> QueryPlan:
    window = {"start": START.isoformat(), "end": END.isoformat()}
    return parse_plan(
        {"target": "readings", "window": window,
         "metrics": [{"plugin": "ipmi", "metric": "ambient"}],
         "filters": [{"about": "value", "op": "gt", "value": level}],
         "aggregations": [{"fn": "hours"}], **fields}
    )  # fmt: skip


def test_hours_plans_need_a_level_and_one_sampling_period() -> None:
    with pytest.raises(ValidationError, match="value filter"):
        parse_plan(
            {"target": "readings", "window": JUNE, "entities": [{"kind": "node", "ids": [1]}],
             "metrics": [{"plugin": "ipmi", "metric": "ambient"}],
             "aggregations": [{"fn": "hours"}]}
        )  # fmt: skip
    with pytest.raises(ValidationError, match="one known period"):
        parse_plan(
            {"target": "readings", "window": JUNE, "entities": [{"kind": "node", "ids": [1]}],
             "metrics": [{"plugin": "ganglia", "metric": "Gpu0_gpu_temp"},
                         {"plugin": "ganglia", "metric": "cpu_idle"}],
             "filters": [{"about": "value", "op": "gt", "value": 30}],
             "aggregations": [{"fn": "hours"}]}
        )  # fmt: skip


def test_hours_plans_and_node_selections_map_to_aggregate_requests() -> None:
    one = aggregate_from_plan(_hours(27.0, entities=[{"kind": "node", "ids": [12]}]))
    assert one is not None
    assert (one.request.statistic, one.request.threshold, one.request.level) == (
        "hours_above", 27.0, "node",
    )  # fmt: skip
    assert one.request.nodes == (12,)
    racks = aggregate_from_plan(
        _hours(27.0, entities=[{"kind": "rack", "ids": [1]}], group_by=["node", "day"])
    )
    assert racks is not None and racks.request.nodes == tuple(range(20, 40))
    assert racks.request.bucket == "day"
    both = aggregate_from_plan(
        _hours(27.0, entities=[{"kind": "rack", "ids": [1]}, {"kind": "node", "ids": [5, 21]}],
               group_by=["node"])
    )  # fmt: skip
    assert both is not None and both.request.nodes == (21,)
    # not "strictly above" (the pushed-down count), several nodes pooled, a room: readings
    below = _hours(27.0, entities=[{"kind": "node", "ids": [12]}])
    below = below.model_copy(update={"filters": [below.filters[0].model_copy(update={"op": "lt"})]})
    assert aggregate_from_plan(below) is None
    assert aggregate_from_plan(_hours(27.0, entities=[{"kind": "node", "ids": [1, 2]}])) is None
    assert aggregate_from_plan(_hours(27.0, entities=[{"kind": "room", "all": True}])) is None


def _run_pushed(
    lake_dir: Path, plan: QueryPlan
) -> tuple[tuple[str, ...], list[tuple[object, ...]]]:
    pushed = aggregate_from_plan(plan)
    assert pushed is not None
    store = OxigraphStore(None)
    build_aggregate_vkg(pushed.request, Lake(lake_dir), store, GRAPH)
    compiled = compile_pushed_plan(plan, pushed, GRAPH)
    report = validate(compiled.sparql, allowed_graph=GRAPH)
    assert report.ok, report
    assert compiled.column_names == output_columns(plan)
    return compiled.column_names, [
        tuple(r) for r in store.query(compiled.sparql, default_graph=GRAPH).rows
    ]


def test_hours_above_a_level_per_node_and_day_against_polars(lake_dir: Path) -> None:
    rows = _rows(lake_dir, "ipmi", "ambient")
    level = round(float(rows["value"].quantile(0.75)), 1) + 0.05  # type: ignore[arg-type]
    plan = _hours(level, entities=[{"kind": "node", "all": True}], group_by=["node", "day"])
    columns, got = _run_pushed(lake_dir, plan)
    assert columns == ("node_id", "day", "hours_value")
    want = (
        rows.filter(pl.col("value") > level)
        .group_by("node", pl.col("timestamp").dt.date().alias("day"))
        .agg((pl.len() * 20 / 3600).alias("hours"))
        .sort("node", "day")
    )
    assert 0 < want.height < 5 * 2  # some node-days never pass the level: no row, as on readings
    assert got == [(n, d, h) for n, d, h in want.iter_rows()]


def test_one_nodes_hours_and_a_ranking_over_gpus_against_polars(lake_dir: Path) -> None:
    rows = _rows(lake_dir, "ipmi", "ambient").filter(pl.col("node") == 21)
    level = round(float(rows["value"].median()), 1) + 0.05  # type: ignore[arg-type]
    _, got = _run_pushed(lake_dir, _hours(level, entities=[{"kind": "node", "ids": [21]}]))
    assert got == [(rows.filter(pl.col("value") > level).height * 20 / 3600,)]
    window = {"start": START.isoformat(), "end": END.isoformat()}
    plan = parse_plan(
        {"target": "readings", "window": window, "entities": [{"kind": "rack", "ids": [0]}],
         "metrics": [{"plugin": p, "metric": m} for p, m in GPU_TEMPS],
         "aggregations": [{"fn": "min"}], "group_by": ["day", "node"],
         "order_by": [{"key": "min_value", "desc": True}], "limit": 4}
    )  # fmt: skip
    columns, got = _run_pushed(lake_dir, plan)
    assert columns == ("day", "node_id", "min_value")
    want = (
        pl.concat([_rows(lake_dir, "ganglia", m) for _, m in GPU_TEMPS])
        .filter(pl.col("node") < 20)
        .group_by(pl.col("timestamp").dt.date().alias("day"), "node")
        .agg(pl.col("value").min().cast(pl.Float64))
        .sort(["value", "day", "node"], descending=[True, False, False])
        .head(4)
    )
    assert got == list(want.iter_rows())


def test_float32_readings_are_compared_as_the_decimals_their_triples_carry() -> None:
    values = pl.Series([26.9, 26.8, 27.0, 30.1], dtype=pl.Float32)
    decimals = [float(v) for v in values.cast(pl.String)]  # what a reading's triple says
    for level in (26.9, 26.89999999, 26.899999618530273, 27.0, 29.95, 30.1):
        pushed = (values > float32_level(level)).to_list()
        assert pushed == [d > level for d in decimals], level


def test_groups_kept_by_a_level_on_the_pushed_statistic_against_polars(lake_dir: Path) -> None:
    """'racks/nodes whose max is above X' is pushed down (a day over every node took minutes
    as readings) and keeps the same groups as the reading query would: per rack on each
    aggregate, per node over its GPUs on the combined one."""
    window = {"start": START.isoformat(), "end": END.isoformat()}
    power = _rows(lake_dir, "ipmi", "total_power")
    level = float(power.group_by("node").agg(pl.col("value").max())["value"].median())  # type: ignore[arg-type]
    racks = parse_plan(
        {"target": "readings", "window": window, "entities": [{"kind": "node", "all": True}],
         "metrics": [{"plugin": "ipmi", "metric": "total_power"}], "group_by": ["rack"],
         "aggregations": [{"fn": "max"}],
         "filters": [{"about": "aggregate", "fn": "max", "op": "gt", "value": level}]}
    )  # fmt: skip
    _, got = _run_pushed(lake_dir, racks)
    want = (
        power.group_by((pl.col("node") // 20).alias("rack"))
        .agg(pl.col("value").max().cast(pl.Float64))
        .filter(pl.col("value") > level)
        .sort("rack")
    )
    assert want.height > 0 and got == list(want.iter_rows())
    gpus = pl.concat([_rows(lake_dir, "ganglia", m) for _, m in GPU_TEMPS])
    peak = float(gpus.group_by("node").agg(pl.col("value").max())["value"].median())  # type: ignore[arg-type]
    nodes = parse_plan(
        {"target": "readings", "window": window, "entities": [{"kind": "node", "all": True}],
         "metrics": [{"plugin": p, "metric": m} for p, m in GPU_TEMPS], "group_by": ["node"],
         "aggregations": [{"fn": "max"}],
         "filters": [{"about": "aggregate", "fn": "max", "op": "le", "value": peak}]}
    )  # fmt: skip
    _, got = _run_pushed(lake_dir, nodes)
    want = (
        gpus.group_by("node")
        .agg(pl.col("value").max().cast(pl.Float64))
        .filter(pl.col("value") <= peak)
        .sort("node")
    )
    assert 0 < want.height < gpus["node"].n_unique() and got == list(want.iter_rows())
    other = nodes.model_copy(update={"aggregations": [Aggregation(fn="min")]})
    assert aggregate_from_plan(other) is None  # a level on another statistic is not pushed
