"""The pipeline port over the retriever service in this process (until the coordinator's)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast, get_args

from oda_analyst.config import Settings
from oda_analyst.controller.port import GraphInfo, GraphNeed, Understood
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.stages import coverage
from oda_analyst.retriever.stages.stage1 import Answer, Clarify, Ready, Stage1Result
from oda_analyst.retriever.stages.stage1 import Field as Stage1Field
from oda_analyst.retriever.understood import sentence
from oda_analyst.vkg.request import from_plan

STAGE1_FIELDS = frozenset(get_args(Stage1Field))


class RetrieverPipeline:
    """Stage 1 and retrieval by ``Retriever``; graphs through its cache (the shared store)."""

    def __init__(self, settings: Settings) -> None:
        self.retriever = Retriever(settings)

    def understand(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[tuple[str, str]]
    ) -> Understood:
        # Only stage 1's own questions are replayed into it (the coordinator may ask about the
        # chart as well); the retriever's public stage 1 reads the question exactly as
        # retrieval will (typos, the catalogue's twin metrics settled by the lake).
        given = [Answer(cast(Stage1Field, f), t) for f, t in answers if f in STAGE1_FIELDS]
        s1, notes = self.retriever.understand(question, as_of=as_of, answers=given)
        return self._understood(s1, user, notes)

    def _understood(self, s1: Stage1Result, user: str, notes: Sequence[str] = ()
                    ) -> Understood:  # fmt: skip
        out = s1.outcome
        if isinstance(out, Clarify):
            return Understood("clarification", field=out.field, question=out.question,
                              candidates=tuple(out.candidates),
                              warnings=(*notes, *s1.warnings))  # fmt: skip
        if not isinstance(out, Ready):
            return Understood("rejected", message=out.message, hint=out.hint,
                              warnings=(*notes, *s1.warnings))  # fmt: skip
        stage2 = self.retriever.stage2
        instants = out.instants or (None,) * len(out.plans)
        said = [sentence(p, instant=i) for p, i in zip(out.plans, instants, strict=True)]
        graphs = []
        for plan in out.plans:
            request = from_plan(plan, stage2.lake)
            if request.granularity == "raw" and stage2.chunk_span(request) is not None:
                continue  # chunked: retrieval builds one graph per chunk as it goes
            files = coverage.request_files(stage2.lake, request)
            if coverage.metrics_without_files(request, files):
                continue  # no data: retrieval says so without a graph
            key = stage2.key(request, user, files=files)
            graphs.append(GraphNeed(key=key, request=plan.model_dump(mode="json"),
                                    lake=stage2.lake.location,
                                    fingerprint=files_fingerprint(files)))  # fmt: skip
        return Understood("ready", understood_as="; then ".join(said) + ".",
                          graphs=tuple(graphs),
                          warnings=(*notes, *s1.warnings, *out.notes))  # fmt: skip

    def retrieve(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[str]
    ) -> dict[str, Any]:
        answer = self.retriever.query(question, user=user, as_of=as_of)
        for text in answers:
            if answer.status != "clarification":
                break
            answer = self.retriever.clarify(answer.request_id, text, user=user)
        return answer.model_dump(mode="json")

    def graph(self, key: str) -> GraphInfo | None:
        entry = self.retriever.stage2.cache.entry(key)
        if entry is None:
            return None
        return GraphInfo(key=entry.key, named_graph=entry.graph, triples=entry.triples,
                         bytes=entry.bytes, created=entry.created,
                         last_access=entry.last_access)  # fmt: skip

    def drop_graph(self, key: str) -> None:
        self.retriever.stage2.cache.evict(key)
