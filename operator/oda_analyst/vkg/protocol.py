"""The graph-store contract: what the builder, the executor, the retriever and the cache need.

Implementations: ``store.OxigraphStore`` (embedded), ``tiered.TieredStore`` (embedded graphs on
disk, VKGs in memory) and ``http_store.HttpSparqlStore`` (any SPARQL 1.1 endpoint); which one a
process uses is ``factory.open_store``'s choice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from oda_analyst.errors import StoreError

Row = tuple[Any, ...]


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
