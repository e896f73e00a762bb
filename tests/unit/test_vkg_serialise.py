"""The builder's fast paths write the same triples as the general ones: dateTime literals looked
up per distinct instant, NaN/infinity spelling only where a value needs it, and graphs loaded in
one segment or many (a producer thread then prepares the next while one loads)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyoxigraph as ox
import pytest

from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology import namespaces as ns
from oda_analyst.vkg.builder import _pipelined, build_vkg, serialise_vkg
from oda_analyst.vkg.naive import build_vkg_naive
from oda_analyst.vkg.ntload import load_segments
from oda_analyst.vkg.ntriples import datetime_lits_ms, e_datetime_lit_ms, has_special_floats
from oda_analyst.vkg.request import GroundedRequest
from oda_analyst.vkg.store import OxigraphStore

START = datetime(2022, 6, 1, 0, 0, tzinfo=UTC)
END = datetime(2022, 6, 1, 1, 0, tzinfo=UTC)
GRAPH = ns.INSTANCE_NS + "graph/vkg/serialise-test"


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-ambient")
    generate(build_spec("tiny", metrics="ambient,total_power"), out)
    return out


def _lines(store: OxigraphStore) -> set[bytes]:
    dump = store._db.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.NamedNode(GRAPH))
    return set((dump or b"").splitlines())


@pytest.mark.parametrize(
    "epoch_ms",
    [
        [1654041607000, 1654041607000, 1654041627000, 1654041607000, 1654041627000] * 3,
        [1654041607001, 1654041627999, -1000, 0, 1654041647123],  # all distinct: row by row
    ],
)
def test_datetime_literals_equal_row_by_row_formatting(epoch_ms: list[int]) -> None:
    column = pl.Series("ms", epoch_ms, dtype=pl.Int64)
    expected = pl.DataFrame({"ms": column}).select(e_datetime_lit_ms(pl.col("ms"))).to_series()
    assert datetime_lits_ms(column).to_list() == expected.to_list()


def test_nan_and_infinities_are_spelled_as_xsd_and_equal_the_naive_graph(
    lake_dir: Path, tmp_path: Path
) -> None:
    # A lake whose ambient readings hold NaN and both infinities: the builder notices them in
    # the column and spells them NaN/INF/-INF, as the row-by-row builder does.
    copy = tmp_path / "lake"
    for src in lake_dir.rglob("*"):
        dst = copy / src.relative_to(lake_dir)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    part = next(copy.glob("year_month=22-06/plugin=ipmi_pub/metric=ambient/*.parquet"))
    frame = pl.read_parquet(part)
    dtype = frame.schema["value"]
    specials = pl.Series([float("nan"), float("inf"), float("-inf")], dtype=dtype)
    values = frame["value"].scatter([0, 1, 2], specials)
    frame.with_columns(values.alias("value")).write_parquet(part)
    node = int(frame["node"][0])
    assert has_special_floats(values) and not has_special_floats(frame["value"])

    req = GroundedRequest(
        nodes=(node,),
        metrics=(("ipmi", "ambient"), ("ipmi", "total_power")),
        start=START,
        end=END,
    )
    # The document itself (an embedded store would also read Rust's "inf"; other stores not).
    document = b"".join(serialise_vkg(req, Lake(copy)).chunks).splitlines()
    spelled = {line.split(b'"')[1] for line in document if b"#value>" in line}
    assert {b"NaN", b"INF", b"-INF"} <= spelled and not {b"inf", b"-inf"} & spelled
    fast, slow = OxigraphStore(None), OxigraphStore(None)
    build_vkg(req, Lake(copy), fast, GRAPH)
    build_vkg_naive(req, Lake(copy), slow, GRAPH)
    lines = _lines(fast)
    assert lines == _lines(slow) and len(lines) > 100


def test_one_segment_and_many_segments_load_the_same_graph(lake_dir: Path) -> None:
    req = GroundedRequest(
        all_nodes=True, metrics=(("ipmi", "ambient"),), start=START, end=START.replace(minute=5)
    )
    whole, parts = OxigraphStore(None), OxigraphStore(None)
    build_vkg(req, Lake(lake_dir), whole, GRAPH)
    data = whole._db.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.NamedNode(GRAPH)) or b""
    lines = data.splitlines(keepends=True)
    chunks = [b"".join(lines[i : i + 7]) for i in range(0, len(lines), 7)]
    # ~100-byte segments, loaded one after the other.
    load_segments(parts._db, iter(chunks), to_graph=ox.NamedNode(GRAPH), lenient=True, segment=100)
    assert _lines(parts) == _lines(whole) and len(lines) > 1000


def test_a_later_segment_error_names_its_line_in_the_document() -> None:
    good = b"<http://a/s> <http://a/p> <http://a/o> .\n"
    chunks = [good * 5, good * 5, b"<http://a/s> <http://a/p> oops .\n", good]
    with pytest.raises(SyntaxError, match="line 11"):
        load_segments(ox.Store(), iter(chunks), to_graph=None, lenient=False, segment=64)


def _chunks(count: int, fail_at: int | None = None) -> Iterator[bytes]:
    for i in range(count):
        if i == fail_at:
            raise RuntimeError("the lake scan failed")
        yield f"chunk {i}\n".encode()


def test_pipelined_chunks_keep_their_order_and_raise_the_producers_error() -> None:
    small = list(_pipelined(_chunks(3), small=1 << 20))  # one segment: no thread
    assert small == [f"chunk {i}\n".encode() for i in range(3)]
    big = list(_pipelined(_chunks(50), small=16))  # past 16 bytes: a producer thread
    assert big == [f"chunk {i}\n".encode() for i in range(50)]
    with pytest.raises(RuntimeError, match="scan failed"):
        list(_pipelined(_chunks(50, fail_at=20), small=16))


def test_an_abandoned_pipeline_stops_its_producer() -> None:
    before = {t.ident for t in threading.enumerate()}
    stream = _pipelined(_chunks(10_000), small=16)
    assert next(stream) == b"chunk 0\n"
    stream.close()  # the consumer failed (e.g. the store refused a segment)
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not [t for t in left if t.name == "vkg-serialise"]
