"""The default embedded store: VKGs in memory with dumps on disk, everything else on disk."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from oda_analyst.config import load_settings
from oda_analyst.errors import StoreError
from oda_analyst.vkg.cache import CACHE_META_GRAPH, VKG_GRAPH_PREFIX, VKGCache, cache_key
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.ntload import TrustedNTriples
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.store import OxigraphStore
from oda_analyst.vkg.tiered import TieredStore, uses_graph_keyword

XSD = "http://www.w3.org/2001/XMLSchema#"
V1 = VKG_GRAPH_PREFIX + "0123456789abcdef"
V2 = VKG_GRAPH_PREFIX + "fedcba9876543210"
BASE = "https://w3id.org/oda-analyst/m100/graph/base"


def triples(n: int, prefix: str = "s") -> bytes:
    return "".join(
        f'<http://ex.test/{prefix}/{i}> <http://ex.test/v> "{i}"^^<{XSD}integer> .\n'
        for i in range(n)
    ).encode()


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[TieredStore]:
    s = TieredStore(tmp_path / "graph")
    yield s
    s.close()


def test_vkgs_go_to_memory_and_dumps_everything_else_to_disk(store: TieredStore) -> None:
    assert isinstance(store, GraphStore) and isinstance(store, OxigraphStore)
    assert store.load_ntriples(V1, TrustedNTriples([triples(5)])) == 5
    assert store.load_ntriples(BASE, triples(3, "b")) == 3
    assert store.resident_graphs() == [V1]
    # RocksDB holds the base graph only; the VKG is in memory and in its dump.
    assert [g.value for g in store._db.named_graphs()] == [BASE]
    store.wait_for_dumps()
    assert store.dump_path(V1).exists()
    assert sorted(p.name for p in store.dump_dir.iterdir()) == ["0123456789abcdef.nt.gz"]
    assert store.graphs() == sorted([BASE, V1])
    assert store.count_triples(V1) == 5 and store.count_triples(BASE) == 3


def test_load_counts_what_the_graph_gained_and_accepts_any_chunks(store: TieredStore) -> None:
    data = triples(50)
    assert store.load_ntriples(V1, iter([data[i : i + 7] for i in range(0, len(data), 7)])) == 50
    assert store.load_ntriples(V1, triples(60)) == 10  # RDF graphs are sets
    assert store.count_triples(V1) == 60
    store.wait_for_dumps()
    store.close()
    reopened = TieredStore(store.path or Path())
    try:
        assert reopened.count_triples(V1) == 60  # the dump after the second load
    finally:
        reopened.close()


def test_the_dataset_is_the_vkg_alone_also_with_from_and_graph(store: TieredStore) -> None:
    store.load_ntriples(V1, triples(4))
    store.load_ntriples(V2, triples(9, "t"))
    store.load_ntriples(BASE, triples(2, "b"))
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert store.query(count, default_graph=V1).scalar() == 4
    assert store.query(count, default_graph=V2).scalar() == 9
    from_other = f"SELECT (COUNT(*) AS ?n) FROM <{V2}> WHERE {{ ?s ?p ?o }}"
    assert store.query(from_other, default_graph=V1).scalar() == 4
    any_graph = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
    assert store.query(any_graph, default_graph=V1).rows == [(V1,)]
    named = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{V1}> {{ ?s ?p ?o }} }}"
    assert store.query(named, default_graph=V1).scalar() == 4
    other = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{V2}> {{ ?s ?p ?o }} }}"
    assert store.query(other, default_graph=V1).scalar() == 0
    assert store.query(count, default_graph=BASE).scalar() == 2
    assert store.query(count, default_graph=VKG_GRAPH_PREFIX + "00000000").scalar() == 0
    frame = store.query_frame("SELECT ?s ?o WHERE { ?s ?p ?o }", default_graph=V2)
    assert frame.height == 9 and sorted(frame["o"].to_list()) == list(range(9))


def test_the_recorded_size_is_what_the_graph_holds_after_a_failed_append(
    store: TieredStore,
) -> None:
    # Sizes are recorded at load time rather than counted on every call: a load that fails
    # part-way onto an existing graph must still leave the recorded size true.
    assert store.load_ntriples(V1, triples(50)) == 50
    bad = [triples(40_000, "y"), b"<http://ex.test/x> <http://ex.test/p> .\n"]
    with pytest.raises(StoreError):
        store.load_ntriples(V1, iter(bad))
    held = len(store.query("SELECT * WHERE { ?s ?p ?o }", default_graph=V1).rows)
    assert held > 50  # whole segments before the bad line stay (a load is not a transaction)
    assert store.count_triples(V1) == held
    assert store.graph_bytes(V1) > 0


def test_a_parse_error_names_the_line_and_leaves_nothing(store: TieredStore) -> None:
    bad = [triples(40_000), triples(3, "x") + b"<http://ex.test/x> <http://ex.test/p> .\n"]
    with pytest.raises(StoreError) as info:
        store.load_ntriples(V1, iter(bad))
    assert "line 40004" in info.value.message
    assert not store.graph_exists(V1)
    store.wait_for_dumps()
    assert not store.dump_path(V1).exists()


def test_drop_removes_memory_and_dump_and_is_idempotent(store: TieredStore) -> None:
    store.load_ntriples(V1, triples(3))
    store.wait_for_dumps()
    assert store.graph_exists(V1) and store.dump_path(V1).exists()
    store.drop_graph(V1)
    assert not store.graph_exists(V1) and not store.dump_path(V1).exists()
    assert store.count_triples(V1) == 0 and store.graphs() == []
    store.drop_graph(V1)


def test_a_drop_during_a_pending_dump_leaves_no_dump(store: TieredStore) -> None:
    store.load_ntriples(V1, triples(20_000))
    store.drop_graph(V1)
    store.wait_for_dumps()
    assert not store.dump_path(V1).exists() and not list(store.dump_dir.glob("*.tmp"))


def test_graph_bytes_exact_for_small_and_scaled_for_big(store: TieredStore) -> None:
    small = triples(10)
    store.load_ntriples(V1, small)
    assert store.graph_bytes(V1) == len(small)
    big = triples(3000, "b")
    store.load_ntriples(V2, big)
    assert 0.8 * len(big) < store.graph_bytes(V2) < 1.2 * len(big)


def test_the_memory_budget_unloads_least_recent_graphs_and_reloads_them(tmp_path: Path) -> None:
    store = TieredStore(tmp_path / "graph", memory_triples=15)
    try:
        store.load_ntriples(V1, triples(10))
        store.wait_for_dumps()
        store.load_ntriples(V2, triples(10, "t"))
        assert store.resident_graphs() == [V2]  # V1 was least recent and already persisted
        assert store.graph_exists(V1)
        assert store.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", default_graph=V1).rows
        store.wait_for_dumps()
        assert store.resident_graphs() == [V1]  # reloaded; V2 made room once persisted
        assert store.count_triples(V2) == 10
    finally:
        store.close()


def test_vkgs_survive_a_restart_through_their_dumps(tmp_path: Path) -> None:
    first = TieredStore(tmp_path / "graph")
    first.load_ntriples(V1, TrustedNTriples([triples(7)]))
    first.load_ntriples(BASE, triples(2, "b"))
    first.close()  # waits for the dump
    second = TieredStore(tmp_path / "graph")
    try:
        assert second.resident_graphs() == []
        assert second.graph_exists(V1) and second.graphs() == sorted([BASE, V1])
        assert second.query("SELECT ?o WHERE { ?s ?p ?o } ORDER BY ?o", default_graph=V1).rows[
            -1
        ] == (6,)
        assert second.resident_graphs() == [V1]
    finally:
        second.close()


def test_a_damaged_dump_reads_as_a_missing_graph(tmp_path: Path) -> None:
    first = TieredStore(tmp_path / "graph")
    first.load_ntriples(V1, triples(7))
    first.close()
    dump = tmp_path / "vkg" / "0123456789abcdef.nt.gz"
    dump.write_bytes(dump.read_bytes()[:20])
    (tmp_path / "vkg" / "fedcba9876543210.nt.gz.3.tmp").write_bytes(b"half")
    second = TieredStore(tmp_path / "graph")
    try:
        assert not list((tmp_path / "vkg").glob("*.tmp"))  # leftovers of a crash are removed
        assert not second.graph_exists(V1) and not dump.exists()
        assert second.count_triples(V1) == 0
    finally:
        second.close()


def test_the_cache_on_the_tiered_store_survives_a_restart(tmp_path: Path) -> None:
    clock = iter(datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=i) for i in range(100))
    store = TieredStore(tmp_path / "graph")
    cache = VKGCache(store, capacity=1, clock=lambda: next(clock))
    key1, key2 = cache_key({"nodes": ["a"]}), cache_key({"nodes": ["b"]})

    def build(graph: str) -> int:
        return store.load_ntriples(graph, TrustedNTriples([triples(5)]))

    entry = cache.get_or_build(key1, build, owner="alice")
    assert not entry.hit and entry.triples == 5 and entry.bytes == len(triples(5))
    store.close()
    store = TieredStore(tmp_path / "graph")
    cache = VKGCache(store, capacity=1, clock=lambda: next(clock))
    again = cache.get_or_build(key1, build, owner="alice")
    assert again.hit and store.count_triples(again.graph) == 5
    assert store.graph_exists(CACHE_META_GRAPH)
    cache.get_or_build(key2, build, owner="alice")  # evicts key1: memory and dump go
    assert not store.graph_exists(entry.graph) and not store.dump_path(entry.graph).exists()
    store.close()


def test_open_store_gives_the_tiered_store_with_the_budget(tmp_path: Path) -> None:
    store = open_store(load_settings(data_dir=tmp_path))
    try:
        assert isinstance(store, TieredStore)
        assert store.dump_dir == (tmp_path / "vkg").resolve()
        assert store.memory_triples > 0
    finally:
        store.close()
    with pytest.raises(StoreError):
        TieredStore(tmp_path / "graph2", memory_triples=0)


def test_the_graph_keyword_is_found_outside_strings_iris_and_comments() -> None:
    assert uses_graph_keyword("SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    assert uses_graph_keyword("select * { graph <http://x> { ?s ?p ?o } }")
    assert not uses_graph_keyword(
        'SELECT ?graph FROM <http://x/graph/vkg/1> WHERE { ?s ex:graph "GRAPH" } # GRAPH'
    )
