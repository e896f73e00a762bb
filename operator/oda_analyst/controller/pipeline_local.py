"""The pipeline port over the retriever service in this process (until the coordinator's)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from oda_analyst.config import Settings
from oda_analyst.controller.port import GraphInfo, GraphNeed, Understood
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.stages import coverage
from oda_analyst.retriever.stages.stage1 import Answer, Clarify, Ready, Stage1Result, run_stage1
from oda_analyst.retriever.understood import sentence
from oda_analyst.vkg.request import from_plan


class RetrieverPipeline:
    """Stage 1 and retrieval by ``Retriever``; graphs through its cache (the shared store)."""

    def __init__(self, settings: Settings) -> None:
        self.retriever = Retriever(settings)

    def understand(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[tuple[str, str]]
    ) -> Understood:
        given = [Answer(f, t) for f, t in answers]  # type: ignore[arg-type]
        s1 = run_stage1(question, as_of=as_of, answers=given)
        # The retriever settles the catalogue's twin metrics by what the lake holds; the
        # operator must understand the question exactly as retrieval will.
        held = self.retriever._only_held(s1)
        if held is not None:
            s1 = run_stage1(question, as_of=as_of, answers=[*given, Answer("metric", held[0])])
        return self._understood(s1, user)

    def _understood(self, s1: Stage1Result, user: str) -> Understood:
        out = s1.outcome
        if isinstance(out, Clarify):
            return Understood("clarification", field=out.field, question=out.question,
                              candidates=tuple(out.candidates), warnings=s1.warnings)  # fmt: skip
        if not isinstance(out, Ready):
            return Understood("rejected", message=out.message, hint=out.hint,
                              warnings=s1.warnings)  # fmt: skip
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
                          graphs=tuple(graphs), warnings=(*s1.warnings, *out.notes))  # fmt: skip

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
