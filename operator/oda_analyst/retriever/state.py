"""The retriever's request lifecycle (paper §III-C "System lifecycle", Fig. 5) as pure functions.

A request is a ``RequestState``: the paper's tuple S = (stage, status, I) plus who asked what and
when, the retry counters, the transition history and a version for the checkpoint store's
compare-and-set. ``advance`` is the only way to move a request, and it refuses every move Fig. 5
does not draw:

- Idle → Input Validation (a new request).
- Input Validation → Waiting for Clarification (incomplete or ambiguous), Request Rejected
  (invalid), or SPARQL and VKG Generation (valid).
- Waiting for Clarification → Input Validation, once the user answered (``resume``).
- Generation → Generation (the SPARQL self-correction loop: regenerate after a failed
  ontology-conformance validation), Generation → Failed (a VKG build error, which is never
  retried), Generation → Execution.
- Execution → Completed. Rejected, Completed and Failed are terminal: nothing leaves them.

Three moves are not drawn as arrows in Fig. 5 but are described by the paper's text or needed by
any real pipeline; they are kept apart in ``EXTRA_EDGES`` with the reason, so the figure itself
stays checkable (``FIG5_EDGES``).

Retries: re-entering a stage (Input Validation after a clarification, Generation again) is
counted in ``retries``, a record for the status and the checkpoint history. The bound on SPARQL
regeneration lives where the regeneration happens: the model path's attempt budget
(``model_paths.sparql_model``), one budget for validation and execution failures alike, as the
paper's loop has.

Clarification: the stage that asks moves the request to Waiting for Clarification with a
``Clarification`` artifact (question, candidates, the field it is about); ``advance`` records the
asking stage. ``resume(state, answer)`` stores the answer, keeps every earlier answer in
``answered``, and moves back to Input Validation; the service re-runs stage 1 with all of them,
also for a request loaded from the checkpoint store after a restart.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from oda_analyst.errors import OdaError, UsageError


class Stage(StrEnum):
    """The states of Fig. 5."""

    IDLE = "idle"
    INPUT_VALIDATION = "input_validation"
    WAITING_FOR_CLARIFICATION = "waiting_for_clarification"
    REJECTED = "rejected"
    GENERATION = "generation"
    EXECUTION = "execution"
    COMPLETED = "completed"
    FAILED = "failed"


class Status(StrEnum):
    """The paper's status (running, waiting-for-clarification, completed, failed), plus
    ``rejected`` (the user's input was invalid, not our failure) and ``pending`` (created, not
    yet started)."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING_FOR_CLARIFICATION = "waiting_for_clarification"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"


STATUS_OF: Mapping[Stage, Status] = {
    Stage.IDLE: Status.PENDING,
    Stage.INPUT_VALIDATION: Status.RUNNING,
    Stage.WAITING_FOR_CLARIFICATION: Status.WAITING_FOR_CLARIFICATION,
    Stage.GENERATION: Status.RUNNING,
    Stage.EXECUTION: Status.RUNNING,
    Stage.REJECTED: Status.REJECTED,
    Stage.COMPLETED: Status.COMPLETED,
    Stage.FAILED: Status.FAILED,
}

TERMINAL: frozenset[Stage] = frozenset({Stage.REJECTED, Stage.COMPLETED, Stage.FAILED})

# The arrows of Fig. 5. Generation → Generation is the self-correction loop drawn inside the
# SPARQL-and-VKG-generation state.
FIG5_EDGES: frozenset[tuple[Stage, Stage]] = frozenset(
    {
        (Stage.IDLE, Stage.INPUT_VALIDATION),
        (Stage.INPUT_VALIDATION, Stage.WAITING_FOR_CLARIFICATION),
        (Stage.INPUT_VALIDATION, Stage.REJECTED),
        (Stage.INPUT_VALIDATION, Stage.GENERATION),
        (Stage.WAITING_FOR_CLARIFICATION, Stage.INPUT_VALIDATION),
        (Stage.GENERATION, Stage.GENERATION),
        (Stage.GENERATION, Stage.FAILED),
        (Stage.GENERATION, Stage.EXECUTION),
        (Stage.EXECUTION, Stage.COMPLETED),
    }
)

EXTRA_EDGES: Mapping[tuple[Stage, Stage], str] = {
    (Stage.EXECUTION, Stage.GENERATION): (
        "§III-C Stage 3: syntax-based execution failures are returned to the SPARQL generation "
        "module for regeneration (a retry)"
    ),
    (Stage.EXECUTION, Stage.FAILED): (
        "§III-C Stage 3: the execution retry loop terminates with failure when the budget is "
        "spent; also a graph-store fault that no regeneration can fix"
    ),
    (Stage.INPUT_VALIDATION, Stage.FAILED): (
        "an internal fault while validating (model endpoint down) is not the user's input being "
        "invalid, so it must not be reported as a rejection"
    ),
}


def _allowed() -> dict[Stage, frozenset[Stage]]:
    edges = FIG5_EDGES | frozenset(EXTRA_EDGES)
    return {src: frozenset(dst for s, dst in edges if s == src) for src in Stage}


ALLOWED: Mapping[Stage, frozenset[Stage]] = _allowed()


class IllegalTransitionError(OdaError):
    """A move Fig. 5 forbids (a bug in the caller, or a request that has already finished)."""

    code = "illegal_transition"


class ClarificationField(StrEnum):
    """What a clarification is about."""

    ENTITY = "entity"
    TIME = "time"
    METRIC = "metric"
    THRESHOLD = "threshold"  # a vague level ("high GPU usage"): asked after the metrics


_Frozen = ConfigDict(frozen=True, extra="forbid")


class Clarification(BaseModel):
    """A question put to the user, and later their answer."""

    model_config = _Frozen

    question: str = Field(min_length=1)
    field: ClarificationField
    candidates: tuple[JsonValue, ...] = ()
    asked_by_stage: Stage | None = None  # set by advance() to the stage that asked
    asked_at: datetime | None = None
    answer: str | None = None
    answered_at: datetime | None = None


class VKGRef(BaseModel):
    """The per-query VKG: its named graph, cache key and size."""

    model_config = _Frozen

    graph: str
    key: str
    triples: int = Field(ge=0)


class ResultRef(BaseModel):
    """A query result: inline rows (bounded) and/or a CSV file for larger ones."""

    model_config = _Frozen

    columns: tuple[str, ...] = ()
    rows: tuple[tuple[JsonValue, ...], ...] = ()
    row_count: int = Field(default=0, ge=0)
    csv: str | None = None


class ErrorInfo(BaseModel):
    """Why a request was rejected or failed, as ``OdaError.to_dict`` gives it."""

    model_config = _Frozen

    code: str
    message: str
    hint: str | None = None

    @classmethod
    def from_error(cls, exc: OdaError) -> ErrorInfo:
        return cls(code=exc.code, message=exc.message, hint=exc.hint)


class Artifacts(BaseModel):
    """The paper's I: intermediate artifacts. Loosely typed ones are JSON values; ``extra`` holds
    anything a later stage needs that has no field yet (extra keys are refused, so a typo fails
    loudly instead of vanishing)."""

    model_config = _Frozen

    entities: JsonValue = None  # Entities.to_dict()
    time: JsonValue = None  # TimeParse as a dict
    metrics: tuple[JsonValue, ...] | None = None  # grounded (sub-query, plugin, metric) tuples
    clarification: Clarification | None = None  # the current (last) clarification
    answered: tuple[Clarification, ...] = ()  # earlier rounds, each with its answer
    plan: JsonValue = None
    sparql: str | None = None
    validation: JsonValue = None  # the validator's report for the last SPARQL
    vkg: VKGRef | None = None
    result: ResultRef | None = None
    error: ErrorInfo | None = None
    extra: dict[str, JsonValue] = Field(default_factory=dict)


class Transition(BaseModel):
    """One move in a request's history."""

    model_config = _Frozen

    from_stage: Stage
    to_stage: Stage
    at: datetime
    note: str = ""


_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("datetimes must be timezone-aware (UTC)")
    return value.astimezone(UTC)


class RequestState(BaseModel):
    """The checkpointed state of one request (JSON-serialisable, immutable)."""

    model_config = _Frozen

    request_id: str
    user: str = Field(min_length=1)
    question: str
    # The question as the reader read it (a Reading, JSON), read once: stage 1 takes it after a
    # clarification or a restart too. None only in checkpoints written before the reader.
    reading: dict[str, Any] | None = None
    as_of: datetime
    stage: Stage = Stage.IDLE
    status: Status = Status.PENDING
    artifacts: Artifacts = Field(default_factory=Artifacts)
    retries: dict[Stage, int] = Field(default_factory=dict)
    history: tuple[Transition, ...] = ()
    created_at: datetime
    updated_at: datetime
    version: int = Field(default=0, ge=0)  # 0: never saved; the store bumps it on each save

    @model_validator(mode="before")
    @classmethod
    def _legacy_fields(cls, data: Any) -> Any:
        # Checkpoints saved before the unused retry budget was removed carry ``max_retries``;
        # they must still load (a waiting clarification is the user's work).
        if isinstance(data, dict) and "max_retries" in data:
            data = {k: v for k, v in data.items() if k != "max_retries"}
        return data

    @field_validator("request_id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _REQUEST_ID.match(value):
            raise ValueError("a request id is 1-128 letters, digits, '_', '.' or '-'")
        return value

    @field_validator("as_of", "created_at", "updated_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return _aware(value)

    @model_validator(mode="after")
    def _status_follows_stage(self) -> RequestState:
        if self.status != STATUS_OF[self.stage]:
            raise ValueError(f"status {self.status} does not match stage {self.stage}")
        return self

    @property
    def terminal(self) -> bool:
        return self.stage in TERMINAL


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_request_id(now: datetime | None = None) -> str:
    """32 hex digits: 12 of milliseconds since the epoch, then 20 random, so ids sort by time."""
    millis = int((now or utcnow()).timestamp() * 1000)
    return f"{millis:012x}{os.urandom(10).hex()}"


def new_request(
    question: str,
    *,
    user: str,
    as_of: datetime | None = None,
    now: datetime | None = None,
    request_id: str | None = None,
    reading: dict[str, Any] | None = None,
) -> RequestState:
    """A request in Idle; ``as_of`` anchors relative times ("last 10 hours") and defaults to
    ``now``."""
    if not question.strip():
        raise UsageError("the question is empty", hint="ask a question in plain language")
    now = now or utcnow()
    try:
        return RequestState(
            request_id=request_id or new_request_id(now),
            user=user,
            question=question,
            reading=reading,
            as_of=as_of or now,
            created_at=now,
            updated_at=now,
        )
    except ValidationError as exc:
        raise UsageError(f"invalid request: {_first_error(exc)}", hint=_REQUEST_HINT) from None


_REQUEST_HINT = "give a non-empty user, an aware as_of and a request id of letters and digits"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def advance(
    state: RequestState,
    to: Stage,
    *,
    note: str = "",
    now: datetime | None = None,
    **artifact_updates: Any,
) -> RequestState:
    """The state after moving ``state`` to ``to``, with ``artifact_updates`` merged into its
    artifacts (a value of None clears a key). Pure: ``state`` is not changed, the version is
    left to the store.

    Raises IllegalTransitionError for a move Fig. 5 forbids, for entering Waiting for
    Clarification without a ``clarification``, for leaving it without an answer, and for
    entering Rejected or Failed without an ``error``.
    """
    now = now or utcnow()
    src = state.stage
    _check_edge(state, to)
    artifacts = _merge(state.artifacts, artifact_updates)
    if to is Stage.WAITING_FOR_CLARIFICATION:
        artifacts = _ask(state, artifacts, now)
    if src is Stage.WAITING_FOR_CLARIFICATION and not (
        artifacts.clarification and artifacts.clarification.answer
    ):
        raise IllegalTransitionError(
            f"request {state.request_id} has no answer to its clarification yet",
            hint="use resume(state, answer) to continue a request waiting for clarification",
        )
    if to in (Stage.REJECTED, Stage.FAILED) and artifacts.error is None:
        raise IllegalTransitionError(
            f"moving request {state.request_id} to {to} needs an error to report",
            hint="pass error=ErrorInfo(code=..., message=..., hint=...)",
        )
    retries = dict(state.retries)
    if any(t.to_stage is to for t in state.history):
        retries[to] = retries.get(to, 0) + 1
    step = Transition(from_stage=src, to_stage=to, at=now, note=note)
    return state.model_copy(
        update={
            "stage": to,
            "status": STATUS_OF[to],
            "artifacts": artifacts,
            "retries": retries,
            "history": (*state.history, step),
            "updated_at": now,
        }
    )


def _check_edge(state: RequestState, to: Stage) -> None:
    src = state.stage
    if src in TERMINAL:
        raise IllegalTransitionError(
            f"request {state.request_id} is already {src}; it cannot move to {to}",
            hint="a finished request cannot be continued; ask the question again",
        )
    if to not in ALLOWED[src]:
        allowed = ", ".join(sorted(ALLOWED[src]))
        raise IllegalTransitionError(
            f"request {state.request_id}: {src} → {to} is not a transition of the lifecycle",
            hint=f"from {src} a request can move to: {allowed}",
        )


def _merge(artifacts: Artifacts, updates: Mapping[str, Any]) -> Artifacts:
    if not updates:
        return artifacts
    unknown = sorted(set(updates) - set(Artifacts.model_fields))
    if unknown:
        raise UsageError(
            f"unknown artifact {unknown[0]!r}",
            hint=f"use one of {sorted(Artifacts.model_fields)} (or extra={{...}})",
        )
    merged = {name: getattr(artifacts, name) for name in Artifacts.model_fields} | dict(updates)
    try:
        return Artifacts.model_validate(merged)
    except ValidationError as exc:
        raise UsageError(
            f"invalid artifact {_first_error(exc)}",
            hint="artifacts must be JSON values or the typed models of retriever.state",
        ) from None


def _ask(state: RequestState, artifacts: Artifacts, now: datetime) -> Artifacts:
    """Stamp a new clarification with the stage that asked; file an answered one away."""
    asked = artifacts.clarification
    if asked is None or asked is state.artifacts.clarification or asked.answer is not None:
        raise IllegalTransitionError(
            f"request {state.request_id} needs a new, unanswered clarification to wait for",
            hint="pass clarification=Clarification(question=..., field=..., candidates=...)",
        )
    previous = state.artifacts.clarification
    answered = artifacts.answered
    if previous is not None and previous.answer is not None and previous not in answered:
        answered = (*answered, previous)
    stamped = asked.model_copy(update={"asked_by_stage": state.stage, "asked_at": now})
    return artifacts.model_copy(update={"clarification": stamped, "answered": answered})


def resume(state: RequestState, answer: str, *, now: datetime | None = None) -> RequestState:
    """Answer the clarification a request waits for and move it back to the stage that asked."""
    clarification = state.artifacts.clarification
    if state.stage is not Stage.WAITING_FOR_CLARIFICATION or clarification is None:
        raise IllegalTransitionError(
            f"request {state.request_id} is {state.stage}, not waiting for clarification",
            hint="only a request that asked a question can be clarified; ask again instead",
        )
    answer = answer.strip()
    if not answer:
        raise UsageError(
            "the clarification answer is empty",
            hint=f"answer the question: {clarification.question}",
        )
    now = now or utcnow()
    answered = clarification.model_copy(update={"answer": answer, "answered_at": now})
    back = clarification.asked_by_stage or Stage.INPUT_VALIDATION
    return advance(
        state,
        back,
        note=f"clarified {clarification.field}: {answer}",
        now=now,
        clarification=answered,
    )
