"""The lake reader over a real S3-compatible server (moto_server on loopback).

The small lake is written locally with pyarrow, uploaded object by object with the ``minio``
client, and every answer read over S3 must equal the same read from the local folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest
from minio import Minio

from fixtures_lake import SCHNEIDER_METRIC, SmallLake, utc, write_small_lake
from oda_analyst.config import Settings
from oda_analyst.errors import LakeError, LakeNotFoundError
from oda_analyst.lake.reader import Lake

if TYPE_CHECKING:
    # Only for annotations: test modules must not import conftest at run time.
    from conftest import S3Endpoint

pytestmark = pytest.mark.integration

BUCKET = "oda-lake-test"
METRICS = ["ambient", "total_power"]


@dataclass(frozen=True)
class Uploaded:
    local: SmallLake
    uri: str
    options: dict[str, str]
    client: Minio


def upload(client: Minio, bucket: str, prefix: str, lake: SmallLake) -> None:
    for rel in lake.files:
        client.fput_object(bucket, f"{prefix}/{rel}", str(lake.root / rel))


@pytest.fixture(scope="module")
def uploaded(moto_s3: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Uploaded:
    local = write_small_lake(tmp_path_factory.mktemp("s3lake"), two_files=True)
    client = Minio(moto_s3.host, moto_s3.access_key, moto_s3.secret_key, secure=False)
    if not client.bucket_exists(BUCKET):
        client.make_bucket(BUCKET)
    upload(client, BUCKET, "lake", local)
    return Uploaded(local, f"s3://{BUCKET}/lake", moto_s3.storage_options(), client)


def frames_equal(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    keys = [c for c in a.columns if c != "value" and a.schema[c] != pl.List(pl.Int32)]
    return a.schema == b.schema and a.sort(keys).equals(b.sort(keys))


WINDOWS: list[tuple[datetime | None, datetime | None]] = [
    (utc(2022, 5, 31, 23, 20), utc(2022, 6, 1, 0, 40)),
    (utc(2022, 6, 15), None),
    (None, None),
]


def test_listing_matches_local(uploaded: Uploaded) -> None:
    s3, local = Lake(uploaded.uri, uploaded.options), Lake(uploaded.local.root)
    assert s3.months() == local.months() == ["22-04", "22-05", "22-06"]
    assert s3.plugins() == local.plugins()
    assert s3.metrics("ipmi_pub") == local.metrics("ipmi") == ["ambient", "pcie", "total_power"]


@pytest.mark.parametrize("window", WINDOWS)
def test_scan_matches_local(
    uploaded: Uploaded, window: tuple[datetime | None, datetime | None]
) -> None:
    start, end = window
    s3, local = Lake(uploaded.uri, uploaded.options), Lake(uploaded.local.root)
    nodes: Sequence[int | str]
    for nodes in ([], [0, 3]):
        got = s3.scan("ipmi", METRICS, start=start, end=end, nodes=nodes or None).collect()
        want = local.scan("ipmi", METRICS, start=start, end=end, nodes=nodes or None).collect()
        assert got.height > 0
        assert frames_equal(got, want)
    tagged = s3.scan("schneider", SCHNEIDER_METRIC, tags={"panel": ["Q101"]}).collect()
    assert set(tagged["panel"]) == {"Q101"}
    assert frames_equal(
        tagged, local.scan("schneider", SCHNEIDER_METRIC, tags={"panel": ["Q101"]}).collect()
    )


def test_jobs_match_local(uploaded: Uploaded) -> None:
    s3, local = Lake(uploaded.uri, uploaded.options), Lake(uploaded.local.root)
    start, end = utc(2022, 5, 31, 22), utc(2022, 6, 1, 2)
    got = s3.jobs(start=start, end=end).collect()
    want = local.jobs(start=start, end=end).collect()
    assert got["job_id"].to_list() == [1, 2, 5, 6, 8]
    assert got.equals(want)
    assert s3.jobs(dedupe=False).collect().height == local.jobs(dedupe=False).collect().height


def test_describe_over_s3(uploaded: Uploaded) -> None:
    s3 = Lake(uploaded.uri, uploaded.options).describe()
    local = Lake(uploaded.local.root).describe()
    assert s3.location == uploaded.uri
    assert [p.to_dict() for p in s3.plugins] == [p.to_dict() for p in local.plugins]
    assert (
        s3.rows == local.rows and s3.bytes == local.bytes and s3.files == len(uploaded.local.files)
    )


def test_from_settings(uploaded: Uploaded, moto_s3: S3Endpoint) -> None:
    settings = Settings(
        lake=uploaded.uri,
        s3_endpoint=moto_s3.endpoint_url,
        s3_access_key=moto_s3.access_key,
        s3_secret_key=moto_s3.secret_key,
    )
    lake = Lake.from_settings(settings)
    assert (
        lake.scan("ipmi", "ambient", start=utc(2022, 6, 15), end=utc(2022, 6, 16)).collect().height
        == 6 * 4
    )


def test_damaged_object_is_named(uploaded: Uploaded, tmp_path: Path) -> None:
    # A second copy of the lake with one object replaced by junk.
    upload(uploaded.client, BUCKET, "damaged", uploaded.local)
    bad = "year_month=22-06/plugin=ipmi_pub/metric=total_power/a_0.parquet"
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet" * 50)
    uploaded.client.fput_object(BUCKET, f"damaged/{bad}", str(junk))
    lake = Lake(f"s3://{BUCKET}/damaged", uploaded.options)
    assert (
        lake.scan("ipmi", "ambient", start=utc(2022, 6, 15), end=utc(2022, 6, 16)).collect().height
        == 24
    )
    with pytest.raises(LakeError) as info:
        lake.scan("ipmi", "total_power", start=utc(2022, 6, 15), end=utc(2022, 6, 16))
    assert f"s3://{BUCKET}/damaged/{bad}" in info.value.message


def test_absent_bucket(moto_s3: S3Endpoint) -> None:
    with pytest.raises(LakeNotFoundError, match="bucket 'no-such-bucket' does not exist") as info:
        Lake("s3://no-such-bucket/lake", moto_s3.storage_options()).months()
    assert "ODA_S3_ENDPOINT" in (info.value.hint or "")


def test_empty_prefix(uploaded: Uploaded) -> None:
    with pytest.raises(LakeNotFoundError, match="no year_month"):
        Lake(f"s3://{BUCKET}/nothing-here", uploaded.options).plugins()


def test_unreachable_endpoint(moto_s3: S3Endpoint, unused_port: int) -> None:
    options = {**moto_s3.storage_options(), "aws_endpoint_url": f"http://127.0.0.1:{unused_port}"}
    with pytest.raises(LakeNotFoundError, match="cannot reach") as info:
        Lake("s3://bucket/lake", options).months()
    assert "ODA_S3_ENDPOINT" in (info.value.hint or "")
