"""Which graph store a process uses: a SPARQL endpoint, or the one shared embedded store.

Kept apart from the stores themselves so that no store module imports another's factory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oda_analyst.vkg.http_store import HttpSparqlStore
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.store import OPEN_LOCK, OPEN_STORES
from oda_analyst.vkg.tiered import TieredStore

if TYPE_CHECKING:
    from oda_analyst.config import Settings


def open_store(settings: Settings) -> GraphStore:
    """The store the settings name: a SPARQL endpoint when ``sparql_endpoint`` is set
    (``ODA_SPARQL_ENDPOINT``), else the embedded store, shared by every caller in this process
    until closed: a ``vkg.tiered.TieredStore`` with the lasting graphs on disk under
    ``<data_dir>/graph`` and the VKGs in memory, persisted under ``<data_dir>/vkg``, at most
    ``vkg_memory_triples`` (``ODA_VKG_MEMORY_TRIPLES``) of them loaded at once."""
    endpoint = settings.sparql_endpoint
    if endpoint:
        return HttpSparqlStore.from_settings(settings)
    data_dir = Path(settings.data_dir)
    path = (data_dir / "graph").resolve()
    budget = settings.vkg_memory_triples
    with OPEN_LOCK:
        store = OPEN_STORES.get(path)
        if store is None or store._store is None:
            store = TieredStore(path, dump_dir=(data_dir / "vkg").resolve(), memory_triples=budget,
                                lock_wait_s=settings.store_lock_wait_s)  # fmt: skip
            OPEN_STORES[path] = store
        return store
