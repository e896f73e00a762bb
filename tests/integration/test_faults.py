"""Faults the retriever survives, one test each: killed in the middle of a graph build and
restarted; Redis going away and coming back; a damaged Parquet file in one partition; the disk
filling up while a graph is dumped; the S3 endpoint stalled or down. Real components throughout
(a killed process, a real redis-server, real Parquet files, the real store, real sockets); the
fault is injected only where the OS cannot be made to produce it here (ENOSPC at the dump's
write call).
"""

from __future__ import annotations

import errno
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import tiny_power_lake
from oda_analyst.config import Settings, load_settings
from oda_analyst.errors import LakeNotFoundError, StoreError
from oda_analyst.lake import Lake
from oda_analyst.lake.storage import S3_ATTEMPTS
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.state import Stage
from oda_analyst.vkg import tiered
from oda_analyst.vkg.cache import VKGCache, cache_key
from oda_analyst.vkg.tiered import TieredStore
from processes import stop_process

POWER_Q = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
AMBIENT_Q = "ambient temperature of node 900 on 1 June 2022 from 03:00 to 03:30"
LOOPBACK = "127.0.0.1"
GUARD_S = 300.0  # a hung process fails the test instead of hanging it; no assertion on time


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None
    return cache


def _settings(lake: Path, data_dir: Path, **extra: Any) -> Settings:
    return load_settings(lake=str(lake), data_dir=data_dir, row_limit=500, sparql_endpoint=None,
                         **{"redis_url": None, **extra})  # fmt: skip


def _lake_values(lake: Path, metric: str, start: str, end: str) -> list[np.float32]:
    files = str(lake / f"year_month=22-06/plugin=ipmi_pub/metric={metric}/*.parquet")
    df = pl.read_parquet(files, hive_partitioning=False).sort("timestamp")
    lo, hi = (pl.lit(t).str.to_datetime(time_zone="UTC") for t in (start, end))
    df = df.filter((pl.col("node").cast(pl.String) == "900") & (pl.col("timestamp") >= lo)
                   & (pl.col("timestamp") < hi))  # fmt: skip
    return [np.float32(v) for v in df["value"]]


def _values(rows: list[list[Any]] | None) -> list[np.float32]:
    assert rows is not None
    return [np.float32(r[-1]) for r in rows]


# --- killed in the middle of a build ------------------------------------------------------------

# Runs one question; the build loads its graph, then (before the cache records it) says so and
# hangs until killed: the worst moment, data in the store and no metadata.
KILLED_MID_BUILD = """
import sys, threading
from oda_analyst.config import load_settings
from oda_analyst.retriever.service import Retriever
from oda_analyst.vkg import cache

real_build = cache.VKGCache._build

def hanging_build(self, key, build, owner, allowed):
    def loaded_then_hang(graph):
        triples = build(graph)
        self.store.wait_for_dumps()  # its dump is on disk too
        print("loaded", triples, flush=True)
        threading.Event().wait()
    return real_build(self, key, loaded_then_hang, owner, allowed)

cache.VKGCache._build = hanging_build
Retriever(load_settings()).query(sys.argv[1], user="alice")
"""


def test_a_server_killed_mid_build_restarts_clean(
    lake: Path, cache_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    env = {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data),
           "ODA_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1"}  # fmt: skip
    argv = [sys.executable, "-c", KILLED_MID_BUILD, POWER_Q]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("loaded "):
                break
        assert lines and lines[-1].startswith("loaded "), "".join(lines)[-3000:]
        assert int(lines[-1].split()[1]) > 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=GUARD_S)
    finally:
        stop_process(proc)
    assert list((data / "vkg").glob("*.nt.gz")), "the killed build had written its dump"

    retriever = Retriever(_settings(lake, data))
    (killed,) = retriever.checkpoints.list(user="alice")  # its checkpoints are intact
    assert killed.stage is Stage.GENERATION and killed.question == POWER_Q
    assert retriever.stage2.cache.entries() == []  # no graph is served from the killed build
    again = retriever.query(POWER_Q, user="alice")
    assert again.status == "completed"
    assert _values(again.rows) == _lake_values(lake, "total_power", "2022-06-01T00:00:00",
                                               "2022-06-01T01:00:00")  # fmt: skip
    assert retriever.status(killed.request_id).stage is Stage.GENERATION
    retriever.store.close()


# --- Redis goes away and comes back -------------------------------------------------------------


class Redis:
    def __init__(self, port: int, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
        self.port = port
        self.proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly",
             "no", "--dir", str(workdir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + GUARD_S
        while True:
            with socket.socket() as s:
                if s.connect_ex((LOOPBACK, port)) == 0:
                    return
            assert self.proc.poll() is None and time.monotonic() < deadline, "redis did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        stop_process(self.proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_port(tmp_path: Path) -> Iterator[tuple[int, list[Redis]]]:
    started: list[Redis] = []
    yield _free_port(), started
    for r in started:
        r.stop()


def test_redis_down_is_a_clear_error_and_its_return_is_served(
    lake: Path, cache_dir: Path, tmp_path: Path, redis_port: tuple[int, list[Redis]]
) -> None:
    port, started = redis_port
    url = f"redis://{LOOPBACK}:{port}/0"
    started.append(Redis(port, tmp_path))
    retriever = Retriever(_settings(lake, tmp_path / "data", redis_url=url))
    first = retriever.query(POWER_Q, user="alice")
    assert first.status == "completed"
    started[0].stop()
    with pytest.raises(StoreError) as info:
        retriever.query(POWER_Q, user="alice")
    assert f"Redis at {url}" in info.value.message and "ODA_REDIS_URL" in (info.value.hint or "")
    started.append(Redis(port, tmp_path))  # back (empty: it kept nothing on disk)
    again = retriever.query(POWER_Q, user="alice")
    assert again.status == "completed" and _values(again.rows) == _values(first.rows)
    retriever.store.close()


# --- a damaged Parquet file ---------------------------------------------------------------------


def test_a_damaged_parquet_file_is_named_and_other_partitions_answer(
    lake: Path, cache_dir: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / "lake"
    shutil.copytree(lake, damaged)
    (bad,) = (damaged / "year_month=22-06/plugin=ipmi_pub/metric=total_power").glob("*.parquet")
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # truncated
    retriever = Retriever(_settings(damaged, tmp_path / "data"))
    failed = retriever.query(POWER_Q, user="alice")
    assert failed.status == "failed" and failed.error is not None
    assert failed.error["code"] == "vkg_build_error" and str(bad) in failed.error["message"]
    assert failed.error["hint"] and "partition" in failed.error["hint"]
    fine = retriever.query(AMBIENT_Q, user="alice")
    assert fine.status == "completed"
    expected = _lake_values(lake, "ambient", "2022-06-01T03:00:00", "2022-06-01T03:30:00")
    assert _values(fine.rows) == expected
    retriever.store.close()


# --- the disk fills up while a graph is dumped --------------------------------------------------


_GZIP_OPEN = gzip.open


class _FullDisk:
    """A gzip writer whose disk fills up after 64 bytes (ENOSPC, as the OS reports it)."""

    fired = 0

    def __init__(self, path: Any, mode: str, **kwargs: Any) -> None:
        self._inner = _GZIP_OPEN(path, mode, **kwargs)
        self._room = 64

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            self._inner.write(data[: self._room])
            self._inner.flush()
            _FullDisk.fired += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return int(self._inner.write(data))

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


def test_a_full_disk_while_dumping_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    store = TieredStore(data / "graph", dump_dir=data / "vkg")
    cache = VKGCache(store, capacity=4)
    key = cache_key({"nodes": ["900"]})
    lines = [f'<urn:s:{i}> <urn:p> "{i}" .\n'.encode() for i in range(200)]

    def build(graph: str) -> int:
        return store.load_ntriples(graph, b"".join(lines))

    monkeypatch.setattr(tiered.gzip, "open", lambda p, mode="rb", **kw: (
        _FullDisk(p, mode, **kw) if "w" in mode else _GZIP_OPEN(p, mode, **kw)))  # fmt: skip
    entry = cache.get_or_build(key, build, owner="alice")
    store.wait_for_dumps()
    monkeypatch.setattr(tiered.gzip, "open", _GZIP_OPEN)
    assert _FullDisk.fired == 1
    assert list((data / "vkg").iterdir()) == []  # no dump, no temporary left behind
    assert store.count_triples(entry.graph) == 200  # still served, from memory
    store.close()

    reopened = TieredStore(data / "graph", dump_dir=data / "vkg")  # a restart
    cache = VKGCache(reopened, capacity=4)
    rebuilt = cache.get_or_build(key, lambda g: reopened.load_ntriples(g, b"".join(lines)),
                                 owner="alice")  # fmt: skip
    assert not rebuilt.hit  # the lost graph is rebuilt whole, never loaded half
    assert reopened.count_triples(rebuilt.graph) == 200
    reopened.wait_for_dumps()
    dump = reopened.dump_path(rebuilt.graph)
    assert list((data / "vkg").iterdir()) == [dump]
    reopened.close()

    dump.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])  # cut short some other way
    third = TieredStore(data / "graph", dump_dir=data / "vkg")
    cache = VKGCache(third, capacity=4)
    again = cache.get_or_build(key, lambda g: third.load_ntriples(g, b"".join(lines)),
                               owner="alice")  # fmt: skip
    assert not again.hit and third.count_triples(again.graph) == 200
    third.close()


# --- the S3 endpoint stalls or is down ----------------------------------------------------------


class _Stalled:
    """A TCP endpoint on loopback that accepts connections and never answers (a hung server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_stalled_s3_endpoint_times_out_retries_and_names_the_endpoint() -> None:
    stalled = _Stalled()
    try:
        settings = load_settings(lake="s3://lake/m100", s3_endpoint=f"http://{LOOPBACK}:"
                                 f"{stalled.port}", s3_timeout_s=0.5)  # fmt: skip
        with pytest.raises(LakeNotFoundError) as info:
            Lake.from_settings(settings).months()
    finally:
        stalled.close()
    message = info.value.message
    assert f"cannot reach the S3 endpoint http://{LOOPBACK}:{stalled.port} " in message
    assert f"after {S3_ATTEMPTS} attempts: ReadTimeoutError" in message
    assert len(stalled.accepted) == S3_ATTEMPTS  # the first try and each retry
    assert "ODA_S3_ENDPOINT" in (info.value.hint or "")


def test_a_down_s3_endpoint_is_a_clear_error_naming_it() -> None:
    port = _free_port()  # nothing listens there
    settings = load_settings(lake="s3://lake/m100", s3_endpoint=f"http://{LOOPBACK}:{port}")
    with pytest.raises(LakeNotFoundError) as info:
        Lake.from_settings(settings).months()
    assert f"cannot reach the S3 endpoint http://{LOOPBACK}:{port} of s3://lake/m100" in (
        info.value.message
    )
