"""The VKG builder Job's program: build one graph from the lake into the shared graph store.

Reads the settings from the environment (``ODA_LAKE``, ``ODA_S3_*``, ``ODA_SPARQL_ENDPOINT``)
and the graph to build from ``ODA_VKG_KEY``, ``ODA_VKG_OWNER`` and ``ODA_VKG_PLAN`` (the typed
query plan as JSON). The key is computed again here: when the lake's partitions changed since
the query was understood, the key differs and the build fails rather than file a graph under a
name that no longer describes it. Prints one JSON line (key, graph, triples, bytes); exit 0 on
success, 1 with ``error: …`` on stderr otherwise.
"""

from __future__ import annotations

import json
import os
import sys

from oda_analyst.config import load_settings
from oda_analyst.errors import OdaError, UsageError
from oda_analyst.lake import Lake
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.retriever.stages import coverage
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.cache import EVERYONE, VKGCache
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.request import from_plan


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise UsageError(f"{name} is not set", hint="the operator sets it on the builder pod")
    return value


def build() -> dict[str, object]:
    settings = load_settings()
    key, owner = _env("ODA_VKG_KEY"), _env("ODA_VKG_OWNER")
    plan = QueryPlan.model_validate_json(_env("ODA_VKG_PLAN"))
    lake = Lake.from_settings(settings)
    store = open_store(settings)
    # The retriever's own key, so retrieval finds this graph (imported late: it loads the
    # catalogue and the stage-2 machinery only in the builder).
    from oda_analyst.retriever.stages.stage2 import Stage2  # noqa: PLC0415

    cache = VKGCache(store, settings.vkg_cache_capacity)
    stage2 = Stage2(lake=lake, store=store, cache=cache, out_dir=settings.data_dir,
                    row_limit=settings.row_limit)  # fmt: skip
    request = from_plan(plan, lake)
    files = coverage.request_files(lake, request)
    expected = stage2.key(request, owner, files=files)
    if expected != key:
        raise UsageError(
            f"the lake changed since the query was understood (graph {key[:12]}… is now "
            f"{expected[:12]}…)",
            hint="the operator understands the query again and asks for the new graph",
        )

    def load(graph: str) -> int:
        return build_vkg(request, lake, store, graph).triples

    entry = cache.get_or_build(key, load, owner=owner, allowed_users=(EVERYONE,))
    return {"key": key, "graph": entry.graph, "triples": entry.triples, "bytes": entry.bytes,
            "cached": entry.hit}  # fmt: skip


def main() -> int:
    try:
        print(json.dumps(build()))
    except OdaError as err:
        print(f"error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
