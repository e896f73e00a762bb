"""The named-graph store: one interface, an embedded pyoxigraph store and (``http_store``) any
SPARQL 1.1 endpoint.

Every per-query VKG is a named graph; the builder bulk-loads N-Triples into it, the executor runs
each request's query with that graph as the query's default graph, and the cache keeps its
bookkeeping in a metadata graph through ``update``.

The embedded store keeps its data on disk (RocksDB) under ``<data_dir>/graph``. RocksDB holds an
exclusive lock on that folder, so **one process at a time** may open it read-write (a second
``Store(path)`` fails, even in the same process). ``open_store`` therefore hands out one shared
instance per folder within a process and turns the lock failure into a StoreError that says what
to do. Several processes (e.g. retriever replicas) must share a SPARQL server instead:
``ODA_SPARQL_ENDPOINT``.

Values come back as Python values converted by datatype (``term_value``): IRIs as ``str``,
``xsd:integer`` family as ``int``, ``xsd:decimal`` as ``Decimal``, ``xsd:double``/``float`` as
``float``, ``xsd:boolean`` as ``bool``, ``xsd:dateTime`` as an aware UTC ``datetime`` (a literal
without zone is read as UTC), ``xsd:date`` as ``date``, unbound as ``None``, anything else as its
lexical form.
"""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pyoxigraph as ox

from oda_analyst.errors import StoreError
from oda_analyst.ontology.namespaces import RDF_NS, XSD_NS

if TYPE_CHECKING:
    from oda_analyst.config import Settings

Row = tuple[Any, ...]

# How many triples graph_bytes serialises to estimate a graph's N-Triples size.
BYTES_SAMPLE = 1000

_IRI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SPARQL_POSITION = re.compile(r"error at (\d+):(\d+)")
_MESSAGE_LIMIT = 160


@dataclass(frozen=True)
class QueryResult:
    """A SELECT result (``columns`` + ``rows``), an ASK result (``boolean``), or a
    CONSTRUCT/DESCRIBE result (columns ``subject``, ``predicate``, ``object``)."""

    columns: tuple[str, ...] = ()
    rows: list[Row] = field(default_factory=list)
    boolean: bool | None = None

    @property
    def is_boolean(self) -> bool:
        return self.boolean is not None

    def dicts(self) -> list[dict[str, Any]]:
        """Rows as ``{column: value}`` (unbound values are ``None``)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def scalar(self) -> Any:
        """The single value of a one-row, one-column result (e.g. a COUNT)."""
        if len(self.rows) != 1 or len(self.columns) != 1:
            raise StoreError(
                f"expected one value, got {len(self.rows)} rows x {len(self.columns)} columns",
                hint="use scalar() only for aggregate queries that project one variable",
            )
        return self.rows[0][0]


@runtime_checkable
class GraphStore(Protocol):
    """What the builder, the executor, the retriever and the cache need from a quad store."""

    def load_ntriples(self, graph: str, data: bytes | Iterable[bytes]) -> int:
        """Add N-Triples (bytes, or an iterable of byte chunks split anywhere) to ``graph``.
        Return the number of triples the graph gained. On a parse error nothing is left behind
        if the graph was empty before."""
        ...

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        """Run a query. With ``default_graph`` the query's dataset is that one graph (default
        graph, and the only graph GRAPH may name), whatever FROM clauses the text has."""
        ...

    def update(self, sparql_update: str) -> None:
        """Run a SPARQL update (cache bookkeeping only; never user or model text)."""
        ...

    def graph_exists(self, graph: str) -> bool:
        """Whether the named graph holds at least one triple."""
        ...

    def drop_graph(self, graph: str) -> None:
        """Remove the named graph; no error if it does not exist."""
        ...

    def count_triples(self, graph: str) -> int: ...

    def graph_bytes(self, graph: str) -> int:
        """Approximate N-Triples size: the serialised length of up to ``BYTES_SAMPLE`` triples,
        scaled to the graph's triple count (exact for graphs up to that size)."""
        ...

    def graphs(self) -> list[str]:
        """IRIs of the named graphs the store holds, sorted."""
        ...

    def close(self) -> None: ...


# -- IRIs and literals in SPARQL text -----------------------------------------------------------


def check_iri(iri: str) -> str:
    """``iri`` if it is an absolute IRI that can be written as ``<iri>`` in SPARQL, else
    StoreError (so no text can break out of the angle brackets)."""
    if not _IRI_SCHEME.match(iri):
        raise StoreError(f"not an absolute IRI: {iri!r}", hint="graph names are absolute IRIs")
    try:
        ox.NamedNode(iri)
    except ValueError as exc:
        raise StoreError(
            f"invalid IRI {iri!r}: {exc}", hint="graph names are absolute IRIs"
        ) from None
    return iri


def sparql_string(text: str) -> str:
    """A quoted SPARQL string literal with every character that could end it escaped."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def count_query(graph: str) -> str:
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{check_iri(graph)}> {{ ?s ?p ?o }} }}"


def sample_query(graph: str, limit: int = BYTES_SAMPLE) -> str:
    return (
        f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{check_iri(graph)}> {{ ?s ?p ?o }} }} "
        f"LIMIT {int(limit)}"
    )


def estimate_bytes(sample_bytes: int, sample_triples: int, total_triples: int) -> int:
    """Scale the N-Triples size of a sample to the whole graph."""
    if sample_triples == 0:
        return 0
    if sample_triples >= total_triples:
        return sample_bytes
    return round(sample_bytes * total_triples / sample_triples)


# -- RDF terms to Python values -----------------------------------------------------------------

_INTEGER_TYPES = frozenset(
    XSD_NS + name
    for name in (
        "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
        "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
        "unsignedByte",
    )
)  # fmt: skip
_FLOAT_TYPES = frozenset((XSD_NS + "double", XSD_NS + "float"))
_DATETIME_TYPES = frozenset((XSD_NS + "dateTime", XSD_NS + "dateTimeStamp"))
_STRING_TYPES = frozenset((XSD_NS + "string", RDF_NS + "langString"))
_SPECIAL_FLOATS = {"INF": "inf", "+INF": "inf", "-INF": "-inf", "NaN": "nan"}


def parse_datetime(lexical: str) -> datetime:
    """An xsd:dateTime lexical form as an aware UTC datetime (no zone is read as UTC)."""
    text = lexical.strip()
    text = text[:-1] + "+00:00" if text.endswith("Z") else text
    # Python keeps microseconds: cut longer fractions (nanoseconds) rather than fail.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def literal_value(lexical: str, datatype: str) -> Any:
    """A literal converted by datatype; the lexical form when it is not a valid value."""
    try:
        if datatype in _STRING_TYPES:
            return lexical
        if datatype in _INTEGER_TYPES:
            return int(lexical)
        if datatype in _FLOAT_TYPES:
            return float(_SPECIAL_FLOATS.get(lexical, lexical))
        if datatype == XSD_NS + "decimal":
            return Decimal(lexical)
        if datatype == XSD_NS + "boolean":
            if lexical in ("true", "1", "false", "0"):
                return lexical in ("true", "1")
            return lexical
        if datatype in _DATETIME_TYPES:
            return parse_datetime(lexical)
        if datatype == XSD_NS + "date":
            return date.fromisoformat(lexical[:10])
    except (ValueError, InvalidOperation):
        return lexical
    return lexical


def term_value(term: Any) -> Any:
    """A pyoxigraph term (or None for unbound) as a Python value."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.Literal):
        return literal_value(term.value, term.datatype.value)
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return str(term)  # RDF-star triple terms


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


class ChunkReader(io.RawIOBase):
    """A binary file over an iterable of byte chunks, so a stream of N-Triples can be loaded
    without joining it in memory."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = bytes(chunk)
        size = min(len(view), len(self._pending))
        view[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self.total += size
        return size


# -- the embedded store -------------------------------------------------------------------------


def _lock_error(path: Path, exc: OSError) -> StoreError:
    if "current process" in str(exc):
        hint = "open the store once per process: use oda_analyst.vkg.store.open_store(settings)"
    else:
        hint = (
            "the embedded store is single-process: stop the other oda-analyst process using it, "
            "point ODA_DATA_DIR elsewhere, or run a SPARQL server (e.g. `oxigraph serve`) and "
            "set ODA_SPARQL_ENDPOINT so that several processes share it"
        )
    return StoreError(f"the graph store folder {path} is locked by another process", hint=hint)


class OxigraphStore:
    """The embedded pyoxigraph store: on disk at ``path``, in memory when ``path`` is None."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        try:
            if path is None:
                self._store: ox.Store | None = ox.Store()
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._store = ox.Store(str(path))
        except OSError as exc:
            if path is not None and "LOCK" in str(exc):
                raise _lock_error(path, exc) from None
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
        source = data if isinstance(data, bytes) else io.BufferedReader(ChunkReader(data), 1 << 20)
        try:
            self._db.bulk_load(source, ox.RdfFormat.N_TRIPLES, to_graph=node)
        except SyntaxError as exc:
            if before == 0:  # bulk_load is not transactional: leave no half graph behind
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
        # pyoxigraph cannot interrupt a running query: the deadline is checked between rows,
        # so it bounds streaming results but not the first row of an aggregate.
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        options: dict[str, Any] = {}
        if default_graph is not None:
            node = ox.NamedNode(check_iri(default_graph))
            options = {"default_graph": node, "named_graphs": [node]}
        try:
            raw = self._db.query(sparql, **options)
            return result_from_pyoxigraph(raw, deadline, lambda: _timeout(timeout_s))
        except SyntaxError as exc:
            raise syntax_error("SPARQL", exc, sparql) from None
        except OSError as exc:
            raise StoreError(f"query failed: {exc}", hint="check the store folder") from None

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
        sample = []
        for quad in self._db.quads_for_pattern(None, None, None, node):
            sample.append(quad.triple)
            if len(sample) >= BYTES_SAMPLE:
                break
        if not sample:
            return 0
        size = len(ox.serialize(sample, format=ox.RdfFormat.N_TRIPLES) or b"")
        total = self.count_triples(graph) if len(sample) >= BYTES_SAMPLE else len(sample)
        return estimate_bytes(size, len(sample), total)

    def graphs(self) -> list[str]:
        return sorted(g.value for g in self._db.named_graphs() if isinstance(g, ox.NamedNode))

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None and self.path is not None:
            store.flush()
        with _OPEN_LOCK:
            if self.path is not None and _OPEN.get(self.path.resolve()) is self:
                del _OPEN[self.path.resolve()]
        # RocksDB releases its folder lock when the last reference goes.
        del store


def _timeout(timeout_s: float | None) -> StoreError:
    return StoreError(
        f"the query ran longer than {timeout_s} s",
        hint="narrow the time window or the entities, or raise the timeout",
    )


_OPEN: dict[Path, OxigraphStore] = {}
_OPEN_LOCK = threading.Lock()


def open_store(settings: Settings) -> GraphStore:
    """The store the settings name: a SPARQL endpoint when ``sparql_endpoint`` is set
    (``ODA_SPARQL_ENDPOINT``), else the embedded store under ``<data_dir>/graph``, shared by
    every caller in this process until closed."""
    endpoint = settings.sparql_endpoint
    if endpoint:
        from oda_analyst.vkg.http_store import HttpSparqlStore

        return HttpSparqlStore.from_settings(settings)
    path = (Path(settings.data_dir) / "graph").resolve()
    with _OPEN_LOCK:
        store = _OPEN.get(path)
        if store is None or store._store is None:
            store = OxigraphStore(path)
            _OPEN[path] = store
        return store
