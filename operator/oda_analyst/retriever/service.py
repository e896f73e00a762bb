"""The Reflect Agent: one request through the Fig. 5 state machine, checkpointed at each step.

``query`` starts a request; ``clarify`` answers the question a request asked and resumes it from
the stage that asked — from the checkpoint store, so it works after a restart too; ``download_csv``
returns a large result by its handle. Every transition is saved before the next step runs.

With a model (``LLMClient.from_settings``: ODA_LLM_BASE_URL and ODA_LLM_MODEL set) every stage
uses it: the time window when the parser cannot read it (``decide_time``), metric grounding
(``LLMGroundingHooks``: Algorithm 1's reflection loop), the completeness check and bounded
SELECT/GROUP BY repair of every validated query, and, for a question the rules cannot plan, SPARQL
written by the model. Every call is counted in the request's ``TokenLedger`` (the answer's
``tokens``). The model never blocks the rule path: at its first failed call (endpoint down,
request refused) the request continues, or starts over, without it, and a warning says so; a
server found unusable is not asked again by later requests for a while (``LLMClient.unusable``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import OdaError, QueryRejectedError, UsageError, VKGBuildError
from oda_analyst.lake import Lake
from oda_analyst.llm import LLMClient, LLMError, TokenLedger
from oda_analyst.observability import instrument, metrics
from oda_analyst.observability.tracing import current_trace_id, request_trace, setup_tracing
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.reading.model import Reading
from oda_analyst.reading.read import MAX_QUESTION_CHARS, check_reading, read, rules_of, with_rules
from oda_analyst.reading.types import ParsedWindow
from oda_analyst.retriever.answer import AnswerPayload, ClarificationPayload, summarise
from oda_analyst.retriever.checkpoint import CheckpointStore, open_checkpoint_store
from oda_analyst.retriever.grounding.embeddings import index_pending, load_embedder
from oda_analyst.retriever.model_paths.repair import ReviewOutcome
from oda_analyst.retriever.model_paths.review import review_with_stages
from oda_analyst.retriever.model_paths.sparql_model import GroundedRequest as ModelGrounding
from oda_analyst.retriever.model_paths.sparql_model import (
    SparqlGenerationError,
    generate_sparql,
)
from oda_analyst.retriever.model_paths.stages import ModelStages, SelectedHooks
from oda_analyst.retriever.model_paths.time_model import decide_time
from oda_analyst.retriever.monthscale import Pushdown
from oda_analyst.retriever.provenance import EXTRA_KEY, capture
from oda_analyst.retriever.scanprogress import reporter
from oda_analyst.retriever.stages.stage1 import (
    Answer,
    Clarify,
    GuardedHooks,
    ModelOutageError,
    Ready,
    Reject,
    Stage1Result,
    run_stage1,
)
from oda_analyst.retriever.stages.stage2 import Stage2, authored_request
from oda_analyst.retriever.stages.stage3 import ModelSparqlError, PlanRun, Review
from oda_analyst.retriever.state import (
    Clarification,
    ErrorInfo,
    RequestState,
    Stage,
    advance,
    new_request,
    resume,
)
from oda_analyst.retriever.understood import plan_unit, sentence
from oda_analyst.sparql.results import open_csv
from oda_analyst.vkg.cache import VKGCache
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.protocol import GraphStore

Progress = Callable[[str], None]
MAX_ANSWER_CHARS = 1000
MONTHS_TTL_S = 60.0  # how long the lake's metric-by-month listing is reused


def _quiet(_: str) -> None:
    return None


# --- one request's use of the model ----------------------------------------------------------


@dataclass
class _Model:
    """The model as one request uses it: the client, the request's ledger, and — once a call
    has failed (the ledger counts it) — why the rest of the request goes without it."""

    client: LLMClient
    ledger: TokenLedger
    down: str | None = None

    @property
    def live(self) -> bool:
        return self.down is None

    def failed(self, notes: Sequence[str]) -> bool:
        """Whether a call has failed so far; the first time, remember why (the last note)."""
        if self.down is None and self.ledger.total()["failed_calls"]:
            self.down = notes[-1] if notes else "a model call failed"
        return self.down is not None

    def warning(self) -> str:
        return f"the model failed, so the rest of this request ran by the rules alone: {self.down}"


# --- the service ---------------------------------------------------------------------------------


class Retriever:
    """The retrieval service behind the CLI and the MCP tools: rules and embeddings alone, or
    with a model at every stage when one is configured (``llm``: default from the settings)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        lake: Lake | None = None,
        store: GraphStore | None = None,
        checkpoints: CheckpointStore | None = None,
        llm: LLMClient | None = None,
        stages: ModelStages | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        setup_tracing(self.settings)
        self.llm = llm if llm is not None else LLMClient.from_settings(self.settings)
        # Which stages ask the model, and where it is forced (ODA_LLM_STAGES, ODA_LLM_FORCE).
        self.stages = stages or ModelStages.from_settings(self.settings)
        self.lake = lake or Lake.from_settings(self.settings)
        self._months: tuple[float, dict[tuple[str, str], tuple[str, ...]]] | None = None
        self.store = store or open_store(self.settings)
        self.checkpoints = checkpoints or open_checkpoint_store(self.settings)
        out_dir = self.settings.data_dir / "results"
        out_dir.mkdir(parents=True, exist_ok=True)
        self.stage2 = Stage2(
            lake=self.lake,
            store=self.store,
            cache=VKGCache(
                self.store,
                self.settings.vkg_cache_capacity,
                background_drops=True,
                max_builds=self.settings.vkg_max_parallel_builds,
            ),
            out_dir=out_dir,
            row_limit=self.settings.row_limit,
            pushdown=Pushdown.from_settings(self.settings),
        )

    # --- public API ----------------------------------------------------------------------

    def query(self, question: str, *, user: str = "anonymous", as_of: datetime | None = None,
              progress: Progress = _quiet, reading: Reading | None = None
              ) -> AnswerPayload:  # fmt: skip
        """Answer a new question: completed, clarification, rejected or failed.

        ``reading``: the question as the caller already read it (the coordinator reads once per
        request); it must be of this question. Without one the question is read here."""
        if not question.strip():
            raise UsageError("the question is empty", hint="ask e.g. 'node power of node 900 "
                             "on 1 June 2022 from 20:00 to 23:59'")  # fmt: skip
        _bounded("question", question, MAX_QUESTION_CHARS)
        moment = as_of or datetime.now(UTC)
        if reading is None:
            reading = read(question, moment)
        elif reading.text != question:
            raise UsageError("the reading sent is of another question",
                             hint="send the Reading of this question, or none")  # fmt: skip
        check_reading(reading)
        state = new_request(question, user=user, as_of=moment,
                            reading=reading.model_dump(mode="json"))  # fmt: skip

        def run() -> AnswerPayload:
            started = self._save(advance(state, Stage.INPUT_VALIDATION, note="new request"))
            return self._continue(started, progress)

        return self._traced("retriever.query", state, run)

    def clarify(self, request_id: str, answer: str, *, user: str = "anonymous",
                progress: Progress = _quiet) -> AnswerPayload:  # fmt: skip
        """Answer the clarification a request asked and resume it where it stopped."""
        _bounded("answer", answer, MAX_ANSWER_CHARS)
        state = self.checkpoints.load(request_id)
        if state.user != user:
            raise UsageError(
                f"request {request_id} belongs to another user",
                hint="clarify your own requests; ask the question again",
            )
        if state.stage is not Stage.WAITING_FOR_CLARIFICATION:
            raise UsageError(
                f"request {request_id} is {state.status}; it asks no question",
                hint="only a request waiting for clarification can be clarified; ask again",
            )
        waiting = state
        return self._traced(
            "retriever.clarify",
            waiting,
            lambda: self._continue(self._save(resume(waiting, answer)), progress),
        )

    def understand(self, question: str, *, as_of: datetime, answers: Sequence[Answer] = ()
                   ) -> tuple[Stage1Result, list[str]]:  # fmt: skip
        """Stage 1 by the rules as ``query`` runs it without a model (typos read, a catalogue
        twin settled by what the lake holds), and its notes: for a caller that must know the
        plans before the request runs (the operator builds their graphs first)."""
        reading = read(question, as_of)
        s1 = self._run_stage1(reading, answers=answers)
        held = self._only_held(s1)
        if held is None:
            return s1, _typos(reading)
        s1 = self._run_stage1(reading, answers=[*answers, Answer("metric", held[0])])
        return s1, [*_typos(reading), held[1]]

    def download_csv(self, handle: str, *, user: str = "anonymous") -> Path:
        """The CSV file of a large result, by the handle an answer gave."""
        return open_csv(handle, out_dir=self.stage2.out_dir, user=user)

    def status(self, request_id: str) -> RequestState:
        return self.checkpoints.load(request_id)

    # --- the state machine ---------------------------------------------------------------

    def _traced(self, name: str, state: RequestState, run: Callable[[], AnswerPayload]
                ) -> AnswerPayload:  # fmt: skip
        """``run`` inside the request's span (its trace file named in the answer's ``trace``),
        counted in ``oda_requests_total`` by its status."""
        attrs = {
            "oda.request_id": state.request_id, "oda.question": state.question,
            "oda.as_of": state.as_of.isoformat(), "user.id": state.user,
            "session.id": state.request_id, "langfuse.trace.name": name,
            "langfuse.observation.input": state.question,
        }  # fmt: skip
        try:
            with request_trace(name, settings=self.settings, attributes=attrs,
                               observation="retriever") as handle:  # fmt: skip
                payload = run()
                instrument.annotate(handle.span, {
                    "oda.status": payload.status, "oda.sparql": payload.sparql,
                    "oda.error.code": (payload.error or {}).get("code"),
                    "langfuse.observation.output": payload.answer,
                })  # fmt: skip
        except BaseException:
            metrics.request_done("retriever", "error")
            raise
        metrics.request_done("retriever", payload.status)
        asked = Reading.model_validate(state.reading).asked() if state.reading else None
        return payload.model_copy(update={"trace": str(handle.path), "asked": asked})

    def _save(self, state: RequestState) -> RequestState:
        return self.checkpoints.save(state)

    def _continue(self, state: RequestState, progress: Progress) -> AnswerPayload:
        timings: dict[str, float] = {}
        ledger = TokenLedger()
        model = _Model(self.llm, ledger) if self.llm is not None else None
        if model is not None:  # found unusable by an earlier request: not asked again for now
            model.down = model.client.unusable()
        asked = (*state.artifacts.answered, state.artifacts.clarification)
        answers = [Answer(c.field.value, c.answer) for c in asked if c is not None and c.answer]
        progress("input validation: entities, time window, metrics")
        if index_pending(load_catalogue()):
            progress("first question here: embedding the metric catalogue (once, ~15 s)")
        with _timed(timings, "input_validation"):
            s1, model_notes = self._stage1(state, answers, model)
            held = self._only_held(s1)
            if held is not None:  # the catalogue's twins: the lake decides which one it is
                s1, model_notes = self._stage1(state, [*answers, Answer("metric", held[0])], model)
                model_notes = [*model_notes, held[1]]
        warnings = [*model_notes, *s1.warnings]
        arts = s1.artifacts()
        outcome = s1.outcome
        if isinstance(outcome, Clarify):
            ask = Clarification(question=outcome.question, field=outcome.field,
                                candidates=outcome.candidates)  # fmt: skip
            state = self._save(advance(state, Stage.WAITING_FOR_CLARIFICATION,
                                       note=f"asks about the {outcome.field}", clarification=ask,
                                       **arts))  # fmt: skip
            return AnswerPayload(
                status="clarification", request_id=state.request_id, answer=outcome.question,
                clarification=ClarificationPayload(field=outcome.field, question=outcome.question,
                                                   candidates=list(outcome.candidates)),
                warnings=warnings, timings=timings, tokens=ledger.snapshot(),
            )  # fmt: skip
        if isinstance(outcome, Reject) and outcome.unplanned and model is not None and model.live:
            return self._authored(state, s1, model, warnings, timings, progress)
        if isinstance(outcome, Reject):
            err = QueryRejectedError(outcome.message, outcome.hint)
            state = self._save(advance(state, Stage.REJECTED, note="invalid request",
                                       error=ErrorInfo.from_error(err), **arts))  # fmt: skip
            return self._terminal(state, "rejected", err, warnings, timings, ledger)
        assert isinstance(outcome, Ready)
        warnings.extend(outcome.notes)
        state = self._save(
            advance(
                state,
                Stage.GENERATION,
                note="plans ready",
                **arts,
                plan=[p.model_dump(mode="json") for p in outcome.plans],
            )
        )
        writes = model is not None and model.live and self.stages.forces("sparql")
        review = self._reviewer(state.question, model, authored=writes)
        plans = outcome.plans
        instants = outcome.instants or (None,) * len(plans)
        rid = state.request_id

        def run_plans() -> list[PlanRun]:
            runs = []
            for i, plan in enumerate(plans):
                progress(f"plan {i + 1}/{len(plans)}: VKG, SPARQL, execution")
                scanned = reporter(rid, progress, plan=f"{i + 1}/{len(plans)}")
                with _timed(timings, "vkg_sparql_execution"):
                    write = self._writer(state.question, s1, plan, model) if writes else None
                    runs.append(self.stage2.run(plan, user=state.user, request_id=f"{rid}-{i + 1}",
                                                review=review, instant=instants[i],
                                                scan_progress=scanned, write=write))  # fmt: skip
            return runs

        return self._generate_and_execute(state, run_plans, warnings, timings, ledger)

    def _run_stage1(self, reading: Reading, **kwargs: Any) -> Stage1Result:
        """Stage 1 with what the lake holds per metric and month, when the lake can be listed."""
        try:
            months: dict[tuple[str, str], tuple[str, ...]] | None = self._metric_months()
        except OdaError:
            months = None  # an unreadable lake fails at the scan with its own message
        return run_stage1(reading, lake_months=months, **kwargs)

    def _metric_months(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """``Lake.metric_months``, listed at most once a minute: a lake of years lists hundreds of
        folders, and which metrics a month holds changes when a month is added, not per request.
        (The answers' freshness does not rest on it: the graph key fingerprints the files.)"""
        now = time.monotonic()
        if self._months is None or now - self._months[0] > MONTHS_TTL_S:
            self._months = (now, self.lake.metric_months())
        return self._months[1]

    def _only_held(self, s1: Stage1Result) -> tuple[str, str] | None:
        """When a phrase names several catalogue metrics exactly ('pue'; a legacy and an
        ``s21.`` Slurm name) and the lake holds only one of them in the asked months: that
        one, and the warning saying so. A phrase that only resembles metrics still asks."""
        ask, time = s1.outcome, s1.time
        if not isinstance(ask, Clarify) or ask.field != "metric" or time is None:
            return None
        if not ask.candidates or any(c.get("score") != 1.0 for c in ask.candidates):
            return None
        if not time.windows:
            return None
        try:
            months = self._metric_months()
        except OdaError:
            return None
        wanted = {f"{t:%y-%m}" for w in time.windows for t in (w.start, w.end)}
        held = [c for c in ask.candidates
                if wanted & set(months.get((str(c["plugin"]), str(c["metric"])), ()))]  # fmt: skip
        if not held:
            # 'PUE readings on 20 May': neither twin has data then, so either answers 'no data'
            # (asking which would be a question whose every answer is the same)
            names = " and ".join(f"{c['plugin']}/{c['metric']}" for c in ask.candidates)
            return (str(ask.candidates[0]["metric"]),
                    f"the lake holds none of {names} for the asked window")  # fmt: skip
        if len(held) != 1:
            return None
        name = str(held[0]["metric"])
        others = ", ".join(str(c["metric"]) for c in ask.candidates if c is not held[0])
        return (
            name,
            f"chose {held[0]['plugin']}/{name}: of the metrics this phrase names "
            f"({others} too), it is the only one the lake holds for the asked window",
        )

    def _stage1(self, state: RequestState, answers: Sequence[Answer], model: _Model | None
                ) -> tuple[Stage1Result, list[str]]:  # fmt: skip
        """Stage 1, with the model when there is one: its time window (the parser's when they
        disagree, see ``decide_time``) and its grounding hooks. At the model's first failed
        call stage 1 runs again by the rules alone: a weak prior is not the rules' answer."""
        reading = (Reading.model_validate(state.reading) if state.reading is not None
                   else read(state.question, state.as_of))  # fmt: skip
        s1, notes = self._stage1_of(with_rules(reading), answers, model)
        return s1, [*_typos(reading), *notes]

    def _stage1_of(self, reading: Reading, answers: Sequence[Answer], model: _Model | None
                   ) -> tuple[Stage1Result, list[str]]:  # fmt: skip
        run = functools.partial(self._run_stage1, reading, answers=answers)
        if model is None:
            return run(), []
        if not model.live:
            return run(), [model.warning()]
        said = rules_of(reading)
        timer = model.client if self.stages.uses("time") else None
        # the model reads the retrieval's words (a prompt may see text); its window is held to
        # the reader's parse (decide_time)
        decision = decide_time(timer, said.text, reading.as_of, ledger=model.ledger,
                               when_parsed=self.stages.forces("time"))  # fmt: skip
        if model.failed(decision.notes):
            return run(), [model.warning()]
        if not self.stages.grounding:
            return run(time=decision.parse), list(decision.notes)
        selected = SelectedHooks(model.client, self.stages, ledger=model.ledger)
        hooks = GuardedHooks(selected, model.failed)
        try:
            s1 = run(hooks=hooks, time=decision.parse)
        except ModelOutageError:
            return run(time=decision.parse), [*decision.notes, model.warning()]
        return s1, [*decision.notes, *hooks.inner.notes]

    def _reviewer(self, question: str, model: _Model | None, *, authored: bool = False
                  ) -> Review | None:  # fmt: skip
        """The completeness check + bounded repair of each validated query, while the model
        answers; a failed review keeps the validated query (``review_sparql`` says so). A
        compiled plan's query may only gain columns; model-written SPARQL (``authored``) may
        also be regrouped, within SELECT/GROUP BY."""
        if model is None or not model.live:
            return None
        if not (self.stages.uses("completeness") or self.stages.uses("repair")):
            return None

        def review(sparql: str, graph: str, columns: tuple[str, ...]) -> ReviewOutcome:
            if not model.live:
                skipped = "completeness check skipped: the model failed earlier in this request"
                return ReviewOutcome(sparql, None, None, (skipped,))
            outcome = review_with_stages(
                model.client, self.stages, question=question, sparql=sparql, graph_iri=graph,
                columns=columns, ledger=model.ledger, additive_only=not authored,
            )  # fmt: skip
            model.failed(outcome.notes)
            return outcome

        return review

    def _writer(self, question: str, s1: Stage1Result, plan: QueryPlan, model: _Model | None
                ) -> Callable[[str], str]:  # fmt: skip
        """The model forced on SPARQL: it writes the plan's query for the plan's graph, from
        the plan's metrics and window and the question's entities (``generate_sparql``)."""
        assert model is not None and s1.entities is not None
        window = plan.window
        windows = () if window is None else (ParsedWindow(window.start, window.end, ""),)
        grounded = ModelGrounding(tuple(m.metric for m in plan.metrics), s1.entities, windows)

        def write(graph: str) -> str:
            try:
                written = generate_sparql(
                    model.client, question=question, grounded=grounded, graph_iri=graph,
                    embedder=load_embedder(), ledger=model.ledger,
                )  # fmt: skip
            except LLMError as exc:  # forced: no compiled query to fall back to
                model.failed([exc.message])
                raise
            return written.sparql

        return write

    def _authored(self, state: RequestState, s1: Stage1Result, model: _Model,
                  warnings: list[str], timings: dict[str, float], progress: Progress
                  ) -> AnswerPayload:  # fmt: skip
        """The paper's path for a question the rules cannot plan: the model writes SPARQL from
        the ontology paths and the top-k curated examples, validated (and regenerated with the
        diagnostics) within its budget, over a VKG of the grounded entities, metrics, window."""
        assert s1.entities is not None and s1.time is not None and s1.grounding is not None
        assert isinstance(s1.outcome, Reject)
        entities, windows = s1.entities, s1.time.windows
        metrics = tuple(s1.grounding.metrics())
        grounded = ModelGrounding(tuple(m for _, m in metrics), entities, windows)
        warnings.append(f"no rule-based plan ({s1.outcome.message}); the model writes the SPARQL")
        state = self._save(advance(state, Stage.GENERATION, note="no plan: model-written SPARQL",
                                   **s1.artifacts()))  # fmt: skip
        review = self._reviewer(state.question, model, authored=True)

        def write(graph: str) -> str:
            progress("the model writes the SPARQL; the validator checks it")
            try:
                written = generate_sparql(
                    model.client, question=state.question, grounded=grounded, graph_iri=graph,
                    embedder=load_embedder(), ledger=model.ledger,
                )  # fmt: skip
            except LLMError as exc:  # no rule path to fall back to: the request fails with it
                model.failed([exc.message])
                raise
            return written.sparql

        def run_authored() -> list[PlanRun]:
            with _timed(timings, "vkg_sparql_execution"):
                request = authored_request(entities, metrics, windows)
                run = self.stage2.run_authored(
                    request, write, user=state.user, request_id=f"{state.request_id}-1",
                    review=review,
                )  # fmt: skip
            return [run]

        return self._generate_and_execute(state, run_authored, warnings, timings, model.ledger)

    def _generate_and_execute(
        self, state: RequestState, run: Callable[[], list[PlanRun]], warnings: list[str],
        timings: dict[str, float], ledger: TokenLedger,
    ) -> AnswerPayload:  # fmt: skip
        """Generation → Execution → Completed, or Failed with the error that stopped it."""
        try:
            runs = run()
        except SparqlGenerationError as exc:
            return self._failed(state, ModelSparqlError(exc), warnings, timings, ledger)
        except (VKGBuildError, QueryRejectedError, LLMError, OdaError) as err:
            return self._failed(state, err, warnings, timings, ledger)
        first = runs[0]
        state = self._save(advance(state, Stage.EXECUTION, note="queries validated",
                                   sparql=first.compiled.sparql,
                                   validation=first.validation.to_dict()))  # fmt: skip
        results = [r.to_json() for r in runs]
        for res, r in zip(results, runs, strict=True):
            res["understood_as"] = sentence(r.plan, instant=r.instant) if r.plan else None
            res["unit"] = plan_unit(r.plan) if r.plan is not None else None
        for r in runs:
            warnings.extend(r.notes)
        record = capture(state, runs, results, lake=self.lake.location, tokens=ledger.snapshot(),
                         model=None if self.llm is None else self.llm.model,
                         trace_id=current_trace_id())  # fmt: skip
        extra = {**state.artifacts.extra, EXTRA_KEY: record.to_json()}
        state = self._save(advance(state, Stage.COMPLETED, note=f"{len(runs)} result(s)",
                                   extra=extra))  # fmt: skip
        head = results[0]
        said = [r["understood_as"] for r in results if r["understood_as"]]
        return AnswerPayload(
            status="completed", request_id=state.request_id, answer=summarise(results),
            understood_as="; then ".join(said) + "." if said else None,
            columns=head["columns"], rows=head["rows"], row_count=head["row_count"],
            csv=head["csv"], csv_handle=head["csv_handle"], sparql=head["sparql"],
            plan=head["plan"], results=results,
            artifacts=[r["csv"] for r in results if r["csv"]],
            warnings=list(dict.fromkeys(warnings)), timings=timings, tokens=ledger.snapshot(),
            provenance=record.to_json(),
        )  # fmt: skip

    def _failed(self, state: RequestState, err: OdaError, warnings: list[str],
                timings: dict[str, float], ledger: TokenLedger) -> AnswerPayload:  # fmt: skip
        state = self._save(advance(state, Stage.FAILED, note=type(err).__name__,
                                   error=ErrorInfo.from_error(err)))  # fmt: skip
        return self._terminal(state, "failed", err, warnings, timings, ledger)

    def _terminal(self, state: RequestState, status: Any, err: OdaError, warnings: list[str],
                  timings: dict[str, float], ledger: TokenLedger) -> AnswerPayload:  # fmt: skip
        text = err.message + (f" ({err.hint})" if err.hint else "")
        plans = state.artifacts.plan
        plan = plans[0] if isinstance(plans, list) and plans else None
        return AnswerPayload(
            status=status, request_id=state.request_id, answer=text, error=err.to_dict(),
            plan=plan if isinstance(plan, dict) else None, sparql=state.artifacts.sparql,
            warnings=list(dict.fromkeys(warnings)), timings=timings, tokens=ledger.snapshot(),
        )  # fmt: skip


def _typos(reading: Reading) -> list[str]:
    return list(reading.retrieval.typos) if reading.retrieval is not None else []


def _bounded(what: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise UsageError(
            f"the {what} is {len(text)} characters long; at most {limit} are read",
            hint=f"shorten the {what}: one metric, its entities and a time window",
        )


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        with instrument.stage("retriever", name):
            yield
    finally:
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - start, 4)
