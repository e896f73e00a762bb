"""The VKG cache: one named graph per grounded request, kept until LRU eviction.

Key: ``cache_key`` hashes the canonical grounded request, so requests that need the same data
share one graph whatever order their entities came in. Graph: ``m100:graph/vkg/<key>``.

Metadata lives as RDF in ``m100:graph/cache-meta`` (vocabulary ``cache:`` below), in the same
store as the graphs, so it survives restarts of the embedded store and a remote endpoint shows it
to every replica. One entry per graph, the graph IRI as subject::

    <…/graph/vkg/KEY> a cache:Entry ; cache:key "KEY" ;
        cache:created "…"^^xsd:dateTime ; cache:lastAccess "…"^^xsd:dateTime ;
        cache:tripleCount 123 ; cache:byteSize 4567 ;
        cache:owner "alice" ; cache:allowedUser "bob", "carol" .

ACL: a graph is returned to its owner, to its allowed users, and to anyone when the allowed users
include ``EVERYONE`` (``"*"``). A denied user gets AccessDeniedError and never a copy of his own:
one key, one graph.

Concurrency: requests for one key in one process build once (single flight: the first caller
builds, the others wait for its outcome and share its error if it fails). With ``lock_dir`` a
per-key file lock also serialises builders in other processes on this host that share a SPARQL
server; the embedded store cannot be shared between processes at all. ``max_builds`` bounds how
many different keys build at once (``ODA_VKG_MAX_PARALLEL_BUILDS``); the others wait their turn.

Eviction removes the metadata first, then drops the graph (in a background thread with
``background_drops=True``, recommended for a plain on-disk ``OxigraphStore`` or a remote server,
where dropping a big graph takes longer than building it; the default ``TieredStore`` drops a VKG
in milliseconds and needs none; a rebuild of the same key waits for its drop), so no entry ever
points at a half-dropped graph; a graph left without metadata (a crash in between) is dropped
before its key is built again, or by ``sweep_orphans``. A graph is evicted only as least recently
used beyond ``capacity`` and never right after it was built; a graph handed out moments before
can still be evicted while its query runs if the capacity is tiny, so keep capacity well above
the number of concurrent requests.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from oda_analyst.errors import AccessDeniedError, StoreError, UsageError
from oda_analyst.observability import metrics
from oda_analyst.ontology.namespaces import INSTANCE_NS, RDF_NS, XSD_NS
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.values import sparql_string

CACHE_NS = "https://w3id.org/oda-analyst/cache#"
VKG_GRAPH_PREFIX = INSTANCE_NS + "graph/vkg/"
CACHE_META_GRAPH = INSTANCE_NS + "graph/cache-meta"
EVERYONE = "*"

_KEY = re.compile(r"^[0-9a-f]{8,64}$")
_PREFIXES = f"PREFIX cache: <{CACHE_NS}>\nPREFIX xsd: <{XSD_NS}>\nPREFIX rdf: <{RDF_NS}>\n"


def now_utc() -> datetime:
    return datetime.now(UTC)


# -- keys ---------------------------------------------------------------------------------------


def _canonical(value: Any, *, as_set: bool) -> Any:
    """JSON-ready canonical form. A list that is a mapping's value is a set (sorted, deduped); a
    list inside a list is a tuple (order kept), so ``gpus: [[900, 0]]`` keeps its pairs."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v, as_set=True) for k, v in sorted(value.items(), key=_str_key)}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_canonical(v, as_set=False) for v in value]
        if as_set or isinstance(value, (set, frozenset)):
            unique = {json.dumps(i, sort_keys=True, separators=(",", ":")): i for i in items}
            items = [unique[k] for k in sorted(unique, key=lambda k: _order(unique[k]))]
        return items
    if isinstance(value, datetime):
        aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return aware.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise UsageError(
        f"cannot key a cache entry on a {type(value).__name__}",
        hint="grounded requests hold only strings, numbers, booleans, dates, lists and mappings",
    )


def _str_key(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _order(value: Any) -> tuple[Any, ...]:
    """A total order over canonical values: numbers numerically, then strings, then the rest."""
    if isinstance(value, bool) or value is None:
        return (0, str(value))
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, list):
        return (3, tuple(_order(v) for v in value))
    return (4, json.dumps(value, sort_keys=True))


def canonical_json(entities: Mapping[str, Any]) -> str:
    return json.dumps(_canonical(entities, as_set=True), sort_keys=True, separators=(",", ":"))


def cache_key(entities: Mapping[str, Any]) -> str:
    """sha256 (first 32 hex digits) of the canonical JSON of a grounded request (entities,
    metrics, window, granularity): insensitive to the order of lists and to duplicates."""
    return hashlib.sha256(canonical_json(entities).encode()).hexdigest()[:32]


def check_key(key: str) -> str:
    if not _KEY.match(key):
        raise UsageError(
            f"not a cache key: {key!r}", hint="cache keys are 8-64 lowercase hex digits (cache_key)"
        )
    return key


def vkg_graph_iri(key: str) -> str:
    """``m100:graph/vkg/<key>``."""
    return VKG_GRAPH_PREFIX + check_key(key)


# -- entries and their RDF ----------------------------------------------------------------------


@dataclass(frozen=True)
class CacheEntry:
    key: str
    graph: str
    created: datetime
    last_access: datetime
    triples: int
    bytes: int
    owner: str
    allowed_users: frozenset[str]
    hit: bool = False

    def allows(self, user: str) -> bool:
        return user == self.owner or user in self.allowed_users or EVERYONE in self.allowed_users


def _dt(value: datetime) -> str:
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return f'"{aware.isoformat().replace("+00:00", "Z")}"^^xsd:dateTime'


def _entry_triples(entry: CacheEntry) -> str:
    users = "".join(f" ; cache:allowedUser {sparql_string(u)}" for u in sorted(entry.allowed_users))
    return (
        f"<{entry.graph}> a cache:Entry ; cache:key {sparql_string(entry.key)} ; "
        f"cache:created {_dt(entry.created)} ; cache:lastAccess {_dt(entry.last_access)} ; "
        f"cache:tripleCount {int(entry.triples)} ; cache:byteSize {int(entry.bytes)} ; "
        f"cache:owner {sparql_string(entry.owner)}{users} ."
    )


def _forget(graph: str) -> str:
    return f"DELETE WHERE {{ GRAPH <{CACHE_META_GRAPH}> {{ <{graph}> ?p ?o }} }}"


def _entries_from_rows(rows: list[tuple[Any, ...]]) -> list[CacheEntry]:
    fields: dict[str, dict[str, Any]] = {}
    for graph, prop, value in rows:
        slot = fields.setdefault(str(graph), {"allowed": set()})
        name = str(prop).removeprefix(CACHE_NS)
        if name == "allowedUser":
            slot["allowed"].add(str(value))
        else:
            slot[name] = value
    entries = []
    for graph, f in fields.items():
        try:
            entries.append(
                CacheEntry(
                    key=str(f["key"]), graph=graph, created=f["created"],
                    last_access=f["lastAccess"], triples=int(f["tripleCount"]),
                    bytes=int(f["byteSize"]), owner=str(f["owner"]),
                    allowed_users=frozenset(f["allowed"]),
                )
            )  # fmt: skip
        except KeyError:
            continue  # an entry being rewritten by another process: not a usable entry
    return entries


# -- the cache ----------------------------------------------------------------------------------


class VKGCache:
    """Named graphs keyed by grounded request, with LRU eviction, ACLs and single-flight builds."""

    def __init__(
        self,
        store: GraphStore,
        capacity: int,
        *,
        clock: Callable[[], datetime] = now_utc,
        lock_dir: Path | None = None,
        background_drops: bool = False,
        max_builds: int | None = None,
    ) -> None:
        if capacity < 1:
            raise UsageError(f"cache capacity must be at least 1, got {capacity}",
                             hint="set ODA_VKG_CACHE_CAPACITY to a positive number")  # fmt: skip
        self.store = store
        self.capacity = capacity
        self._clock = clock
        self._lock_dir = lock_dir
        self._flights: dict[str, Future[CacheEntry | None]] = {}
        self._flights_lock = threading.Lock()
        self._evict_lock = threading.Lock()
        self._background = background_drops
        self._drops: dict[str, threading.Thread] = {}
        # Builds of different keys at once (None: unbounded); one key is built once anyway.
        self._build_slots = threading.BoundedSemaphore(max_builds) if max_builds else None

    # -- reading metadata ------------------------------------------------------------------------

    def _select(self, graph: str | None) -> list[CacheEntry]:
        only = f"VALUES ?g {{ <{graph}> }} " if graph is not None else ""
        text = f"{_PREFIXES}SELECT ?g ?p ?o WHERE {{ {only}?g a cache:Entry ; ?p ?o }}"
        rows = self.store.query(text, default_graph=CACHE_META_GRAPH).rows
        return _entries_from_rows(rows)

    def entry(self, key: str) -> CacheEntry | None:
        """The metadata of ``key`` (no ACL check, no access recorded): for administration."""
        found = self._select(vkg_graph_iri(key))
        return found[0] if found else None

    def entries(self) -> list[CacheEntry]:
        """Every entry, most recently used first."""
        found = self._select(None)
        return sorted(found, key=lambda e: (e.last_access, e.created, e.key), reverse=True)

    # -- lookups and builds ----------------------------------------------------------------------

    def lookup(self, key: str, *, user: str) -> CacheEntry | None:
        """The entry for ``key`` if cached (a hit: last access updated), None if not cached;
        AccessDeniedError if ``user`` may not read it."""
        entry = self.entry(key)
        if entry is None:
            return None
        if not entry.allows(user):
            raise AccessDeniedError(
                f"the knowledge graph for request {key} belongs to another user",
                hint="ask its owner or an administrator to add you to its allowed users",
            )
        if entry.triples > 0 and not self.store.graph_exists(entry.graph):
            self.store.update(_forget(entry.graph))  # dropped behind our back: rebuild
            return None
        now = self._clock()
        self.store.update(
            f"{_PREFIXES}DELETE WHERE {{ GRAPH <{CACHE_META_GRAPH}> "
            f"{{ <{entry.graph}> cache:lastAccess ?t }} }} ;\n"
            f"INSERT DATA {{ GRAPH <{CACHE_META_GRAPH}> "
            f"{{ <{entry.graph}> cache:lastAccess {_dt(now)} }} }}"
        )
        return replace(entry, last_access=now, hit=True)

    def get_or_build(
        self,
        key: str,
        build: Callable[[str], int],
        *,
        owner: str,
        allowed_users: Collection[str] | None = None,
        user: str | None = None,
    ) -> CacheEntry:
        """The graph for ``key``: cached (``hit=True``) or built now by ``build(graph_iri)``,
        which loads the graph and returns its triple count. ``user`` (default: ``owner``) is who
        asks; ``owner`` and ``allowed_users`` apply to a graph built by this call."""
        requester = user if user is not None else owner
        check_key(key)
        while True:
            found = self.lookup(key, user=requester)
            if found is not None:
                metrics.vkg_hit()
                return found
            with self._flights_lock:
                flight = self._flights.get(key)
                leader = flight is None
                if flight is None:
                    flight = self._flights[key] = Future()
            if not leader:
                flight.result()  # re-raises the leader's error
                continue  # built: take it through lookup (ACL, last access) like any hit
            try:
                with self._build_slots or nullcontext():
                    built = self._build(key, build, owner, allowed_users or ())
            except BaseException as exc:
                flight.set_exception(exc)
                raise
            else:
                flight.set_result(built)
            finally:
                with self._flights_lock:
                    del self._flights[key]
            if built is None:
                continue  # someone else built it between our lookup and our flight
            metrics.vkg_built(built.bytes)
            self._evict_beyond_capacity(keep=key)
            return built

    def _build(
        self, key: str, build: Callable[[str], int], owner: str, allowed: Collection[str]
    ) -> CacheEntry | None:
        graph = vkg_graph_iri(key)
        with self._process_lock(key):
            if self.entry(key) is not None:
                return None
            self._wait_for_drop(key)
            self.store.drop_graph(graph)  # leftovers of a build that crashed
            try:
                triples = int(build(graph))
                created = self._clock()
                entry = CacheEntry(
                    key=key, graph=graph, created=created, last_access=created, triples=triples,
                    bytes=self.store.graph_bytes(graph), owner=owner,
                    allowed_users=frozenset(allowed),
                )  # fmt: skip
                self.store.update(
                    f"{_PREFIXES}{_forget(graph)} ;\n"
                    f"INSERT DATA {{ GRAPH <{CACHE_META_GRAPH}> {{ {_entry_triples(entry)} }} }}"
                )
            except BaseException:
                self._discard(graph)
                raise
        return entry

    def _discard(self, graph: str) -> None:
        """Best-effort cleanup after a failed build; the build's own error is what matters."""
        try:
            self.store.update(f"{_PREFIXES}{_forget(graph)}")
            self.store.drop_graph(graph)
        except StoreError:
            pass

    @contextmanager
    def _process_lock(self, key: str) -> Iterator[None]:
        if self._lock_dir is None:
            yield
            return
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        with open(self._lock_dir / f"{key}.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- eviction ------------------------------------------------------------------------------

    def _evict_beyond_capacity(self, keep: str) -> list[str]:
        with self._evict_lock:
            entries = self.entries()
            victims = [e.key for e in entries if e.key != keep][self.capacity - 1 :]
            for victim in victims:
                self.evict(victim)
        kept = [e for e in entries if e.key not in victims]
        metrics.vkg_evicted(len(victims))
        metrics.vkg_held(len(kept), sum(e.bytes for e in kept))
        return victims

    def evict(self, key: str) -> None:
        """Forget ``key`` and drop its graph (no error if it is not cached). With
        ``background_drops`` the drop runs in a thread: dropping a big graph from the on-disk
        store takes longer than building it, and no request should wait for that."""
        graph = vkg_graph_iri(key)
        self.store.update(f"{_PREFIXES}{_forget(graph)}")
        if not self._background:
            self.store.drop_graph(graph)
            return
        self._wait_for_drop(key)
        worker = threading.Thread(
            target=self._drop_quietly, args=(key, graph), name=f"vkg-drop-{key}", daemon=True
        )
        with self._flights_lock:
            self._drops[key] = worker
        worker.start()

    def _drop_quietly(self, key: str, graph: str) -> None:
        try:
            self.store.drop_graph(graph)
        except StoreError:
            pass  # left without metadata: dropped by sweep_orphans or the key's next build
        finally:
            with self._flights_lock:
                if self._drops.get(key) is threading.current_thread():
                    del self._drops[key]

    def _wait_for_drop(self, key: str) -> None:
        """A key rebuilt while its old graph is still being dropped must not lose new triples."""
        with self._flights_lock:
            worker = self._drops.get(key)
        if worker is not None:
            worker.join()

    def wait_for_drops(self) -> None:
        """Block until every background drop has finished (tests, shutdown)."""
        with self._flights_lock:
            workers = list(self._drops.values())
        for worker in workers:
            worker.join()

    def clear(self) -> None:
        """Evict every entry and drop every VKG graph, with or without metadata."""
        for entry in self.entries():
            self.evict(entry.key)
        self.sweep_orphans()

    def sweep_orphans(self) -> list[str]:
        """Drop VKG graphs that have no metadata (left by a crash); return their IRIs."""
        known = {e.graph for e in self.entries()}
        with self._flights_lock:
            building = {vkg_graph_iri(k) for k in (*self._flights, *self._drops)}
        orphans = [
            g for g in self.store.graphs()
            if g.startswith(VKG_GRAPH_PREFIX) and g not in known and g not in building
        ]  # fmt: skip
        for graph in orphans:
            self.store.drop_graph(graph)
        return orphans
