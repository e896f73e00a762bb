"""The Reflect Agent: one request through the Fig. 5 state machine, checkpointed at each step.

``query`` starts a request; ``clarify`` answers the question a request asked and resumes it from
the stage that asked — from the checkpoint store, so it works after a restart too; ``download_csv``
returns a large result by its handle. Every transition is saved before the next step runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import OdaError, QueryRejectedError, UsageError, VKGBuildError
from oda_analyst.lake import Lake
from oda_analyst.llm.tokens import TokenLedger
from oda_analyst.retriever.answer import AnswerPayload, ClarificationPayload, summarise
from oda_analyst.retriever.checkpoint import CheckpointStore, open_checkpoint_store
from oda_analyst.retriever.stage1 import Answer, Clarify, Ready, Reject, run_stage1
from oda_analyst.retriever.stage2 import PlanRun, Stage2
from oda_analyst.retriever.state import (
    Clarification,
    ErrorInfo,
    RequestState,
    Stage,
    advance,
    new_request,
    resume,
)
from oda_analyst.sparql.results import open_csv
from oda_analyst.vkg.cache import VKGCache
from oda_analyst.vkg.store import GraphStore, open_store

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


class Retriever:
    """The retrieval service behind the CLI and the MCP tools (no model needed)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        lake: Lake | None = None,
        store: GraphStore | None = None,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.lake = lake or Lake.from_settings(self.settings)
        self.store = store or open_store(self.settings)
        self.checkpoints = checkpoints or open_checkpoint_store(self.settings)
        out_dir = self.settings.data_dir / "results"
        out_dir.mkdir(parents=True, exist_ok=True)
        self.stage2 = Stage2(
            lake=self.lake,
            store=self.store,
            cache=VKGCache(self.store, self.settings.vkg_cache_capacity, background_drops=True),
            out_dir=out_dir,
            row_limit=self.settings.row_limit,
        )

    # --- public API ----------------------------------------------------------------------

    def query(self, question: str, *, user: str = "anonymous", as_of: datetime | None = None,
              progress: Progress = _quiet) -> AnswerPayload:  # fmt: skip
        """Answer a new question: completed, clarification, rejected or failed."""
        if not question.strip():
            raise UsageError("the question is empty", hint="ask e.g. 'node power of node 900 "
                             "on 1 June 2022 from 20:00 to 23:59'")  # fmt: skip
        state = new_request(question, user=user, as_of=as_of or datetime.now(UTC))
        state = self._save(advance(state, Stage.INPUT_VALIDATION, note="new request"))
        return self._continue(state, progress)

    def clarify(self, request_id: str, answer: str, *, user: str = "anonymous",
                progress: Progress = _quiet) -> AnswerPayload:  # fmt: skip
        """Answer the clarification a request asked and resume it where it stopped."""
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
        state = self._save(resume(state, answer))
        return self._continue(state, progress)

    def download_csv(self, handle: str, *, user: str = "anonymous") -> Path:
        """The CSV file of a large result, by the handle an answer gave."""
        return open_csv(handle, out_dir=self.stage2.out_dir, user=user)

    def status(self, request_id: str) -> RequestState:
        return self.checkpoints.load(request_id)

    # --- the state machine ---------------------------------------------------------------

    def _save(self, state: RequestState) -> RequestState:
        return self.checkpoints.save(state)

    def _continue(self, state: RequestState, progress: Progress) -> AnswerPayload:
        timings: dict[str, float] = {}
        ledger = TokenLedger()
        asked = (*state.artifacts.answered, state.artifacts.clarification)
        answers = [Answer(c.field.value, c.answer) for c in asked if c is not None and c.answer]
        progress("input validation: entities, time window, metrics")
        with _timed(timings, "input_validation"):
            s1 = run_stage1(state.question, as_of=state.as_of, answers=answers)
        warnings = list(s1.warnings)
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
        runs: list[PlanRun] = []
        try:
            for i, plan in enumerate(outcome.plans):
                progress(f"plan {i + 1}/{len(outcome.plans)}: VKG, SPARQL, execution")
                with _timed(timings, "vkg_sparql_execution"):
                    runs.append(
                        self.stage2.run(
                            plan, user=state.user, request_id=f"{state.request_id}-{i + 1}"
                        )
                    )
        except (VKGBuildError, QueryRejectedError, OdaError) as err:
            state = self._save(advance(state, Stage.FAILED, note=type(err).__name__,
                                       error=ErrorInfo.from_error(err)))  # fmt: skip
            return self._terminal(state, "failed", err, warnings, timings, ledger)
        first = runs[0]
        state = self._save(advance(state, Stage.EXECUTION, note="queries validated",
                                   sparql=first.compiled.sparql,
                                   validation=first.validation.to_dict()))  # fmt: skip
        results = [r.to_json() for r in runs]
        for r in runs:
            warnings.extend(r.notes)
        state = self._save(advance(state, Stage.COMPLETED, note=f"{len(runs)} result(s)"))
        head = results[0]
        return AnswerPayload(
            status="completed", request_id=state.request_id, answer=summarise(results),
            columns=head["columns"], rows=head["rows"], row_count=head["row_count"],
            csv=head["csv"], csv_handle=head["csv_handle"], sparql=head["sparql"],
            plan=head["plan"], results=results,
            artifacts=[r["csv"] for r in results if r["csv"]],
            warnings=list(dict.fromkeys(warnings)), timings=timings, tokens=ledger.snapshot(),
        )  # fmt: skip

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


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - start, 4)
