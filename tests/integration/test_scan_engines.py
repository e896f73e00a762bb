"""The Dask scan engine against the Polars one: a real LocalCluster (two worker processes) reading
a small month-profile slice from the loopback S3 server (moto), the same answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from minio import Minio

from oda_analyst.config import load_settings
from oda_analyst.errors import UsageError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology.plan import parse_plan
from oda_analyst.retriever.service import Retriever
from oda_analyst.vkg.engines import DaskEngine, PolarsEngine, choose_engine, engine_for
from oda_analyst.vkg.pushdown import AggregateRequest, scan_aggregates

if TYPE_CHECKING:
    from conftest import S3Endpoint

pytestmark = pytest.mark.integration
distributed = pytest.importorskip("distributed")

BUCKET = "oda-month-slice"
START = datetime(2022, 6, 30, 12, tzinfo=UTC)
END = datetime(2022, 7, 1, 12, tzinfo=UTC)
REQUESTS = [
    AggregateRequest(
        metrics=(("ipmi", "total_power"),), statistic="mean", level="rack", bucket="day",
        start=START, end=END,
    ),
    AggregateRequest(
        metrics=tuple(("ganglia", f"Gpu{g}_gpu_temp") for g in range(2)), statistic="max",
        level="gpu", start=START, end=END,
    ),
    AggregateRequest(
        metrics=(("ipmi", "ambient"),), statistic="hours_above", threshold=24.0, level="node",
        bucket="day", start=START, end=END,
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def s3_lake(moto_s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    local = tmp_path_factory.mktemp("month-slice")
    spec = build_spec(
        "month",
        start=START.isoformat(),
        end=END.isoformat(),
        nodes="0-2,20-21",
        metrics="total_power,ambient,Gpu0_gpu_temp,Gpu1_gpu_temp",
    )
    generate(spec, local)
    client = Minio(moto_s3.host, moto_s3.access_key, moto_s3.secret_key, secure=False)
    if not client.bucket_exists(BUCKET):
        client.make_bucket(BUCKET)
    for path in sorted(p for p in local.rglob("*.parquet")):
        client.fput_object(BUCKET, f"lake/{path.relative_to(local)}", str(path))
    yield Lake(f"s3://{BUCKET}/lake", moto_s3.storage_options())


@pytest.fixture(scope="module")
def dask_engine() -> Iterator[DaskEngine]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = distributed.Client(cluster)
    try:
        yield DaskEngine(client)
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("req", REQUESTS, ids=["rack-day-mean", "gpu-max", "node-hours-above"])
def test_dask_gives_the_polars_answer(
    s3_lake: Lake, dask_engine: DaskEngine, req: AggregateRequest
) -> None:
    progress: list[int] = []
    polars = scan_aggregates(req, s3_lake, engine=PolarsEngine())
    with distributed.get_task_stream(dask_engine.client) as stream:
        dask = scan_aggregates(
            req, s3_lake, engine=dask_engine, progress=lambda p: progress.append(p.done)
        )
    assert polars.data.height > 0 and polars.rows_scanned > 10_000
    assert dask.data.equals(polars.data), (dask.data, polars.data)
    assert dask.rows_scanned == polars.rows_scanned
    assert sorted(progress) == list(range(1, len(polars.partitions) + 1))
    # The cluster's workers ran one run_partition task per partition.
    ran = [t for t in stream.data if str(t["key"]).startswith("run_partition")]
    assert len(ran) == len(polars.partitions) and all(t["worker"] for t in ran)


def test_a_failing_task_aborts_the_request(s3_lake: Lake, dask_engine: DaskEngine) -> None:
    # The workers find no partitions under this prefix: their error comes back as the build's.
    missing = Lake(f"s3://{BUCKET}/no-lake", s3_lake.storage_options)
    with pytest.raises(VKGBuildError, match="aggregating mean of total_power failed"):
        scan_aggregates(REQUESTS[0], missing, engine=dask_engine)


def test_the_engine_is_chosen_by_the_rows_to_scan() -> None:
    def dask() -> DaskEngine:
        return DaskEngine(client=None)

    assert choose_engine(1e6, dask=dask).name == "polars"
    assert choose_engine(1e10, dask=dask).name == "dask"
    assert choose_engine(1e10).name == "polars"  # no cluster configured
    assert choose_engine(1e3, "dask", dask=dask).name == "dask"
    assert choose_engine(1e10, "polars", dask=dask).name == "polars"
    with pytest.raises(UsageError, match="no scheduler"):
        choose_engine(1.0, "dask")
    settings = load_settings(scan_engine="polars", dask_scheduler="tcp://127.0.0.1:1")
    assert engine_for(1e12, settings).name == "polars"


def test_the_retriever_sends_a_month_plan_to_the_configured_cluster(
    s3_lake: Lake, dask_engine: DaskEngine, tmp_path: Path
) -> None:
    """ODA_SCAN_ENGINE=dask with the cluster's scheduler: the routed plan's scan runs there and
    answers as the in-process engine does."""
    window = {"start": START.isoformat(), "end": END.isoformat()}
    plan = parse_plan(
        {"target": "readings", "window": window, "entities": [{"kind": "node", "all": True}],
         "metrics": [{"plugin": "ganglia", "metric": f"Gpu{g}_gpu_temp"} for g in range(2)],
         "aggregations": [{"fn": "max"}], "group_by": ["gpu"]}
    )  # fmt: skip
    address = dask_engine.client.scheduler.address
    rows = {}
    for engine in ("polars", "dask"):
        settings = load_settings(
            data_dir=tmp_path / engine, sparql_endpoint=None, redis_url=None, llm_base_url=None,
            pushdown_min_readings=0, scan_engine=engine, dask_scheduler=address,
        )  # fmt: skip
        stage2 = Retriever(settings, lake=s3_lake).stage2
        assert stage2.pushdown is not None
        try:
            run = stage2.run(plan, user="t", request_id=engine)
        finally:
            stage2.pushdown.close()  # the Dask client, before the cluster goes
        assert run.scan is not None and run.scan["engine"] == engine
        assert run.scan["partitions_done"] == run.scan["partitions_total"] == 4  # 2 months x 2
        rows[engine] = run.result.rows
    assert rows["dask"] == rows["polars"] and len(rows["polars"]) == 5 * 2
