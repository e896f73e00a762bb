"""The EXASAGE Query Tool: extract, match an archetype, build the VKG, run the SPARQL — once.

Single shot, as published: no clarification (``clarify`` always refuses), no reflection, no
repair. A question the regexes cannot read fails at once with what was found; one they read is
answered over the same per-query VKG, compiler and executor as ours (the graph store is shared,
graphs are cached by the hash of the extracted entities, as in the paper). Large results come
back as a CSV handle like ours (the paper: "the same tool interface").
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from oda_analyst.baselines.payload import (
    AnswerStatus,
    BaselineAnswer,
    completed,
    failed,
    new_request_id,
)
from oda_analyst.baselines.sota1.archetypes import match
from oda_analyst.baselines.sota1.extract import extract
from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import OdaError, UsageError
from oda_analyst.lake import Lake
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.executor import execute
from oda_analyst.sparql.results import open_csv
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.cache import EVERYONE, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.request import from_plan

BACKEND = "sota1"


class ExasageQueryTool:
    """SoTA#1 over a lake and a graph store (default: the settings', shared with ours)."""

    def __init__(self, settings: Settings | None = None, *, lake: Lake | None = None,
                 store: GraphStore | None = None) -> None:  # fmt: skip
        self.settings = settings or get_settings()
        self.lake = lake or Lake.from_settings(self.settings)
        self.store = store or open_store(self.settings)
        self.cache = VKGCache(self.store, self.settings.vkg_cache_capacity)
        self.out_dir = Path(self.settings.data_dir) / "results" / BACKEND
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def query(self, question: str, *, user: str = "anonymous",
              as_of: datetime | None = None) -> BaselineAnswer:  # fmt: skip
        """Answer one question or fail; ``as_of`` is accepted and unused (no relative times)."""
        del as_of  # the strict format has no relative times to resolve
        rid = new_request_id(BACKEND)
        timings: dict[str, float] = {}
        began = time.perf_counter()
        try:
            x = extract(question, load_catalogue())
            name, plan = match(x)
            timings["entity_extraction"] = round(time.perf_counter() - began, 4)
            request = from_plan(plan, self.lake)
            key = cache_key({**request.canonical(), "lake": self.lake.location,
                             "backend": BACKEND})  # fmt: skip
            graph = vkg_graph_iri(key)
            t0 = time.perf_counter()

            def build(iri: str) -> int:
                return build_vkg(request, self.lake, self.store, iri).triples

            self.cache.get_or_build(key, build, owner=user, allowed_users=(EVERYONE,), user=user)
            timings["vkg"] = round(time.perf_counter() - t0, 4)
            compiled = compile_plan(plan, graph=graph)
            t1 = time.perf_counter()
            result = execute(self.store, compiled, graph=graph, row_limit=self.settings.row_limit,
                             out_dir=self.out_dir, request_id=rid, user=user)  # fmt: skip
            timings["sparql_execution"] = round(time.perf_counter() - t1, 4)
        except OdaError as err:
            status: AnswerStatus = "rejected" if err.exit_code == 4 else "failed"
            return failed(BACKEND, err, request_id=rid, status=status, timings=timings)
        res = {
            **result.to_json(),
            "explanation": f"archetype {name}: {compiled.explanation}",
            "sparql": compiled.sparql,
            "plan": plan.model_dump(mode="json", exclude_none=True),
            "archetype": name,
        }
        warnings = [f"single-sensor: metric(s) {', '.join(x.dropped_metrics)} not read"
                    ] if x.dropped_metrics else []  # fmt: skip
        text = f"archetype {name}: {result.row_count:,} row(s)."
        return completed(BACKEND, [res], request_id=rid, answer=text, timings=timings,
                         warnings=warnings)  # fmt: skip

    def clarify(self, request_id: str, answer: str, *, user: str = "anonymous") -> BaselineAnswer:
        """The tool cannot ask, so there is nothing to answer: always a usage error."""
        raise UsageError(
            f"request {request_id} asked nothing: the EXASAGE Query Tool has no clarification",
            hint="ask again with exact metric names and [YYYY-MM-DD HH:MM:SS] timestamps",
        )

    def download_csv(self, handle: str, *, user: str = "anonymous") -> Path:
        return open_csv(handle, out_dir=self.out_dir, user=user)
