"""The pipeline port in the operator's process: the retriever service for stage 1 and the
graphs, the coordinator for queries that ask for analysis, the paper's baselines on request.

A query's own model endpoint (``spec.model``) becomes the LLM settings of a ``Retriever`` (and a
coordinator) of its own, sharing the lake, the graph store and the checkpoints with the
operator's: its model-backed stages ask that endpoint, and a failing endpoint makes them fall
back to the rules with a warning, as they do for the operator's own model.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast, get_args

from oda_analyst.backends import Backend, open_backend
from oda_analyst.config import Settings
from oda_analyst.controller.coordinated import coordinated_answer
from oda_analyst.controller.port import Ask, GraphInfo, GraphNeed, ModelEndpoint, Understood
from oda_analyst.errors import OdaError
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.llm import LLMClient
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.stages import coverage
from oda_analyst.retriever.stages.stage1 import Answer, Clarify, Ready, Stage1Result
from oda_analyst.retriever.stages.stage1 import Field as Stage1Field
from oda_analyst.retriever.understood import sentence
from oda_analyst.vkg.request import from_plan

STAGE1_FIELDS = frozenset(get_args(Stage1Field))


class LocalPipeline:
    """Stage 1 and retrieval by ``Retriever``; graphs through its cache (the shared store)."""

    MAX_OVERRIDES = 4  # retrievers kept for queries' own model endpoints (least recent go)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.retriever = Retriever(settings)
        self._overrides: OrderedDict[ModelEndpoint, tuple[Settings, Retriever]] = OrderedDict()
        self._baselines: dict[str, Backend] = {}

    def _for_model(self, model: ModelEndpoint | None) -> tuple[Settings, Retriever]:
        if model is None:
            return self.settings, self.retriever
        found = self._overrides.pop(model, None)
        if found is None:
            settings = self.settings.model_copy(
                update={"llm_base_url": model.base_url, "llm_model": model.name}
            )
            base = self.retriever
            found = settings, Retriever(settings, lake=base.lake, store=base.store,
                                        checkpoints=base.checkpoints)  # fmt: skip
        self._overrides[model] = found
        while len(self._overrides) > self.MAX_OVERRIDES:
            self._overrides.popitem(last=False)
        return found

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
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[str],
        ask: Ask | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        ask = ask or Ask()
        if ask.backend != "oda":
            return self._baseline(ask.backend, question, user=user, as_of=as_of)
        settings, retriever = self._for_model(ask.model)
        if ask.analysis:
            out_dir = ask.out_dir or settings.data_dir / "operator" / uuid.uuid4().hex
            return coordinated_answer(settings, retriever, question, user=user, as_of=as_of,
                                      answers=answers, out_dir=out_dir,
                                      sandbox=ask.sandbox)  # fmt: skip
        answer = retriever.query(question, user=user, as_of=as_of)
        for text in answers:
            if answer.status != "clarification":
                break
            answer = retriever.clarify(answer.request_id, text, user=user)
        return answer.model_dump(mode="json")

    def _baseline(self, name: str, question: str, *, user: str, as_of: datetime
                  ) -> dict[str, Any]:  # fmt: skip
        """A baseline answers in one shot (it asks nothing back), from the same lake."""
        backend = self._baselines.get(name)
        if backend is None:
            backend = self._baselines[name] = open_backend(name, self.settings)
        answer = backend.query(question, user=user, as_of=as_of)
        dumped: dict[str, Any] = answer.model_dump(mode="json")
        return dumped

    def check_model(self, model: ModelEndpoint) -> str | None:
        settings = self.settings.model_copy(
            update={"llm_base_url": model.base_url, "llm_model": model.name}
        )
        try:
            client = LLMClient.from_settings(settings, connect_timeout_s=5.0,
                                             retry=RetryPolicy(max_retries=0))  # fmt: skip
        except OdaError as err:
            return err.message
        if client is None:  # pragma: no cover - both fields are set above
            return "no model endpoint"
        with client:
            try:
                client.check_model()
            except OdaError as err:
                return err.message
        return None

    def graph(self, key: str) -> GraphInfo | None:
        entry = self.retriever.stage2.cache.entry(key)
        if entry is None:
            return None
        return GraphInfo(key=entry.key, named_graph=entry.graph, triples=entry.triples,
                         bytes=entry.bytes, created=entry.created,
                         last_access=entry.last_access)  # fmt: skip

    def drop_graph(self, key: str) -> None:
        self.retriever.stage2.cache.evict(key)
