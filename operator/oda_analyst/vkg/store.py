"""The named-graph store: one interface, an embedded pyoxigraph store and (``http_store``) any
SPARQL 1.1 endpoint.

Every per-query VKG is a named graph; the builder bulk-loads N-Triples into it, the executor runs
each request's query with that graph as the query's default graph, and the cache keeps its
bookkeeping in a metadata graph through ``update``.

The embedded store keeps its data on disk (RocksDB) under ``<data_dir>/graph``. RocksDB holds an
exclusive lock on that folder, so **one process at a time** may open it read-write (a second
``Store(path)`` fails, even in the same process). ``open_store`` therefore hands out one shared
instance per folder within a process; a process that finds the folder locked by another waits
for it up to ``ODA_STORE_LOCK_WAIT_S`` (a line on stderr says so), then fails with a StoreError
that says what to do. Several processes (e.g. retriever replicas) must share a SPARQL server
instead: ``ODA_SPARQL_ENDPOINT``.

Values come back as Python values converted by datatype (``term_value``): IRIs as ``str``,
``xsd:integer`` family as ``int``, ``xsd:decimal`` as ``Decimal``, ``xsd:double``/``float`` as
``float``, ``xsd:boolean`` as ``bool``, ``xsd:dateTime`` as an aware UTC ``datetime`` (a literal
without zone is read as UTC), ``xsd:date`` as ``date``, unbound as ``None``, anything else as its
lexical form.
"""

from __future__ import annotations

import io
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyoxigraph as ox

from oda_analyst.errors import StoreError
from oda_analyst.vkg.ntload import ChunkReader, is_trusted, load_segments
from oda_analyst.vkg.protocol import QueryResult, Row
from oda_analyst.vkg.tsv import NotTabularError, tsv_frame, tsv_rows
from oda_analyst.vkg.values import (
    BYTES_SAMPLE,
    check_iri,
    count_query,
    estimate_bytes,
    term_value,
)

if TYPE_CHECKING:
    pass

_SPARQL_POSITION = re.compile(r"error at (\d+):(\d+)")
_MESSAGE_LIMIT = 160


def result_from_pyoxigraph(
    result: Any, deadline: float | None = None, on_timeout: Callable[[], StoreError] | None = None
) -> QueryResult:
    """Convert pyoxigraph query results (also those parsed from an HTTP answer)."""
    if isinstance(result, ox.QueryBoolean):
        return QueryResult(boolean=bool(result))
    if isinstance(result, ox.QuerySolutions):
        columns = tuple(v.value for v in result.variables)
        width = range(len(columns))
        rows: list[Row] = []
        for solution in result:
            if deadline is not None and time.monotonic() > deadline and on_timeout:
                raise on_timeout()
            rows.append(tuple(term_value(solution[i]) for i in width))
        return QueryResult(columns=columns, rows=rows)
    triples = [
        (term_value(t.subject), term_value(t.predicate), term_value(t.object)) for t in result
    ]
    return QueryResult(columns=("subject", "predicate", "object"), rows=triples)


def fast_result(
    result: Any,
    deadline: float | None,
    on_timeout: Callable[[], StoreError],
    rerun: Callable[[], Any],
) -> QueryResult:
    """Like ``result_from_pyoxigraph`` with the same values, but SELECT results go through TSV
    written in Rust and converted a column at a time (``vkg.tsv``): several times faster for big
    results. The deadline is checked once the engine has written every row. Results this path
    does not read (RDF-star terms) are read again term by term from ``rerun()``."""
    if not isinstance(result, ox.QuerySolutions):
        return result_from_pyoxigraph(result, deadline, on_timeout)
    data = result.serialize(format=ox.QueryResultsFormat.TSV) or b""
    if deadline is not None and time.monotonic() > deadline:
        raise on_timeout()
    try:
        columns, rows = tsv_rows(data)
    except NotTabularError:
        return result_from_pyoxigraph(rerun(), deadline, on_timeout)
    return QueryResult(columns=columns, rows=rows)


def dataset(default_graph: str | None) -> dict[str, Any]:
    """pyoxigraph query options that make ``default_graph`` the whole dataset (overriding FROM
    clauses); none for None."""
    if default_graph is None:
        return {}
    node = ox.NamedNode(check_iri(default_graph))
    return {"default_graph": node, "named_graphs": [node]}


def run_query(
    db: ox.Store, sparql: str, options: dict[str, Any], timeout_s: float | None
) -> QueryResult:
    """Run a query on a pyoxigraph store; StoreError with line and column on bad text."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        raw = db.query(sparql, **options)
        return fast_result(
            raw, deadline, lambda: _timeout(timeout_s), lambda: db.query(sparql, **options)
        )
    except SyntaxError as exc:
        raise syntax_error("SPARQL", exc, sparql) from None
    except OSError as exc:
        raise StoreError(f"query failed: {exc}", hint="check the store folder") from None


def run_frame(db: ox.Store, sparql: str, options: dict[str, Any]) -> pl.DataFrame:
    """A SELECT on a pyoxigraph store as a typed Polars frame."""
    try:
        raw = db.query(sparql, **options)
        if not isinstance(raw, ox.QuerySolutions):
            raise StoreError(
                "query_frame takes a SELECT query", hint="use query() for ASK and CONSTRUCT"
            )
        try:
            return tsv_frame(raw.serialize(format=ox.QueryResultsFormat.TSV) or b"")
        except NotTabularError:
            result = result_from_pyoxigraph(db.query(sparql, **options))
            return pl.DataFrame(
                [pl.Series(c, list(v), dtype=pl.Object) for c, v in
                 zip(result.columns, zip(*result.rows, strict=True) if result.rows
                     else [()] * len(result.columns), strict=True)]
            )  # fmt: skip
    except SyntaxError as exc:
        raise syntax_error("SPARQL", exc, sparql) from None
    except OSError as exc:
        raise StoreError(f"query failed: {exc}", hint="check the store folder") from None


def sampled_bytes(quads: Iterable[ox.Quad], total: Callable[[], int]) -> int:
    """N-Triples size of a graph estimated from its first ``BYTES_SAMPLE`` quads; ``total``
    (its triple count) is asked only when the graph is bigger than the sample."""
    sample = []
    for quad in quads:
        sample.append(quad.triple)
        if len(sample) >= BYTES_SAMPLE:
            break
    if not sample:
        return 0
    size = len(ox.serialize(sample, format=ox.RdfFormat.N_TRIPLES) or b"")
    count = total() if len(sample) >= BYTES_SAMPLE else len(sample)
    return estimate_bytes(size, len(sample), count)


def _buffered(chunks: Iterable[bytes]) -> io.BufferedReader:
    return io.BufferedReader(ChunkReader(chunks), 1 << 20)


def syntax_error(kind: str, exc: SyntaxError, text: str | None = None) -> StoreError:
    """A StoreError that keeps pyoxigraph's (or the server's) line and column."""
    message = str(exc.args[0]) if exc.args else str(exc)
    where = ""
    match = _SPARQL_POSITION.search(message)
    if match and text is not None:
        line_no = int(match.group(1))
        lines = text.splitlines()
        if 0 < line_no <= len(lines):
            where = f"; line {line_no} is: {lines[line_no - 1].strip()[:120]!r}"
    first = message.splitlines()[0] if message else "?"
    if len(first) > _MESSAGE_LIMIT:  # pyoxigraph lists every token it expected
        first = first[:_MESSAGE_LIMIT] + "…"
    return StoreError(
        f"{kind} syntax error: {first}{where}",
        hint="fix the text at the line:column given (lines count from 1)",
    )


# -- the embedded store -------------------------------------------------------------------------


def _lock_error(path: Path, exc: OSError, waited_s: float = 0.0) -> StoreError:
    if "current process" in str(exc):
        hint = "open the store once per process: use oda_analyst.vkg.factory.open_store(settings)"
    else:
        hint = (
            "the embedded store is single-process: stop the other oda-analyst process using it, "
            "point ODA_DATA_DIR elsewhere, or run a SPARQL server (e.g. `oxigraph serve`) and "
            "set ODA_SPARQL_ENDPOINT so that several processes share it"
        )
    after = f" (waited {waited_s:g} s)" if waited_s > 0 else ""
    return StoreError(
        f"the graph store folder {path} is locked by another process{after}", hint=hint
    )


def _stderr_line(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


_LOCK_POLL_S = 0.25
_LOCK_NOTICE_EVERY_S = 10.0


def _open_waiting(path: Path, wait_s: float, notice: Callable[[str], None]) -> ox.Store:
    """``ox.Store(path)``, waiting up to ``wait_s`` while another process holds its lock."""
    start = time.monotonic()
    told = -_LOCK_NOTICE_EVERY_S
    while True:
        try:
            return ox.Store(str(path))
        except OSError as exc:
            waited = time.monotonic() - start
            if "LOCK" not in str(exc) or "current process" in str(exc) or waited >= wait_s:
                raise
            if waited - told >= _LOCK_NOTICE_EVERY_S:
                told = waited
                notice(
                    f"the graph store {path} is in use by another process; waiting for it "
                    f"({waited:.0f} of at most {wait_s:g} s, ODA_STORE_LOCK_WAIT_S)"
                )
            time.sleep(min(_LOCK_POLL_S, max(0.0, wait_s - waited)))


class OxigraphStore:
    """The embedded pyoxigraph store: on disk at ``path``, in memory when ``path`` is None.

    When another process holds the folder, wait up to ``lock_wait_s`` for it (``notice`` is told
    when the wait starts and every 10 s), then fail with a StoreError."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        lock_wait_s: float = 0.0,
        notice: Callable[[str], None] = _stderr_line,
    ) -> None:
        self.path = path
        try:
            if path is None:
                self._store: ox.Store | None = ox.Store()
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._store = _open_waiting(path, lock_wait_s, notice)
        except OSError as exc:
            if path is not None and "LOCK" in str(exc):
                raise _lock_error(path, exc, lock_wait_s) from None
            raise StoreError(
                f"cannot open the graph store at {path}: {exc}",
                hint="check that the folder is writable and holds an Oxigraph store (or is empty)",
            ) from None

    @property
    def _db(self) -> ox.Store:
        if self._store is None:
            raise StoreError("the graph store is closed", hint="open it again with open_store()")
        return self._store

    def load_ntriples(self, graph: str, data: bytes | Iterable[bytes]) -> int:
        node = ox.NamedNode(check_iri(graph))
        before = self.count_triples(graph) if self.graph_exists(graph) else 0
        lenient = is_trusted(data)
        try:
            if self.path is None:
                # In memory, Store.load is the fastest path (bulk_load is for RocksDB).
                load_segments(self._db, data, to_graph=node, lenient=lenient)
            else:
                source = data if isinstance(data, bytes) else _buffered(data)
                self._db.bulk_load(source, ox.RdfFormat.N_TRIPLES, to_graph=node, lenient=lenient)
        except SyntaxError as exc:
            if before == 0:  # bulk_load and segments are not one transaction: leave no half graph
                self._db.remove_graph(node)
            raise syntax_error("N-Triples", exc) from None
        except OSError as exc:
            raise StoreError(
                f"loading into <{graph}> failed: {exc}",
                hint="check free disk space under the store folder",
            ) from None
        return self.count_triples(graph) - before

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        # pyoxigraph cannot interrupt a running query: the deadline is checked once the engine
        # has written the rows, so a slow query fails with a timeout but only after it ends.
        return run_query(self._db, sparql, dataset(default_graph), timeout_s)

    def query_frame(self, sparql: str, *, default_graph: str | None = None) -> pl.DataFrame:
        """A SELECT result as a typed Polars frame (``vkg.tsv.tsv_frame``), for callers that
        work on columns. Not part of GraphStore: the HTTP store does not offer it."""
        return run_frame(self._db, sparql, dataset(default_graph))

    def update(self, sparql_update: str) -> None:
        try:
            self._db.update(sparql_update)
        except SyntaxError as exc:
            raise syntax_error("SPARQL update", exc, sparql_update) from None
        except OSError as exc:
            raise StoreError(f"update failed: {exc}", hint="check the store folder") from None

    def graph_exists(self, graph: str) -> bool:
        node = ox.NamedNode(check_iri(graph))
        return next(iter(self._db.quads_for_pattern(None, None, None, node)), None) is not None

    def drop_graph(self, graph: str) -> None:
        self._db.remove_graph(ox.NamedNode(check_iri(graph)))

    def count_triples(self, graph: str) -> int:
        return int(self.query(count_query(graph)).scalar())

    def graph_bytes(self, graph: str) -> int:
        node = ox.NamedNode(check_iri(graph))
        quads = self._db.quads_for_pattern(None, None, None, node)
        return sampled_bytes(quads, lambda: self.count_triples(graph))

    def graphs(self) -> list[str]:
        return sorted(g.value for g in self._db.named_graphs() if isinstance(g, ox.NamedNode))

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None and self.path is not None:
            store.flush()
        with OPEN_LOCK:
            if self.path is not None and OPEN_STORES.get(self.path.resolve()) is self:
                del OPEN_STORES[self.path.resolve()]
        # RocksDB releases its folder lock when the last reference goes.
        del store


def _timeout(timeout_s: float | None) -> StoreError:
    return StoreError(
        f"the query ran longer than {timeout_s} s",
        hint="narrow the time window or the entities, or raise the timeout",
    )


# One embedded store per folder in a process (RocksDB locks it): ``factory.open_store`` hands
# them out, ``OxigraphStore.close`` takes its own entry away.
OPEN_STORES: dict[Path, OxigraphStore] = {}
OPEN_LOCK = threading.Lock()
