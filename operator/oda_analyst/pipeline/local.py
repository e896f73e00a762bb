"""The pipeline port's work, in the analyst's process: the retriever service for stage 1 and
the graphs, the coordinator for queries that ask for analysis, the paper's baselines on request.

Synchronous (the retriever is): the analyst's HTTP service (``pipeline.http``) calls it in
worker threads, several at once. The operator never imports this: it reaches it through the
port over HTTP (``controller.port_http``).

A query's own model endpoint (``spec.model``) becomes the LLM settings of a ``Retriever`` (and a
coordinator) of its own, sharing the lake, the graph store and the checkpoints with the
operator's: its model-backed stages ask that endpoint, and a failing endpoint makes them fall
back to the rules with a warning, as they do for the operator's own model.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast, get_args

from oda_analyst.backends import Backend, open_backend
from oda_analyst.config import Settings
from oda_analyst.controller.port import (
    MAX_FILES,
    Ask,
    GraphInfo,
    GraphNeed,
    ModelEndpoint,
    Retrieved,
    Understood,
)
from oda_analyst.errors import OdaError
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.llm import LLMClient
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.pipeline.coordinated import coordinated_answer
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
        self._lock = threading.Lock()  # the two caches above, from many worker threads

    def _for_model(self, model: ModelEndpoint | None) -> tuple[Settings, Retriever]:
        if model is None:
            return self.settings, self.retriever
        with self._lock:
            return self._override(model)

    def _override(self, model: ModelEndpoint) -> tuple[Settings, Retriever]:
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
    ) -> Retrieved:  # fmt: skip
        ask = ask or Ask()
        if ask.backend != "oda":
            return _with_table(self._baseline(ask.backend, question, user=user, as_of=as_of))
        settings, retriever = self._for_model(ask.model)
        if ask.analysis:
            parent = settings.data_dir / "pipeline"
            parent.mkdir(parents=True, exist_ok=True)
            out_dir = Path(tempfile.mkdtemp(prefix="answer-", dir=parent))
            try:
                answer = coordinated_answer(settings, retriever, question, user=user,
                                           as_of=as_of, answers=answers, out_dir=out_dir,
                                           sandbox=ask.sandbox)  # fmt: skip
                return _with_table(answer, files=_files(out_dir))
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
        got = retriever.query(question, user=user, as_of=as_of)
        for text in answers:
            if got.status != "clarification":
                break
            got = retriever.clarify(got.request_id, text, user=user)
        return _with_table(got.model_dump(mode="json"))

    def _baseline(self, name: str, question: str, *, user: str, as_of: datetime
                  ) -> dict[str, Any]:  # fmt: skip
        """A baseline answers in one shot (it asks nothing back), from the same lake."""
        with self._lock:
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


def _files(out_dir: Path) -> tuple[tuple[str, bytes], ...]:
    """What the coordinator left in ``out_dir`` (charts, scripts, tables), by relative path."""
    found = sorted(p for p in out_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return tuple((p.relative_to(out_dir).as_posix(), p.read_bytes()) for p in found[:MAX_FILES])


def _with_table(answer: dict[str, Any], files: tuple[tuple[str, bytes], ...] = ()) -> Retrieved:
    """The answer with its whole result table when the rows are not inline: a large result
    is a CSV file on this side, which the operator cannot read."""
    table = None
    csv_path = answer.get("csv")
    if answer.get("rows") is None and csv_path and Path(csv_path).is_file():
        table = Path(csv_path).read_bytes()
    return Retrieved(answer=answer, table=table, files=files)
