"""The Redis checkpoint store against a real redis-server on loopback: the same contract as the
embedded store, expiry, survival across connections, processes and a server restart."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from oda_analyst.config import load_settings
from oda_analyst.errors import StoreError
from oda_analyst.retriever.checkpoint import (
    RedisCheckpointStore,
    Retention,
    UnknownRequestError,
    open_checkpoint_store,
)
from oda_analyst.retriever.state import RequestState, Stage, resume
from processes import stop_process
from unit.test_checkpoint import StoreContract, StoreFactory, completed, request, waiting

LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process on loopback, started and stopped by a test fixture."""

    def __init__(self, port: int, extra: Sequence[str] = ("--save", "", "--appendonly", "no")):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip(
                "redis-server is not installed (Debian package redis-server; "
                "scripts/setup.sh installs it)"
            )
        self.port = port
        self.url = f"redis://{LOOPBACK}:{port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", LOOPBACK, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._wait_for_ping()

    def _wait_for_ping(self, timeout: float = 30) -> None:
        client = redis.Redis(host=LOOPBACK, port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    out = (
                        self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                    )
                    pytest.fail(f"redis-server exited with {self.proc.returncode}:\n{out[-2000:]}")
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
            self.stop()
            pytest.fail(f"redis-server on port {self.port} did not answer PING in {timeout} s")
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM: Redis shuts down cleanly (writing its RDB/AOF when persistence is on)."""
        stop_process(self.proc, grace_s=20)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server without persistence for the whole module."""
    server = RedisServer(_free_port())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def prefix() -> str:
    """A key prefix of its own per test, so tests share the server without flushing it."""
    return f"t{uuid.uuid4().hex[:12]}"


class TestRedisContract(StoreContract):
    @pytest.fixture()
    def make_store(self, redis_server: RedisServer, prefix: str) -> Iterator[StoreFactory]:
        opened: list[RedisCheckpointStore] = []

        def make() -> RedisCheckpointStore:
            opened.append(RedisCheckpointStore(redis_server.url, prefix=prefix))
            return opened[-1]

        yield make
        for store in opened:
            store.close()


@pytest.fixture()
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


def test_one_json_document_per_request_with_an_expiry(
    redis_server: RedisServer, raw: redis.Redis
) -> None:
    url = f"redis://{LOOPBACK}:{redis_server.port}/1"  # a db of its own for the default prefix
    store = RedisCheckpointStore(url)
    try:
        asked = store.save(waiting())
        done = store.save(completed())
        db1 = redis.Redis.from_url(url, decode_responses=True)
        body = db1.get(f"oda:req:{asked.request_id}")
        assert body is not None
        doc = json.loads(body)
        assert (doc["request_id"], doc["stage"], doc["status"], doc["version"]) == (
            asked.request_id,
            "waiting_for_clarification",
            "waiting_for_clarification",
            1,
        )
        day_ms = 86_400_000
        assert 30 * day_ms - 60_000 < db1.pttl(f"oda:req:{asked.request_id}") <= 30 * day_ms
        assert 7 * day_ms - 60_000 < db1.pttl(f"oda:req:{done.request_id}") <= 7 * day_ms
        assert db1.smembers("oda:user:alice") == {asked.request_id, done.request_id}
        assert db1.pttl("oda:user:alice") > 30 * day_ms - 60_000
        assert db1.pttl("oda:reqs") > 30 * day_ms - 60_000
        assert raw.get(f"oda:req:{asked.request_id}") is None  # db 0 untouched
        db1.close()
    finally:
        store.close()


def test_expired_requests_vanish_and_leave_the_indexes(
    redis_server: RedisServer, raw: redis.Redis, prefix: str
) -> None:
    retention = Retention(finished=timedelta(milliseconds=300), open=timedelta(days=1))
    store = RedisCheckpointStore(redis_server.url, prefix=prefix, retention=retention)
    try:
        done = store.save(completed())
        asked = store.save(waiting())
        deadline = time.monotonic() + 20
        while raw.exists(f"{prefix}:req:{done.request_id}") and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(UnknownRequestError, match=done.request_id):
            store.load(done.request_id)
        assert store.list() == [asked]
        assert raw.smembers(f"{prefix}:reqs") == {asked.request_id}
        assert store.list(user="alice") == [asked]
        assert raw.smembers(f"{prefix}:user:alice") == {asked.request_id}
    finally:
        store.close()


_ASK = """
from oda_analyst.retriever.checkpoint import open_checkpoint_store
from oda_analyst.retriever.state import Clarification, Stage, advance, new_request

store = open_checkpoint_store()
state = new_request("power of node 12 last week", user="bob")
state = advance(state, Stage.INPUT_VALIDATION, entities={"nodes": [12]})
state = advance(state, Stage.WAITING_FOR_CLARIFICATION, clarification=Clarification(
    question="Node power (IPMI) or GPU power (Ganglia)?", field="metric",
    candidates=["ipmi/total_power", "ganglia/gpu_power"]))
print(type(store).__name__, store.save(state).request_id)
"""

_ANSWER = """
import sys
from oda_analyst.retriever.checkpoint import open_checkpoint_store
from oda_analyst.retriever.state import resume

store = open_checkpoint_store()
print(store.save(resume(store.load(sys.argv[1]), sys.argv[2])).model_dump_json())
"""


def _python(code: str, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_clarification_survives_a_process_restart(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    env = {"ODA_REDIS_URL": redis_server.url, "ODA_DATA_DIR": str(tmp_path)}
    kind, request_id = _python(_ASK, env).split()
    assert kind == "RedisCheckpointStore"
    answered = RequestState.model_validate_json(_python(_ANSWER, env, request_id, "node power"))
    store = open_checkpoint_store(load_settings(redis_url=redis_server.url, data_dir=tmp_path))
    try:
        final = store.load(request_id)
    finally:
        store.close()
    assert final == answered
    assert (final.stage, final.version) == (Stage.INPUT_VALIDATION, 2)
    assert final.artifacts.clarification is not None
    assert final.artifacts.clarification.answer == "node power"
    assert not (tmp_path / "state.sqlite3").exists()  # Redis, not the embedded store


@pytest.mark.parametrize(
    "persistence",
    [("--appendonly", "yes", "--appendfsync", "always", "--save", ""), ("--save", "3600 1")],
    ids=["aof", "rdb"],
)
def test_a_clarification_survives_a_redis_restart(
    tmp_path: Path, persistence: tuple[str, ...]
) -> None:
    port = _free_port()
    extra = ("--dir", str(tmp_path), *persistence)
    server = RedisServer(port, extra)
    try:
        store = RedisCheckpointStore(server.url)
        asked = store.save(waiting(user="carol"))
        done = store.save(completed(user="carol", minutes=1))
        server.stop()
        with pytest.raises(StoreError) as info:  # the server is gone: a typed error, not a crash
            store.load(asked.request_id)
        assert "ODA_REDIS_URL" in str(info.value.hint)
        store.close()

        server = RedisServer(port, extra)  # same folder, same port: a restarted server
        again = RedisCheckpointStore(server.url)
        loaded = again.load(asked.request_id)
        assert loaded == asked
        assert again.list(user="carol") == [asked, done]
        client = redis.Redis.from_url(server.url)
        assert client.pttl(f"oda:req:{asked.request_id}") > 0  # the expiry survived too
        client.close()
        resumed = again.save(resume(loaded, "exhaust"))
        assert again.load(asked.request_id) == resumed
        assert resumed.stage is Stage.INPUT_VALIDATION
        again.close()
    finally:
        server.stop()


def test_an_unreachable_server_is_a_store_error() -> None:
    url = f"redis://{LOOPBACK}:{_free_port()}/0"
    with pytest.raises(StoreError) as info:
        RedisCheckpointStore(url, timeout_s=1)
    assert "ODA_REDIS_URL" in str(info.value.hint)
    assert url in str(info.value)


def test_a_request_the_server_never_saw_cannot_be_updated(
    redis_server: RedisServer, prefix: str
) -> None:
    store = RedisCheckpointStore(redis_server.url, prefix=prefix)
    try:
        ghost = request().model_copy(update={"version": 4})
        with pytest.raises(UnknownRequestError):
            store.save(ghost)
    finally:
        store.close()


def test_foreign_data_under_the_prefix_is_a_store_error(
    redis_server: RedisServer, raw: redis.Redis, prefix: str
) -> None:
    store = RedisCheckpointStore(redis_server.url, prefix=prefix)
    try:
        saved = store.save(request())
        raw.set(f"{prefix}:req:{saved.request_id}", "not json")
        with pytest.raises(StoreError, match="not a valid request state"):
            store.load(saved.request_id)
        with pytest.raises(StoreError) as info:  # the server-side script cannot decode it
            store.save(saved)
        assert "not have been written by ODA Analyst" in str(info.value.hint)
    finally:
        store.close()
