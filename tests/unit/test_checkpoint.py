"""Checkpoint stores: the shared contract (run here on the embedded store, and on Redis by
tests/integration/test_checkpoint_redis.py), retention, and survival across restarts."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from oda_analyst.config import load_settings
from oda_analyst.errors import StoreError, UsageError
from oda_analyst.retriever.checkpoint import (
    STATE_FILE,
    CheckpointStore,
    ConcurrentUpdateError,
    EmbeddedCheckpointStore,
    Retention,
    UnknownRequestError,
    open_checkpoint_store,
    redact_url,
)
from oda_analyst.retriever.state import (
    Clarification,
    ClarificationField,
    ErrorInfo,
    RequestState,
    Stage,
    Status,
    advance,
    new_request,
    resume,
)

T0 = datetime(2022, 6, 1, 9, 0, tzinfo=UTC)
StoreFactory = Callable[[], CheckpointStore]


def request(
    user: str = "alice", minutes: int = 0, question: str = "inlet temp of node 900"
) -> RequestState:
    return new_request(question, user=user, now=T0 + timedelta(minutes=minutes))


def waiting(user: str = "alice", minutes: int = 0) -> RequestState:
    state = advance(request(user, minutes), Stage.INPUT_VALIDATION, now=T0)
    return advance(
        state,
        Stage.WAITING_FOR_CLARIFICATION,
        now=T0,
        entities={"nodes": [900]},
        clarification=Clarification(
            question="Which temperature: inlet or exhaust?",
            field=ClarificationField.METRIC,
            candidates=("ambient_temp", "exhaust_temp"),
        ),
    )


def completed(user: str = "alice", minutes: int = 0) -> RequestState:
    state = advance(request(user, minutes), Stage.INPUT_VALIDATION)
    state = advance(state, Stage.GENERATION, sparql="SELECT * WHERE { ?s ?p ?o }")
    return advance(advance(state, Stage.EXECUTION), Stage.COMPLETED)


class StoreContract:
    """What every CheckpointStore must do. A subclass provides ``make_store``: a factory that
    opens a NEW store object (a new connection) on the same, initially empty, data."""

    @pytest.fixture()
    def make_store(self) -> Iterator[StoreFactory]:
        raise NotImplementedError

    @pytest.fixture()
    def store(self, make_store: StoreFactory) -> CheckpointStore:
        return make_store()

    def test_save_then_load(self, store: CheckpointStore) -> None:
        state = waiting()
        saved = store.save(state)
        assert saved.version == 1
        assert saved.model_copy(update={"version": 0}) == state
        assert store.load(state.request_id) == saved

    def test_each_save_bumps_the_version(self, store: CheckpointStore) -> None:
        saved = store.save(request())
        saved = store.save(advance(saved, Stage.INPUT_VALIDATION))
        saved = store.save(advance(saved, Stage.GENERATION, sparql="SELECT ?x WHERE {?x ?p ?o}"))
        loaded = store.load(saved.request_id)
        assert (loaded.version, loaded.stage) == (3, Stage.GENERATION)
        assert loaded.artifacts.sparql == "SELECT ?x WHERE {?x ?p ?o}"

    def test_a_stale_writer_gets_a_conflict(
        self, store: CheckpointStore, make_store: StoreFactory
    ) -> None:
        other = make_store()
        try:
            base = store.save(request())
            mine, theirs = store.load(base.request_id), other.load(base.request_id)
            other.save(advance(theirs, Stage.INPUT_VALIDATION, note="theirs"))
            with pytest.raises(ConcurrentUpdateError) as info:
                store.save(advance(mine, Stage.INPUT_VALIDATION, note="mine"))
            assert "load the request again" in str(info.value.hint)
            stored = store.load(base.request_id)
            assert (stored.version, stored.history[-1].note) == (2, "theirs")
            again = store.save(advance(stored, Stage.GENERATION))  # after reloading it works
            assert again.version == 3
        finally:
            other.close()

    def test_creating_the_same_id_twice_conflicts(self, store: CheckpointStore) -> None:
        state = request()
        store.save(state)
        with pytest.raises(ConcurrentUpdateError):
            store.save(state)

    def test_saving_over_a_missing_request_is_unknown(self, store: CheckpointStore) -> None:
        saved = store.save(request())
        assert store.delete(saved.request_id)
        with pytest.raises(UnknownRequestError):
            store.save(advance(saved, Stage.INPUT_VALIDATION))

    def test_unknown_id(self, store: CheckpointStore) -> None:
        with pytest.raises(UnknownRequestError) as info:
            store.load("0123456789abcdef")
        assert "ask again" in str(info.value.hint)
        assert info.value.exit_code == 2
        assert not store.delete("0123456789abcdef")

    def test_list_filters_and_orders(self, store: CheckpointStore) -> None:
        a1 = store.save(waiting("alice", minutes=3))
        b1 = store.save(completed("bob", minutes=1))
        a2 = store.save(completed("alice", minutes=2))
        a3 = store.save(request("alice", minutes=0))
        ids = [s.request_id for s in store.list()]
        assert ids == [a3.request_id, b1.request_id, a2.request_id, a1.request_id]
        assert [s.request_id for s in store.list(user="alice")] == [
            a3.request_id,
            a2.request_id,
            a1.request_id,
        ]
        assert store.list(user="bob", stage=Stage.COMPLETED) == [b1]
        assert store.list(stage=Stage.WAITING_FOR_CLARIFICATION) == [a1]
        assert store.list(user="carol") == []
        assert store.list(user="bob", stage=Stage.IDLE) == []

    def test_delete(self, store: CheckpointStore) -> None:
        keep, gone = store.save(request()), store.save(request(user="bob"))
        assert store.delete(gone.request_id)
        assert not store.delete(gone.request_id)
        with pytest.raises(UnknownRequestError):
            store.load(gone.request_id)
        assert store.list() == [keep]
        assert store.list(user="bob") == []

    def test_concurrent_writers_never_lose_an_update(self, make_store: StoreFactory) -> None:
        workers, each = 4, 10
        state = new_request("q", user="alice")
        state = advance(advance(state, Stage.INPUT_VALIDATION), Stage.GENERATION)
        setup = make_store()
        request_id = setup.save(state).request_id
        stores = [make_store() for _ in range(workers)]  # one connection per writer

        def work(n: int) -> None:
            done = 0
            while done < each:
                current = stores[n].load(request_id)
                try:
                    stores[n].save(advance(current, Stage.GENERATION, note=f"w{n}"))
                    done += 1
                except ConcurrentUpdateError:
                    continue  # someone else won this round: reload and try again

        threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        final = setup.load(request_id)
        assert final.version == 1 + workers * each  # one save to set up, then one per move
        assert final.retries[Stage.GENERATION] == workers * each
        notes = sorted(t.note for t in final.history if t.note)
        assert notes == sorted(f"w{n}" for n in range(workers) for _ in range(each))

    def test_a_clarification_survives_a_new_store_object(self, make_store: StoreFactory) -> None:
        first = make_store()
        asked = first.save(waiting())
        first.close()

        second = make_store()
        loaded = second.load(asked.request_id)
        assert loaded == asked
        assert loaded.stage is Stage.WAITING_FOR_CLARIFICATION
        resumed = second.save(resume(loaded, "inlet"))
        second.close()

        third = make_store()
        try:
            final = third.load(asked.request_id)
            assert final == resumed
            assert final.stage is Stage.INPUT_VALIDATION
            assert final.artifacts.clarification is not None
            assert final.artifacts.clarification.answer == "inlet"
            assert final.artifacts.entities == {"nodes": [900]}  # earlier artifacts kept
            assert final.artifacts.clarification.asked_by_stage is Stage.INPUT_VALIDATION
        finally:
            third.close()


class TestEmbeddedContract(StoreContract):
    @pytest.fixture()
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        opened: list[EmbeddedCheckpointStore] = []

        def make() -> CheckpointStore:
            opened.append(EmbeddedCheckpointStore(tmp_path / STATE_FILE))
            return opened[-1]

        yield make
        for store in opened:
            store.close()


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_retention_expires_finished_requests_first(tmp_path: Path) -> None:
    clock = Clock(T0)
    store = EmbeddedCheckpointStore(tmp_path / STATE_FILE, clock=clock)
    done = store.save(completed())
    failed_state = advance(
        advance(request(minutes=1), Stage.INPUT_VALIDATION),
        Stage.REJECTED,
        error=ErrorInfo(code="rejected", message="no such metric"),
    )
    failed = store.save(failed_state)
    asked = store.save(waiting(minutes=2))
    running = store.save(advance(request(minutes=3), Stage.INPUT_VALIDATION))

    clock.now = T0 + timedelta(days=7) - timedelta(seconds=1)
    assert len(store.list()) == 4
    assert store.load(done.request_id) == done

    clock.now = T0 + timedelta(days=7, seconds=1)
    assert store.list() == [asked, running]
    with pytest.raises(UnknownRequestError, match=done.request_id):
        store.load(done.request_id)
    assert not store.delete(failed.request_id)

    clock.now = T0 + timedelta(days=30, seconds=1)
    assert store.list() == []
    with pytest.raises(UnknownRequestError):
        store.load(asked.request_id)
    store.close()


def test_saving_renews_the_time_to_live(tmp_path: Path) -> None:
    clock = Clock(T0)
    retention = Retention(finished=timedelta(hours=1), open=timedelta(hours=2))
    store = EmbeddedCheckpointStore(tmp_path / STATE_FILE, retention=retention, clock=clock)
    saved = store.save(waiting())
    clock.now = T0 + timedelta(minutes=100)
    saved = store.save(resume(saved, "inlet"))
    clock.now = T0 + timedelta(minutes=200)  # past the first save's expiry, within the second's
    assert store.load(saved.request_id) == saved
    store.close()


def test_an_expired_request_cannot_be_saved_over_but_its_id_can_be_reused(tmp_path: Path) -> None:
    clock = Clock(T0)
    store = EmbeddedCheckpointStore(tmp_path / STATE_FILE, clock=clock)
    state = request()
    saved = store.save(state)
    clock.now = T0 + timedelta(days=31)
    with pytest.raises(UnknownRequestError):
        store.save(advance(saved, Stage.INPUT_VALIDATION))
    assert store.save(state).version == 1  # a fresh request under the same id
    store.close()
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        assert db.execute("SELECT count(*) FROM requests").fetchone() == (1,)


def test_retention_must_be_positive() -> None:
    with pytest.raises(UsageError):
        Retention(finished=timedelta(0))


def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    store = EmbeddedCheckpointStore(tmp_path / "deep" / "folder" / STATE_FILE)
    store.save(request())
    with sqlite3.connect(tmp_path / "deep" / "folder" / STATE_FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store.close()


_ASK = """
import sys
from datetime import UTC, datetime
from oda_analyst.retriever.checkpoint import EmbeddedCheckpointStore
from oda_analyst.retriever.state import Clarification, Stage, advance, new_request

store = EmbeddedCheckpointStore(sys.argv[1])
state = new_request("power of node 12 last week", user="alice")
state = advance(state, Stage.INPUT_VALIDATION, entities={"nodes": [12]})
state = advance(state, Stage.WAITING_FOR_CLARIFICATION, clarification=Clarification(
    question="Node power (IPMI) or GPU power (Ganglia)?", field="metric",
    candidates=["ipmi/total_power", "ganglia/gpu_power"]))
print(store.save(state).request_id)
"""

_ANSWER = """
import sys
from oda_analyst.retriever.checkpoint import EmbeddedCheckpointStore
from oda_analyst.retriever.state import resume

store = EmbeddedCheckpointStore(sys.argv[1])
state = store.save(resume(store.load(sys.argv[2]), sys.argv[3]))
asked = state.artifacts.clarification
print(state.model_dump_json())
print(state.stage, asked.field, asked.answer)
"""


def _python(code: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_a_clarification_survives_a_process_restart(tmp_path: Path) -> None:
    path = str(tmp_path / STATE_FILE)
    (request_id,) = _python(_ASK, path)  # one process asks, then exits
    state_json, point = _python(_ANSWER, path, request_id, "node power")  # a new one answers
    assert point == "input_validation metric node power"
    answered = RequestState.model_validate_json(state_json)

    store = EmbeddedCheckpointStore(path)
    final = store.load(request_id)
    store.close()
    assert final == answered
    assert final.version == 2
    assert final.status is Status.RUNNING
    assert final.artifacts.entities == {"nodes": [12]}
    assert final.artifacts.clarification is not None
    assert final.artifacts.clarification.answer == "node power"
    assert final.artifacts.clarification.asked_by_stage is Stage.INPUT_VALIDATION
    assert [(t.from_stage, t.to_stage) for t in final.history] == [
        (Stage.IDLE, Stage.INPUT_VALIDATION),
        (Stage.INPUT_VALIDATION, Stage.WAITING_FOR_CLARIFICATION),
        (Stage.WAITING_FOR_CLARIFICATION, Stage.INPUT_VALIDATION),
    ]


def test_a_corrupt_row_is_a_store_error(tmp_path: Path) -> None:
    store = EmbeddedCheckpointStore(tmp_path / STATE_FILE)
    saved = store.save(request())
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        db.execute("UPDATE requests SET body = ?", (json.dumps({"stage": "nowhere"}),))
    with pytest.raises(StoreError, match="not a valid request state") as info:
        store.load(saved.request_id)
    assert info.value.hint
    store.close()


def test_an_unusable_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError) as info:
        EmbeddedCheckpointStore(blocker / STATE_FILE)
    assert "ODA_DATA_DIR" in str(info.value.hint)


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = EmbeddedCheckpointStore(tmp_path / STATE_FILE)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load("abc")


def test_open_picks_the_embedded_store_without_redis(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, redis_url=None)
    store = open_checkpoint_store(settings)
    assert isinstance(store, EmbeddedCheckpointStore)
    assert store.path == tmp_path / STATE_FILE
    saved = store.save(waiting())
    store.close()
    again = open_checkpoint_store(settings)
    assert again.load(saved.request_id) == saved
    again.close()


def test_open_with_an_unreachable_redis_is_a_store_error(unused_tcp_port: int) -> None:
    url = f"redis://:s3cret@127.0.0.1:{unused_tcp_port}/0"
    settings = load_settings(redis_url=url)
    with pytest.raises(StoreError) as info:
        open_checkpoint_store(settings)
    assert "ODA_REDIS_URL" in str(info.value.hint)
    assert "s3cret" not in str(info.value)


@pytest.fixture()
def unused_tcp_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_invalid_redis_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="invalid Redis URL") as info:
        open_checkpoint_store(load_settings(redis_url="http://example"))
    assert "ODA_REDIS_URL" in str(info.value.hint)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:pw@host/1", "redis://user:***@host/1"),
        ("redis://host:6379", "redis://host:6379"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
