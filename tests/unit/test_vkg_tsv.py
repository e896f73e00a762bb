"""SELECT results through TSV (vkg.tsv): the same values as converting term by term."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from decimal import Decimal

import polars as pl
import pyoxigraph as ox
import pytest

from oda_analyst.vkg.protocol import QueryResult
from oda_analyst.vkg.store import OxigraphStore, result_from_pyoxigraph
from oda_analyst.vkg.tsv import NotTabularError, cell_value, tsv_rows, unescape

XSD = "http://www.w3.org/2001/XMLSchema#"
G = "http://ex.test/g"

# One object per subject, so a column can be all of one kind (the vectorised rules) or mixed.
VALUES = [
    '"2022-06-01T20:00:07.250Z"^^<{x}dateTime>',
    '"2022-06-01T22:00:00+02:00"^^<{x}dateTime>',
    '"2022-06-01T20:00:00"^^<{x}dateTime>',
    '"2022-06-01T20:00:00.123456789Z"^^<{x}dateTime>',
    '"652.5"^^<{x}double>',
    '"INF"^^<{x}double>',
    '"-INF"^^<{x}double>',
    '"1e3"^^<{x}float>',
    '"42"^^<{x}integer>',
    '"-7"^^<{x}long>',
    '"123456789012345678901234567890"^^<{x}integer>',
    '"0.10"^^<{x}decimal>',
    '"true"^^<{x}boolean>',
    '"0"^^<{x}boolean>',
    '"2022-06-01"^^<{x}date>',
    '"x"^^<{x}gYear>',
    '"node \\"900\\"\\ttab\\nline\\\\back"',
    '"caf\\u00E9"',
    '"hello"@en',
    '""',
    "<http://ex.test/rack/45>",
    "_:b1",
]


def _store() -> OxigraphStore:
    store = OxigraphStore()
    lines = "".join(
        f"<http://ex.test/s/{i}> <http://ex.test/p> {v.format(x=XSD)} .\n"
        for i, v in enumerate(VALUES)
    )
    store.load_ntriples(G, lines.encode())
    return store


def _both(store: OxigraphStore, sparql: str) -> tuple[QueryResult, QueryResult]:
    node = ox.NamedNode(G)
    raw = store._db.query(sparql, default_graph=node, named_graphs=[node])
    slow = result_from_pyoxigraph(raw)
    return store.query(sparql, default_graph=G), slow


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def test_every_kind_of_value_converts_as_term_by_term() -> None:
    store = _store()
    fast, slow = _both(store, "SELECT ?s ?o WHERE { ?s ?p ?o } ORDER BY ?s")
    assert fast.columns == slow.columns == ("s", "o")
    assert len(fast.rows) == len(slow.rows) == len(VALUES)
    for got, want in zip(fast.rows, slow.rows, strict=True):
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    by_subject = {s.rsplit("/", 1)[-1]: o for s, o in fast.rows}
    assert by_subject["0"] == datetime(2022, 6, 1, 20, 0, 7, 250000, tzinfo=UTC)
    assert by_subject["0"].tzinfo is UTC
    assert by_subject["11"] == Decimal("0.10")
    assert by_subject["14"] == date(2022, 6, 1)
    assert by_subject["16"] == 'node "900"\ttab\nline\\back'


@pytest.mark.parametrize("index", range(len(VALUES)))
def test_a_column_of_one_kind_converts_as_term_by_term(index: int) -> None:
    """Each value alone in its column: the vectorised rule for that kind, if any, applies."""
    store = _store()
    sparql = f"SELECT ?o WHERE {{ <http://ex.test/s/{index}> ?p ?o }}"
    fast, slow = _both(store, sparql)
    assert len(fast.rows) == 1
    assert _same(fast.rows[0][0], slow.rows[0][0])


def test_columns_of_many_rows_use_the_vectorised_rules() -> None:
    store = OxigraphStore()
    lines = "".join(
        f'<http://ex.test/r/{i}> <http://ex.test/t> "2022-06-01T08:00:{i % 60:02d}.5Z"'
        f"^^<{XSD}dateTime> .\n"
        f'<http://ex.test/r/{i}> <http://ex.test/v> "{i / 4}"^^<{XSD}double> .\n'
        f'<http://ex.test/r/{i}> <http://ex.test/n> "{i}"^^<{XSD}integer> .\n'
        f'<http://ex.test/r/{i}> <http://ex.test/l> "label {i}" .\n'
        for i in range(500)
    )
    store.load_ntriples(G, lines.encode())
    sparql = (
        "SELECT ?r ?t ?v ?n ?l WHERE { ?r <http://ex.test/t> ?t ; <http://ex.test/v> ?v ; "
        "<http://ex.test/n> ?n ; <http://ex.test/l> ?l } ORDER BY ?n"
    )
    fast, slow = _both(store, sparql)
    assert fast.rows == slow.rows
    assert [type(v) for v in fast.rows[3]] == [str, datetime, float, int, str]
    frame = store.query_frame(sparql, default_graph=G)
    assert list(frame.schema.items()) == [
        ("r", pl.String()),
        ("t", pl.Datetime("us", "UTC")),
        ("v", pl.Float64()),
        ("n", pl.Int64()),
        ("l", pl.String()),
    ]
    assert frame.rows() == [tuple(r) for r in fast.rows]


def test_unbound_values_and_single_unbound_columns_keep_their_rows() -> None:
    store = _store()
    sparql = (
        "SELECT ?missing WHERE { ?s ?p ?o OPTIONAL { ?o <http://ex.test/none> ?missing } } LIMIT 3"
    )
    fast, _ = _both(store, sparql)
    assert fast.rows == [(None,), (None,), (None,)]
    empty, _ = _both(store, "SELECT ?s WHERE { ?s <http://ex.test/none> ?o }")
    assert empty.columns == ("s",) and empty.rows == []


def test_aggregates_and_mixed_columns() -> None:
    store = _store()
    fast, slow = _both(store, "SELECT (COUNT(*) AS ?n) (SAMPLE(?o) AS ?x) WHERE { ?s ?p ?o }")
    assert fast.rows == slow.rows
    assert fast.rows[0][0] == len(VALUES)


def test_cells_and_escapes() -> None:
    assert unescape(r"a\tb\"c\\d\u00e9\U0001F600") == 'a\tb"c\\dé\U0001f600'
    assert cell_value("<http://x>") == "http://x"
    assert cell_value('"5"^^<http://www.w3.org/2001/XMLSchema#integer>') == 5
    assert cell_value('"x"@en') == "x"
    assert cell_value("-1.5") == Decimal("-1.5") and cell_value("1.0E3") == 1000.0
    assert cell_value("true") is True and cell_value("12") == 12 and cell_value("") is None
    with pytest.raises(NotTabularError):
        cell_value("<< <http://a> <http://b> <http://c> >>")
    with pytest.raises(NotTabularError):
        tsv_rows(b"\n")


@pytest.mark.parametrize("odd", ["", '"2022-06-01T10:00:00+02:00"'])
def test_repeated_instants_with_unbound_cells_convert_as_term_by_term(odd: str) -> None:
    """Few distinct instants among many rows (parsed once each), unbound cells among them, and
    optionally one instant in a form the vectorised rule does not take (then cell by cell)."""
    store = OxigraphStore()
    lines = "".join(
        f'<http://ex.test/r/{i}> <http://ex.test/n> "{i}"^^<{XSD}integer> .\n'
        + (
            f'<http://ex.test/r/{i}> <http://ex.test/t> "2022-06-01T08:00:{i % 7:02d}Z"'
            f"^^<{XSD}dateTime> .\n"
            if i % 5
            else ""
        )
        for i in range(300)
    )
    if odd:
        lines += f"<http://ex.test/r/0> <http://ex.test/t> {odd}^^<{XSD}dateTime> .\n"
    store.load_ntriples(G, lines.encode())
    sparql = (
        "SELECT ?n ?t WHERE { ?r <http://ex.test/n> ?n OPTIONAL { ?r <http://ex.test/t> ?t } }"
        " ORDER BY ?n"
    )
    fast, slow = _both(store, sparql)
    assert len(fast.rows) == 300
    for got, want in zip(fast.rows, slow.rows, strict=True):
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    assert fast.rows[5][1] is None
    assert fast.rows[1][1] == datetime(2022, 6, 1, 8, 0, 1, tzinfo=UTC)
