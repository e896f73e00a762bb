"""The default embedded store: RocksDB on disk for the lasting graphs, memory for the VKGs.

Per-query VKGs are derived data, rebuilt from the lake at will, and written and dropped on almost
every question. In the on-disk pyoxigraph store (RocksDB) that is what costs most: it ingests
~50-80k triples/s even with ``bulk_load`` and takes 18-77 s to drop a 300k-triple graph. So
``open_store`` (no ``ODA_SPARQL_ENDPOINT``) returns a ``TieredStore``:

- the **base graph**, the **cache-metadata graph** and any other named graph live in the on-disk
  pyoxigraph store under ``<data_dir>/graph`` (this class *is* that ``OxigraphStore``);
- every **VKG graph** (``m100:graph/vkg/<key>``) lives in an in-memory pyoxigraph ``Store`` of its
  own, in that store's default graph (loading and querying a default graph is ~30% faster than
  a named one), and is **persisted** in the background as one gzip-compressed N-Triples dump,
  ``<data_dir>/vkg/<key>.nt.gz`` (written to a temporary name, then renamed: a dump is whole or
  absent). After a restart, or once unloaded, a VKG is reloaded from its dump on first access;
  the cache's metadata (on disk) says which graphs exist.
- **dropping** a VKG forgets its store and deletes its dump: milliseconds, whatever its size.
- **memory bound**: at most ``memory_triples`` VKG triples stay loaded (``ODA_VKG_MEMORY_TRIPLES``,
  default 6 million, ~2 GiB at ~350 B a triple); beyond it the least recently used graphs whose
  dumps are written are unloaded (their dumps stay) and come back on their next access.

So everything is persisted on disk under ``data_dir`` and a restart loses nothing, while the VKGs
are served from memory. Queries whose default graph is a VKG run on that graph's own store (as
the dataset's default graph, and as the only named graph: a query text using ``GRAPH`` runs on a
copy holding the graph under its name, which is slower but exact); all others run on disk.
``update`` (cache bookkeeping) always runs on disk: VKGs change only through ``load_ntriples`` and
``drop_graph``. The store is for one process, like the on-disk store it wraps.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import polars as pl
import pyoxigraph as ox

from oda_analyst.errors import StoreError
from oda_analyst.vkg.cache import VKG_GRAPH_PREFIX
from oda_analyst.vkg.ntload import is_trusted, load_segments
from oda_analyst.vkg.protocol import QueryResult
from oda_analyst.vkg.store import OxigraphStore, run_frame, run_query, sampled_bytes, syntax_error
from oda_analyst.vkg.values import check_iri

DEFAULT_MEMORY_TRIPLES = 6_000_000
DUMP_SUFFIX = ".nt.gz"
# Fast compression: dumps are written in the background on a 2-core budget; N-Triples of
# readings still shrink ~8x at level 1.
_COMPRESS_LEVEL = 1
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# Comments, strings and IRIs, removed before looking for the GRAPH keyword.
_NOT_KEYWORDS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'(?:[^'\\\n]|\\.)*'"
    r"|<[^<>\"{}|^`\\\s]*>"
    r"|#[^\n]*",
    re.DOTALL,
)
_GRAPH_KEYWORD = re.compile(r"(?<![\w?$:])GRAPH(?![\w:])", re.IGNORECASE)
_DEFAULT_DATASET: dict[str, Any] = {"default_graph": ox.DefaultGraph(), "named_graphs": []}


def uses_graph_keyword(sparql: str) -> bool:
    """Whether a query text has a ``GRAPH`` pattern (outside strings, IRIs and comments)."""
    return _GRAPH_KEYWORD.search(_NOT_KEYWORDS.sub(" ", sparql)) is not None


@dataclass
class _Resident:
    """A VKG held in memory: its own store (triples in the default graph)."""

    store: ox.Store
    triples: int
    last_used: float
    persisted: bool = False


class TieredStore(OxigraphStore):
    """The on-disk store for lasting graphs plus an in-memory, dump-persisted tier for VKGs."""

    def __init__(
        self,
        path: Path,
        *,
        dump_dir: Path | None = None,
        memory_triples: int = DEFAULT_MEMORY_TRIPLES,
        prefix: str = VKG_GRAPH_PREFIX,
        lock_wait_s: float = 0.0,
    ) -> None:
        if memory_triples < 1:
            raise StoreError(
                f"the VKG memory budget must be positive, got {memory_triples}",
                hint="set ODA_VKG_MEMORY_TRIPLES to a number of triples, e.g. 6000000",
            )
        super().__init__(path, lock_wait_s=lock_wait_s)
        self.dump_dir = dump_dir if dump_dir is not None else path.parent / "vkg"
        self.memory_triples = memory_triples
        self.prefix = prefix
        try:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            for leftover in self.dump_dir.glob("*.tmp"):  # a dump cut short by a crash
                leftover.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot use the VKG dump folder {self.dump_dir}: {exc}",
                hint="check that ODA_DATA_DIR is writable",
            ) from None
        self._resident: dict[str, _Resident] = {}
        self._generation: dict[str, int] = {}
        self._lock = threading.RLock()
        self._reload_lock = threading.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vkg-dump")
        self._pending: set[Future[None]] = set()

    # -- routing ----------------------------------------------------------------------------

    def in_memory_tier(self, graph: str) -> bool:
        """Whether ``graph`` belongs to the VKG tier (a VKG IRI whose key can name a file)."""
        return graph.startswith(self.prefix) and bool(_SAFE_NAME.match(graph[len(self.prefix) :]))

    def dump_path(self, graph: str) -> Path:
        return self.dump_dir / f"{graph[len(self.prefix) :]}{DUMP_SUFFIX}"

    def resident_graphs(self) -> list[str]:
        """VKGs loaded in memory now (the others are on disk as dumps only)."""
        with self._lock:
            return sorted(self._resident)

    # -- loading ----------------------------------------------------------------------------

    def load_ntriples(self, graph: str, data: bytes | Iterable[bytes]) -> int:
        if not self.in_memory_tier(graph):
            return super().load_ntriples(graph, data)
        check_iri(graph)
        existing = self._memory(graph)
        db = existing if existing is not None else ox.Store()
        before = len(db) if existing is not None else 0
        lenient = is_trusted(data)
        kept: list[bytes] | None = None
        source = data
        if existing is None:  # the dump is exactly what we load: no re-serialising
            kept = [data] if isinstance(data, bytes) else []
            source = data if isinstance(data, bytes) else _tee(data, kept)
        try:
            load_segments(db, source, to_graph=None, lenient=lenient)
        except SyntaxError as exc:
            if existing is not None:
                self._register(graph, db, dump_from_store=True)
            raise syntax_error("N-Triples", exc) from None
        except OSError as exc:
            raise StoreError(f"loading into <{graph}> failed: {exc}", hint="retry") from None
        # len() walks the whole store (~0.1 s for 500k triples): counted once per load.
        triples = len(db)
        if triples == 0:
            self.drop_graph(graph)
            return 0
        self._register(graph, db, chunks=kept, triples=triples)
        return triples - before

    def _register(
        self,
        graph: str,
        db: ox.Store,
        *,
        chunks: list[bytes] | None = None,
        dump_from_store: bool = False,
        triples: int | None = None,
    ) -> None:
        size = len(db) if triples is None else triples
        with self._lock:
            generation = self._generation.get(graph, 0) + 1
            self._generation[graph] = generation
            self._resident[graph] = _Resident(db, size, time.monotonic())
            source: list[bytes] | ox.Store = db if dump_from_store or chunks is None else chunks
            future = self._writer.submit(self._write_dump, graph, generation, source)
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)
        self._enforce_budget(keep=graph)

    def _write_dump(self, graph: str, generation: int, source: list[bytes] | ox.Store) -> None:
        _lower_thread_priority()
        final = self.dump_path(graph)
        temporary = final.with_name(f"{final.name}.{generation}.tmp")
        try:
            with gzip.open(temporary, "wb", compresslevel=_COMPRESS_LEVEL) as out:
                if isinstance(source, ox.Store):
                    target = cast(IO[bytes], out)
                    source.dump(target, ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
                else:
                    for chunk in source:
                        out.write(chunk)
            with self._lock:
                current = self._generation.get(graph) == generation and graph in self._resident
                if current:
                    os.replace(temporary, final)
                    self._resident[graph].persisted = True
        except OSError:
            current = False  # the graph stays in memory unpersisted; a rebuild rewrites it
        finally:
            temporary.unlink(missing_ok=True)
        if current:
            self._enforce_budget(keep=None)

    def _enforce_budget(self, keep: str | None) -> None:
        with self._lock:
            total = sum(r.triples for r in self._resident.values())
            by_age = sorted(self._resident.items(), key=lambda item: item[1].last_used)
            for graph, resident in by_age:
                if total <= self.memory_triples:
                    break
                if graph != keep and resident.persisted:
                    del self._resident[graph]  # its dump stays; reloaded on next access
                    total -= resident.triples

    def wait_for_dumps(self) -> None:
        """Block until every VKG dump scheduled so far is written (tests, benchmarks, close)."""
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                return
            for future in pending:
                future.result()

    # -- reading ----------------------------------------------------------------------------

    def _memory(self, graph: str) -> ox.Store | None:
        """The graph's store, reloaded from its dump if it is not in memory; None if absent."""
        with self._lock:
            resident = self._resident.get(graph)
            if resident is not None:
                resident.last_used = time.monotonic()
                return resident.store
        with self._reload_lock:
            with self._lock:
                resident = self._resident.get(graph)
                if resident is not None:  # another thread reloaded it meanwhile
                    return resident.store
                generation = self._generation.get(graph, 0)
            path = self.dump_path(graph)
            db = ox.Store()
            try:
                with gzip.open(path, "rb") as dump:
                    data = dump.read()
                db.load(data, ox.RdfFormat.N_TRIPLES, lenient=True)  # written by us
            except FileNotFoundError:
                return None
            except (OSError, EOFError, SyntaxError):
                path.unlink(missing_ok=True)  # damaged: the cache rebuilds the graph
                return None
            with self._lock:
                if self._generation.get(graph, 0) != generation:  # dropped or rebuilt meanwhile
                    resident = self._resident.get(graph)
                    return None if resident is None else resident.store
                self._resident[graph] = _Resident(db, len(db), time.monotonic(), persisted=True)
        self._enforce_budget(keep=graph)
        return db

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        if default_graph is None or not self.in_memory_tier(default_graph):
            return super().query(sparql, default_graph=default_graph, timeout_s=timeout_s)
        db, options = self._dataset(check_iri(default_graph), sparql)
        return run_query(db, sparql, options, timeout_s)

    def query_frame(self, sparql: str, *, default_graph: str | None = None) -> pl.DataFrame:
        if default_graph is None or not self.in_memory_tier(default_graph):
            return super().query_frame(sparql, default_graph=default_graph)
        db, options = self._dataset(check_iri(default_graph), sparql)
        return run_frame(db, sparql, options)

    def _dataset(self, graph: str, sparql: str) -> tuple[ox.Store, dict[str, Any]]:
        db = self._memory(graph)
        if db is None:
            db = ox.Store()  # a graph that does not exist: an empty dataset
        if not uses_graph_keyword(sparql):
            return db, _DEFAULT_DATASET
        # GRAPH <vkg> / GRAPH ?g must see the graph under its name: query a named copy.
        node = ox.NamedNode(graph)
        named = ox.Store()
        data = db.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph()) or b""
        named.load(data, ox.RdfFormat.N_TRIPLES, to_graph=node, lenient=True)
        return named, {"default_graph": node, "named_graphs": [node]}

    def graph_exists(self, graph: str) -> bool:
        if not self.in_memory_tier(graph):
            return super().graph_exists(graph)
        # Loads a dumped graph: a damaged dump then reads as missing (and the cache rebuilds it)
        # rather than as an empty graph; the query that follows a lookup needs it loaded anyway.
        return self._memory(check_iri(graph)) is not None

    def count_triples(self, graph: str) -> int:
        if not self.in_memory_tier(graph):
            return super().count_triples(graph)
        db = self._memory(check_iri(graph))
        return 0 if db is None else self._size(graph, db)

    def _size(self, graph: str, db: ox.Store) -> int:
        """A resident graph's triples as counted when it was loaded (len() walks the store)."""
        with self._lock:
            resident = self._resident.get(graph)
            if resident is not None and resident.store is db:
                return resident.triples
        return len(db)

    def graph_bytes(self, graph: str) -> int:
        if not self.in_memory_tier(graph):
            return super().graph_bytes(graph)
        db = self._memory(check_iri(graph))
        if db is None:
            return 0
        quads = db.quads_for_pattern(None, None, None, ox.DefaultGraph())
        return sampled_bytes(quads, lambda: self._size(graph, db))

    def graphs(self) -> list[str]:
        found = set(super().graphs())
        with self._lock:
            found.update(self._resident)
        for dump in self.dump_dir.glob(f"*{DUMP_SUFFIX}"):
            name = self.prefix + dump.name.removesuffix(DUMP_SUFFIX)
            if self.in_memory_tier(name):
                found.add(name)
        return sorted(found)

    def drop_graph(self, graph: str) -> None:
        if not self.in_memory_tier(graph):
            super().drop_graph(graph)
            return
        check_iri(graph)
        with self._lock:
            self._generation[graph] = self._generation.get(graph, 0) + 1
            self._resident.pop(graph, None)
            self.dump_path(graph).unlink(missing_ok=True)
        # A VKG written to the on-disk store before the tiers existed: drop it there too.
        if super().graph_exists(graph):
            super().drop_graph(graph)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a dump that failed is rewritten by a rebuild
            self.wait_for_dumps()
        self._writer.shutdown(wait=True)
        with self._lock:
            self._resident.clear()
        super().close()


def _tee(chunks: Iterable[bytes], kept: list[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        kept.append(chunk)
        yield chunk


def _lower_thread_priority() -> None:
    """Let requests go first: dumps are background work (Linux sets nice values per thread)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
