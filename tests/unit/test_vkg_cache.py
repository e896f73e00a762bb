"""The VKG cache: keys, hits, LRU eviction, ACLs, single-flight builds, persistent metadata."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.errors import AccessDeniedError, UsageError
from oda_analyst.vkg import cache as cache_module
from oda_analyst.vkg.cache import (
    CACHE_META_GRAPH,
    CACHE_NS,
    EVERYONE,
    VKG_GRAPH_PREFIX,
    VKGCache,
    cache_key,
    vkg_graph_iri,
)
from oda_analyst.vkg.store import OxigraphStore

XSD = "http://www.w3.org/2001/XMLSchema#"
T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
WAIT = 30.0  # generous upper bound for a thread hand-over; never reached when things work


class Clock:
    """An injected clock that moves one second per reading unless set."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


class Builder:
    """A build function that loads ``size`` triples into the graph and counts its calls."""

    def __init__(self, store: OxigraphStore, size: int = 5) -> None:
        self.store = store
        self.size = size
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, graph: str) -> int:
        with self.lock:
            self.calls.append(graph)
        data = "".join(
            f'<http://ex.test/s/{i}> <http://ex.test/v> "{i}"^^<{XSD}integer> .\n'
            for i in range(self.size)
        ).encode()
        return self.store.load_ntriples(graph, data)


def key_of(name: str) -> str:
    return cache_key({"nodes": [name]})


@pytest.fixture()
def store() -> Iterator[OxigraphStore]:
    s = OxigraphStore()
    yield s
    s.close()


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def cache(store: OxigraphStore, clock: Clock) -> VKGCache:
    return VKGCache(store, capacity=2, clock=clock)


# -- keys ---------------------------------------------------------------------------------------

REQUEST: dict[str, Any] = {
    "nodes": [900, 12, 45],
    "gpus": [[900, 0], [12, 3]],
    "metrics": [["ipmi", "total_power"], ["nagios", "alive::ping"]],
    "start": datetime(2022, 6, 1, 8, tzinfo=UTC),
    "end": datetime(2022, 6, 1, 9, tzinfo=UTC),
    "granularity": "raw",
    "job_filters": {"states": ["COMPLETED", "FAILED"], "single_node": None},
}


def test_the_key_ignores_order_and_duplicates() -> None:
    shuffled = {
        "job_filters": {"single_node": None, "states": ["FAILED", "COMPLETED", "FAILED"]},
        "granularity": "raw",
        "end": datetime(2022, 6, 1, 9, tzinfo=UTC).astimezone(timezone(timedelta(hours=2))),
        "start": "2022-06-01T08:00:00Z",
        "metrics": [("nagios", "alive::ping"), ("ipmi", "total_power"), ["ipmi", "total_power"]],
        "gpus": [(12, 3), (900, 0)],
        "nodes": [45, 900, 12, 45],
    }
    key = cache_key(REQUEST)
    assert key == cache_key(shuffled)
    assert len(key) == 32 and int(key, 16) >= 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("end", datetime(2022, 6, 1, 10, tzinfo=UTC)),  # another window
        ("granularity", "hour"),
        ("nodes", [900, 12]),
        (
            "gpus",
            [[0, 900], [12, 3]],
        ),  # pairs keep their order: GPU 900 of node 0 is not GPU 0 of 900
    ],
)
def test_the_key_changes_with_what_the_graph_holds(field: str, value: object) -> None:
    assert cache_key({**REQUEST, field: value}) != cache_key(REQUEST)


def test_keys_outside_json_and_malformed_keys_are_refused(cache: VKGCache) -> None:
    with pytest.raises(UsageError):
        cache_key({"nodes": [object()]})
    for bad in ("", "ABCDEF0123", "abc> } ; DROP ALL ; {", "zz" * 8):
        with pytest.raises(UsageError):
            vkg_graph_iri(bad)
        with pytest.raises(UsageError):
            cache.get_or_build(bad, lambda g: 0, owner="alice")
    assert vkg_graph_iri("0123abcd") == VKG_GRAPH_PREFIX + "0123abcd"


# -- hits and metadata --------------------------------------------------------------------------


def test_a_miss_builds_and_a_hit_reuses_and_updates_last_access(
    cache: VKGCache, store: OxigraphStore, clock: Clock
) -> None:
    build = Builder(store, size=7)
    key = key_of("a")
    first = cache.get_or_build(key, build, owner="alice")
    assert first.hit is False
    assert first.graph == vkg_graph_iri(key) and build.calls == [first.graph]
    assert first.triples == 7 == store.count_triples(first.graph)
    assert first.bytes == store.graph_bytes(first.graph) > 0
    assert first.created == first.last_access

    clock.now = T0 + timedelta(hours=3)
    second = cache.get_or_build(key, build, owner="alice")
    assert second.hit is True
    assert len(build.calls) == 1
    assert second.created == first.created
    assert second.last_access == T0 + timedelta(hours=3, seconds=1)
    assert cache.entry(key) == replace(second, hit=False)


def test_metadata_is_rdf_in_the_cache_meta_graph(cache: VKGCache, store: OxigraphStore) -> None:
    key = key_of("a")
    entry = cache.get_or_build(key, Builder(store, 3), owner="alice", allowed_users=["bob"])
    rows = store.query(
        f"PREFIX c: <{CACHE_NS}> SELECT ?n ?b ?o ?u ?t WHERE {{ <{entry.graph}> c:tripleCount ?n ;"
        " c:byteSize ?b ; c:owner ?o ; c:allowedUser ?u ; c:lastAccess ?t }",
        default_graph=CACHE_META_GRAPH,
    ).rows
    assert rows == [(3, entry.bytes, "alice", "bob", entry.last_access)]


def test_owner_names_with_quotes_and_braces_round_trip(
    cache: VKGCache, store: OxigraphStore
) -> None:
    owner = 'mallory" } ; DROP ALL ; INSERT DATA { <x:a> <x:b> "c'
    entry = cache.get_or_build(key_of("a"), Builder(store), owner=owner, allowed_users=["a\nb"])
    assert cache.entry(entry.key) is not None
    assert cache.entries()[0].owner == owner
    assert cache.entries()[0].allowed_users == {"a\nb"}
    assert store.graph_exists(entry.graph)


def test_entries_are_listed_most_recent_first(cache: VKGCache, store: OxigraphStore) -> None:
    build = Builder(store)
    cache.capacity = 5
    for name in "abc":
        cache.get_or_build(key_of(name), build, owner="alice")
    cache.get_or_build(key_of("a"), build, owner="alice")
    assert [e.key for e in cache.entries()] == [key_of("a"), key_of("c"), key_of("b")]


def test_a_graph_dropped_behind_the_cache_is_rebuilt(cache: VKGCache, store: OxigraphStore) -> None:
    build = Builder(store)
    entry = cache.get_or_build(key_of("a"), build, owner="alice")
    store.drop_graph(entry.graph)
    again = cache.get_or_build(key_of("a"), build, owner="alice")
    assert again.hit is False and len(build.calls) == 2
    assert store.graph_exists(entry.graph)


# -- eviction -----------------------------------------------------------------------------------


def test_lru_eviction_beyond_capacity(cache: VKGCache, store: OxigraphStore) -> None:
    build = Builder(store)
    a, b, c = (cache.get_or_build(key_of(n), build, owner="alice") for n in "abc")
    assert {e.key for e in cache.entries()} == {b.key, c.key}
    assert not store.graph_exists(a.graph)
    assert store.graph_exists(b.graph) and store.graph_exists(c.graph)


def test_a_hit_makes_an_entry_recent_again(cache: VKGCache, store: OxigraphStore) -> None:
    build = Builder(store)
    a = cache.get_or_build(key_of("a"), build, owner="alice")
    b = cache.get_or_build(key_of("b"), build, owner="alice")
    assert cache.get_or_build(key_of("a"), build, owner="alice").hit
    c = cache.get_or_build(key_of("c"), build, owner="alice")
    assert {e.key for e in cache.entries()} == {a.key, c.key}
    assert not store.graph_exists(b.graph)


def test_capacity_one_keeps_the_graph_just_built(store: OxigraphStore, clock: Clock) -> None:
    cache = VKGCache(store, capacity=1, clock=clock)
    build = Builder(store)
    cache.get_or_build(key_of("a"), build, owner="alice")
    b = cache.get_or_build(key_of("b"), build, owner="alice")
    assert [e.key for e in cache.entries()] == [b.key]
    with pytest.raises(UsageError):
        VKGCache(store, capacity=0)


def test_evict_clear_and_orphans(cache: VKGCache, store: OxigraphStore) -> None:
    build = Builder(store)
    a = cache.get_or_build(key_of("a"), build, owner="alice")
    b = cache.get_or_build(key_of("b"), build, owner="alice")
    cache.evict(a.key)
    assert [e.key for e in cache.entries()] == [b.key] and not store.graph_exists(a.graph)
    orphan = vkg_graph_iri(key_of("orphan"))
    build(orphan)  # a graph whose build crashed before its metadata was written
    assert cache.sweep_orphans() == [orphan]
    build(orphan)
    cache.clear()
    assert cache.entries() == []
    assert not [
        g for g in store.graphs() if g.startswith(VKG_GRAPH_PREFIX) and store.graph_exists(g)
    ]


# -- ACL ----------------------------------------------------------------------------------------


def test_owner_and_allowed_users_get_the_graph_others_never_do(
    cache: VKGCache, store: OxigraphStore
) -> None:
    build = Builder(store)
    key = key_of("secret")
    built = cache.get_or_build(key, build, owner="alice", allowed_users=["bob"])
    assert cache.get_or_build(key, build, owner="bob", user="bob").graph == built.graph
    assert cache.get_or_build(key, build, owner="alice").hit
    graphs_before = store.graphs()
    with pytest.raises(AccessDeniedError) as info:
        cache.get_or_build(key, build, owner="eve", user="eve")
    assert "alice" not in str(info.value)  # the owner is not disclosed
    with pytest.raises(AccessDeniedError):
        cache.get_or_build(key, build, owner="eve")  # the owner argument is who asks by default
    with pytest.raises(AccessDeniedError):
        cache.lookup(key, user="eve")
    assert len(build.calls) == 1
    assert store.graphs() == graphs_before


def test_everyone_opens_a_graph_to_all(cache: VKGCache, store: OxigraphStore) -> None:
    key = key_of("public")
    cache.get_or_build(key, Builder(store), owner="alice", allowed_users=[EVERYONE])
    assert cache.get_or_build(key, Builder(store), owner="eve").hit


# -- concurrency --------------------------------------------------------------------------------


@pytest.fixture()
def waiting(monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Released once for every thread that starts waiting for another thread's build."""
    waiters = threading.Semaphore(0)

    class CountingFuture(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            waiters.release()
            return super().result(timeout)

    monkeypatch.setattr(cache_module, "Future", CountingFuture)
    return waiters


def run_threads(n: int, target: Callable[[int], object]) -> list[object]:
    outcomes: list[object] = [None] * n
    start = threading.Barrier(n)

    def work(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = target(i)
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=WAIT)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_concurrent_requests_for_one_key_build_once(
    store: OxigraphStore, clock: Clock, waiting: threading.Semaphore
) -> None:
    cache = VKGCache(store, capacity=4, clock=clock)
    inner = Builder(store)

    def slow_build(graph: str) -> int:
        for _ in range(7):  # hold the build until the seven other threads are waiting for it
            assert waiting.acquire(timeout=WAIT)
        return inner(graph)

    key = key_of("shared")
    users = ["alice"] + [f"user{i}" for i in range(1, 8)]
    outcomes = run_threads(
        8,
        lambda i: cache.get_or_build(key, slow_build, owner=users[i], allowed_users=[EVERYONE]),
    )
    assert len(inner.calls) == 1
    graphs = {o.graph for o in outcomes}  # type: ignore[attr-defined]
    assert graphs == {vkg_graph_iri(key)}
    assert sorted(o.hit for o in outcomes) == [False] + [True] * 7  # type: ignore[attr-defined]


def test_builds_of_different_keys_run_in_parallel_up_to_the_limit(
    store: OxigraphStore, clock: Clock
) -> None:
    cache = VKGCache(store, capacity=8, clock=clock, max_builds=2)
    inner = Builder(store)
    pair = threading.Barrier(2, timeout=WAIT)  # passes only when two builds run at once
    lock = threading.Lock()
    inside, peak = 0, 0

    def build(graph: str) -> int:
        nonlocal inside, peak
        with lock:
            inside += 1
            peak = max(peak, inside)
        pair.wait()
        with lock:
            inside -= 1
        return inner(graph)

    outcomes = run_threads(6, lambda i: cache.get_or_build(key_of(f"k{i}"), build, owner="a"))
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    assert len(inner.calls) == 6 and peak == 2


def test_a_failed_build_leaves_nothing_and_fails_every_waiter(
    cache: VKGCache, store: OxigraphStore, waiting: threading.Semaphore
) -> None:
    inner = Builder(store)
    calls = []

    def failing_build(graph: str) -> int:
        calls.append(graph)
        inner(graph)  # half-built graph left in the store
        for _ in range(7):
            assert waiting.acquire(timeout=WAIT)
        raise RuntimeError("lake unreachable")

    key = key_of("doomed")
    outcomes = run_threads(8, lambda i: cache.get_or_build(key, failing_build, owner="alice"))
    assert len(calls) == 1
    assert all(isinstance(o, RuntimeError) and str(o) == "lake unreachable" for o in outcomes)
    assert cache.entry(key) is None
    assert not store.graph_exists(vkg_graph_iri(key))
    # The failure is not cached: the next request builds again.
    assert cache.get_or_build(key, inner, owner="alice").hit is False


def test_two_caches_sharing_a_store_and_lock_dir_build_once(
    store: OxigraphStore, tmp_path: Path, waiting: threading.Semaphore
) -> None:
    # Two cache objects stand in for two processes: no shared flights, only the file lock.
    caches = [VKGCache(store, 4, lock_dir=tmp_path / "locks") for _ in range(2)]
    inner = Builder(store)
    entered = threading.Event()
    release = threading.Event()

    def slow_build(graph: str) -> int:
        entered.set()
        assert release.wait(timeout=WAIT)
        return inner(graph)

    key = key_of("host-wide")

    def ask(i: int) -> object:
        if i == 1:
            assert entered.wait(timeout=WAIT)  # the other cache holds the file lock by now
            release.set()
        return caches[i].get_or_build(key, slow_build, owner="alice")

    outcomes = run_threads(2, ask)
    assert len(inner.calls) == 1
    assert sorted(o.hit for o in outcomes) == [False, True]  # type: ignore[attr-defined]


# -- persistence --------------------------------------------------------------------------------


def test_metadata_survives_a_reopen_of_the_on_disk_store(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "graph"
    store = OxigraphStore(path)
    first = VKGCache(store, 4, clock=clock).get_or_build(
        key_of("a"), Builder(store), owner="alice", allowed_users=["bob"]
    )
    store.close()

    store = OxigraphStore(path)
    try:
        cache = VKGCache(store, 4, clock=clock)
        [entry] = cache.entries()
        assert (entry.key, entry.owner, entry.allowed_users) == (first.key, "alice", {"bob"})
        assert (entry.created, entry.triples, entry.bytes) == (first.created, 5, first.bytes)
        build = Builder(store)
        assert cache.get_or_build(first.key, build, owner="bob").hit and build.calls == []
        with pytest.raises(AccessDeniedError):
            cache.get_or_build(first.key, build, owner="eve")
    finally:
        store.close()


class SlowDropStore(OxigraphStore):
    """Holds the cache's background drops (threads ``vkg-drop-*``) until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def drop_graph(self, graph: str) -> None:
        if threading.current_thread().name.startswith("vkg-drop-"):
            assert self.release.wait(timeout=WAIT)
        super().drop_graph(graph)


def test_background_drops_keep_requests_fast_and_rebuilds_whole(clock: Clock) -> None:
    a, b, c = (key_of(n) for n in "abc")
    store = SlowDropStore()
    cache = VKGCache(store, capacity=2, clock=clock, background_drops=True)
    build = Builder(store)
    cache.get_or_build(a, build, owner="alice")
    cache.get_or_build(b, build, owner="alice")
    # c evicts a; the request returns while a's graph is still being dropped.
    assert cache.get_or_build(c, build, owner="alice").hit is False
    assert cache.entry(a) is None and store.graph_exists(vkg_graph_iri(a))
    # Rebuilding a must wait for that drop, else the drop would eat the new triples.
    rebuilt: list[object] = []
    worker = threading.Thread(
        target=lambda: rebuilt.append(cache.get_or_build(a, build, owner="alice"))
    )
    worker.start()
    worker.join(timeout=0.5)  # a rebuild that does not wait would be done by now
    store.release.set()
    worker.join(timeout=WAIT)
    cache.wait_for_drops()
    assert [getattr(r, "hit", None) for r in rebuilt] == [False]
    assert store.count_triples(vkg_graph_iri(a)) == 5
    assert {e.key for e in cache.entries()} == {a, c}
    store.close()
