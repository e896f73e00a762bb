"""The embedded named-graph store: loading, datasets per graph, typed values, errors, reopen."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from oda_analyst.config import load_settings
from oda_analyst.errors import StoreError
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.ntload import ChunkReader
from oda_analyst.vkg.protocol import GraphStore, QueryResult
from oda_analyst.vkg.store import OxigraphStore
from oda_analyst.vkg.values import check_iri, literal_value, sparql_string

XSD = "http://www.w3.org/2001/XMLSchema#"
G1 = "http://ex.test/g1"
G2 = "http://ex.test/g2"

TYPED = (
    f'<http://ex.test/a> <http://ex.test/when> "2022-06-01T20:00:07.250Z"^^<{XSD}dateTime> .\n'
    f'<http://ex.test/a> <http://ex.test/power> "652.5"^^<{XSD}double> .\n'
    f'<http://ex.test/a> <http://ex.test/count> "42"^^<{XSD}integer> .\n'
    f'<http://ex.test/a> <http://ex.test/name> "node \\"900\\""^^<{XSD}string> .\n'
    f'<http://ex.test/a> <http://ex.test/ratio> "0.10"^^<{XSD}decimal> .\n'
    f'<http://ex.test/a> <http://ex.test/up> "true"^^<{XSD}boolean> .\n'
    f"<http://ex.test/a> <http://ex.test/rack> <http://ex.test/rack/45> .\n"
).encode()


def triples(n: int, prefix: str = "s") -> bytes:
    return "".join(
        f'<http://ex.test/{prefix}/{i}> <http://ex.test/v> "{i}"^^<{XSD}integer> .\n'
        for i in range(n)
    ).encode()


@pytest.fixture(params=["memory", "disk"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OxigraphStore]:
    s = OxigraphStore(None if request.param == "memory" else tmp_path / "graph")
    yield s
    s.close()


def values(store: GraphStore, graph: str) -> dict[str, object]:
    result = store.query("SELECT ?p ?o WHERE { <http://ex.test/a> ?p ?o }", default_graph=graph)
    return {str(p).rsplit("/", 1)[-1]: o for p, o in result.rows}


def test_the_embedded_store_satisfies_the_protocol(store: OxigraphStore) -> None:
    assert isinstance(store, GraphStore)


def test_load_returns_the_triples_added_and_counts_per_graph(store: OxigraphStore) -> None:
    assert store.load_ntriples(G1, triples(5)) == 5
    assert store.load_ntriples(G2, triples(3, "t")) == 3
    # Loading overlapping data adds only what is new (RDF graphs are sets).
    assert store.load_ntriples(G1, triples(7)) == 2
    assert store.count_triples(G1) == 7
    assert store.count_triples(G2) == 3
    assert store.graphs() == [G1, G2]


def test_load_accepts_chunks_split_anywhere(store: OxigraphStore) -> None:
    data = triples(50)
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert store.load_ntriples(G1, iter(chunks)) == 50
    assert store.count_triples(G1) == 50


def test_chunk_reader_reads_every_byte_in_order() -> None:
    reader = ChunkReader([b"ab", b"", b"cde", b"f"])
    assert reader.read() == b"abcdef"
    assert reader.total == 6


def test_a_query_with_default_graph_sees_only_that_graph(store: OxigraphStore) -> None:
    store.load_ntriples(G1, triples(4))
    store.load_ntriples(G2, triples(9, "t"))
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert store.query(count, default_graph=G1).scalar() == 4
    assert store.query(count, default_graph=G2).scalar() == 9
    # Neither FROM nor GRAPH reaches past the request's graph.
    from_other = f"SELECT (COUNT(*) AS ?n) FROM <{G2}> WHERE {{ ?s ?p ?o }}"
    assert store.query(from_other, default_graph=G1).scalar() == 4
    any_graph = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
    assert store.query(any_graph, default_graph=G1).rows == [(G1,)]
    # Without it the store's (empty) default graph is queried.
    assert store.query(count).scalar() == 0


def test_literals_convert_by_datatype(store: OxigraphStore) -> None:
    store.load_ntriples(G1, TYPED)
    got = values(store, G1)
    assert got["when"] == datetime(2022, 6, 1, 20, 0, 7, 250000, tzinfo=UTC)
    assert isinstance(got["when"], datetime) and got["when"].utcoffset() is not None
    assert got["power"] == 652.5 and isinstance(got["power"], float)
    assert got["count"] == 42 and type(got["count"]) is int
    assert got["name"] == 'node "900"'
    assert got["ratio"] == Decimal("0.10")
    assert got["up"] is True
    assert got["rack"] == "http://ex.test/rack/45"


def test_unbound_values_are_none_and_columns_keep_projection_order(store: OxigraphStore) -> None:
    store.load_ntriples(G1, TYPED)
    text = (
        "SELECT ?missing ?o WHERE { <http://ex.test/a> <http://ex.test/count> ?o "
        "OPTIONAL { ?o <http://ex.test/none> ?missing } }"
    )
    result = store.query(text, default_graph=G1)
    assert result.columns == ("missing", "o")
    assert result.rows == [(None, 42)]
    assert result.dicts() == [{"missing": None, "o": 42}]


def test_ask_returns_a_boolean(store: OxigraphStore) -> None:
    store.load_ntriples(G1, TYPED)
    yes = store.query("ASK { ?s <http://ex.test/count> 42 }", default_graph=G1)
    no = store.query("ASK { ?s <http://ex.test/count> 43 }", default_graph=G1)
    assert (yes.boolean, no.boolean) == (True, False)
    assert yes.rows == []


@pytest.mark.parametrize(
    ("lexical", "datatype", "expected"),
    [
        ("2022-06-01T22:00:00+02:00", "dateTime", datetime(2022, 6, 1, 20, tzinfo=UTC)),
        ("2022-06-01T20:00:00", "dateTime", datetime(2022, 6, 1, 20, tzinfo=UTC)),
        ("2022-06-01T20:00:00.123456789Z", "dateTime", datetime(2022, 6, 1, 20, 0, 0, 123456, UTC)),
        ("2022-06-01", "date", date(2022, 6, 1)),
        ("INF", "double", float("inf")),
        ("1e3", "float", 1000.0),
        ("-7", "long", -7),
        ("0", "boolean", False),
        ("not a number", "integer", "not a number"),
        ("x", "gYear", "x"),
    ],
)
def test_literal_value(lexical: str, datatype: str, expected: object) -> None:
    assert literal_value(lexical, XSD + datatype) == expected


def test_a_sparql_syntax_error_names_line_and_column(store: OxigraphStore) -> None:
    with pytest.raises(StoreError) as info:
        store.query("SELECT ?s\nWHERE { ?s ?p }", default_graph=G1)
    assert "error at 2:" in info.value.message
    assert "line 2 is: 'WHERE { ?s ?p }'" in info.value.message
    assert info.value.hint


def test_an_ntriples_error_names_the_line_and_leaves_no_half_graph(store: OxigraphStore) -> None:
    bad = triples(3) + b"<http://ex.test/x> <http://ex.test/p> .\n"
    with pytest.raises(StoreError) as info:
        store.load_ntriples(G1, bad)
    assert "line 4" in info.value.message
    assert not store.graph_exists(G1)


def test_drop_exists_and_count(store: OxigraphStore) -> None:
    assert not store.graph_exists(G1)
    assert store.count_triples(G1) == 0
    store.load_ntriples(G1, triples(3))
    assert store.graph_exists(G1)
    store.drop_graph(G1)
    assert not store.graph_exists(G1)
    assert store.count_triples(G1) == 0
    store.drop_graph(G1)  # dropping a missing graph is not an error


def test_graph_bytes_is_exact_for_small_graphs_and_scales_for_big_ones(
    store: OxigraphStore,
) -> None:
    small = triples(10)
    store.load_ntriples(G1, small)
    assert store.graph_bytes(G1) == len(small)
    big = triples(3000, "b")
    store.load_ntriples(G2, big)
    estimate = store.graph_bytes(G2)
    assert 0.8 * len(big) < estimate < 1.2 * len(big)
    assert store.graph_bytes("http://ex.test/empty") == 0


def test_update_writes_and_bad_graph_names_are_refused(store: OxigraphStore) -> None:
    store.update(f'INSERT DATA {{ GRAPH <{G1}> {{ <http://ex.test/a> <http://ex.test/p> "x" }} }}')
    assert store.count_triples(G1) == 1
    for bad in ("no-scheme", "http://ex.test/a> } DROP ALL {", "http://ex.test/a b"):
        with pytest.raises(StoreError):
            store.count_triples(bad)


def test_check_iri_and_sparql_string_escape_what_could_break_out() -> None:
    assert check_iri(G1) == G1
    assert sparql_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_a_closed_store_says_so() -> None:
    store = OxigraphStore()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.graphs()


def test_the_on_disk_store_keeps_graphs_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "graph"
    first = OxigraphStore(path)
    first.load_ntriples(G1, TYPED)
    first.close()
    second = OxigraphStore(path)
    try:
        assert second.count_triples(G1) == 7
        assert values(second, G1)["count"] == 42
    finally:
        second.close()


def test_open_store_shares_one_instance_per_folder(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    store = open_store(settings)
    try:
        assert open_store(settings) is store
        assert isinstance(store, OxigraphStore) and store.path == (tmp_path / "graph").resolve()
        # A second read-write open in this process is refused with a hint, not an OSError.
        with pytest.raises(StoreError, match="locked"):
            OxigraphStore(tmp_path / "graph")
    finally:
        store.close()
    reopened = open_store(settings)
    assert reopened is not store
    reopened.close()


def test_a_folder_locked_by_another_process_gives_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "graph"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pyoxigraph\n"
            f"s = pyoxigraph.Store({str(path)!r})\n"
            "print('open', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreError) as info:
            OxigraphStore(path)
        assert "locked by another process" in info.value.message
        assert info.value.hint is not None and "ODA_SPARQL_ENDPOINT" in info.value.hint
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_query_result_scalar_refuses_non_scalar_results() -> None:
    with pytest.raises(StoreError):
        QueryResult(columns=("a", "b"), rows=[(1, 2)]).scalar()
