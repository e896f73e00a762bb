"""The request lifecycle of Fig. 5: allowed and forbidden moves, retries, clarification."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from oda_analyst.errors import QueryRejectedError, UsageError
from oda_analyst.retriever.state import (
    ALLOWED,
    EXTRA_EDGES,
    FIG5_EDGES,
    STATUS_OF,
    TERMINAL,
    Clarification,
    ClarificationField,
    ErrorInfo,
    IllegalTransitionError,
    RequestState,
    ResultRef,
    Stage,
    Status,
    VKGRef,
    advance,
    new_request,
    new_request_id,
    resume,
)

T0 = datetime(2022, 6, 1, 9, 0, tzinfo=UTC)
S = Stage
ERROR = ErrorInfo(code="x", message="it broke", hint="try again")


def ask(field: ClarificationField = ClarificationField.METRIC) -> Clarification:
    return Clarification(
        question="Which temperature: inlet or exhaust?",
        field=field,
        candidates=("ambient_temp", "exhaust_temp"),
    )


def fresh(**kw: Any) -> RequestState:
    return new_request("inlet temperature of node 900 yesterday", user="alice", now=T0, **kw)


def extras_for(src: Stage, to: Stage) -> dict[str, Any]:
    """The artifacts a move needs to be well formed."""
    if to is S.WAITING_FOR_CLARIFICATION:
        return {"clarification": ask()}
    if to in (S.FAILED, S.REJECTED):
        return {"error": ERROR}
    if src is S.WAITING_FOR_CLARIFICATION:
        return {"clarification": ask().model_copy(update={"answer": "inlet"})}
    return {}


# The shortest legal path from Idle to each non-terminal stage.
PATHS: dict[Stage, tuple[Stage, ...]] = {
    S.IDLE: (),
    S.INPUT_VALIDATION: (S.INPUT_VALIDATION,),
    S.WAITING_FOR_CLARIFICATION: (S.INPUT_VALIDATION, S.WAITING_FOR_CLARIFICATION),
    S.GENERATION: (S.INPUT_VALIDATION, S.GENERATION),
    S.EXECUTION: (S.INPUT_VALIDATION, S.GENERATION, S.EXECUTION),
    S.REJECTED: (S.INPUT_VALIDATION, S.REJECTED),
    S.COMPLETED: (S.INPUT_VALIDATION, S.GENERATION, S.EXECUTION, S.COMPLETED),
    S.FAILED: (S.INPUT_VALIDATION, S.GENERATION, S.FAILED),
}


def state_at(stage: Stage) -> RequestState:
    state = fresh()
    for i, to in enumerate(PATHS[stage]):
        state = advance(state, to, now=T0 + timedelta(minutes=i + 1), **extras_for(state.stage, to))
    assert state.stage is stage
    return state


ALL_PAIRS = list(itertools.product(Stage, Stage))
ALLOWED_PAIRS = [(a, b) for a, b in ALL_PAIRS if b in ALLOWED[a]]
FORBIDDEN_PAIRS = [(a, b) for a, b in ALL_PAIRS if b not in ALLOWED[a]]


def test_allowed_is_fig5_plus_the_documented_extras() -> None:
    assert set(ALLOWED_PAIRS) == set(FIG5_EDGES) | set(EXTRA_EDGES)
    assert set(EXTRA_EDGES) == {
        (S.EXECUTION, S.GENERATION),
        (S.EXECUTION, S.FAILED),
        (S.INPUT_VALIDATION, S.FAILED),
    }
    assert all(reason for reason in EXTRA_EDGES.values())
    assert ALLOWED[S.IDLE] == {S.INPUT_VALIDATION}
    assert ALLOWED[S.INPUT_VALIDATION] >= {S.WAITING_FOR_CLARIFICATION, S.REJECTED, S.GENERATION}
    assert ALLOWED[S.WAITING_FOR_CLARIFICATION] == {S.INPUT_VALIDATION}


def test_terminal_states_have_no_way_out_and_every_stage_reaches_one() -> None:
    assert {S.REJECTED, S.COMPLETED, S.FAILED} == TERMINAL
    for stage in TERMINAL:
        assert ALLOWED[stage] == frozenset()
    for stage in Stage:
        seen, frontier = {stage}, [stage]
        while frontier:
            for nxt in ALLOWED[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & TERMINAL, stage


@pytest.mark.parametrize(("src", "to"), ALLOWED_PAIRS, ids=str)
def test_every_allowed_transition_passes(src: Stage, to: Stage) -> None:
    before = state_at(src)
    now = T0 + timedelta(hours=1)
    after = advance(before, to, note="step", now=now, **extras_for(src, to))
    assert after.stage is to
    assert after.status is STATUS_OF[to]
    assert after.history[-1].from_stage is src
    assert after.history[-1].to_stage is to
    assert after.history[-1].note == "step"
    assert after.updated_at == now
    assert len(after.history) == len(before.history) + 1
    assert after.version == before.version  # the store owns the version
    assert before.stage is src  # advance is pure


@pytest.mark.parametrize(("src", "to"), FORBIDDEN_PAIRS, ids=str)
def test_every_forbidden_transition_raises(src: Stage, to: Stage) -> None:
    with pytest.raises(IllegalTransitionError) as info:
        advance(state_at(src), to, **extras_for(src, to))
    assert info.value.hint


@pytest.mark.parametrize(
    ("src", "to"),
    [
        (S.IDLE, S.EXECUTION),
        (S.IDLE, S.GENERATION),
        (S.IDLE, S.COMPLETED),
        (S.INPUT_VALIDATION, S.EXECUTION),
        (S.INPUT_VALIDATION, S.COMPLETED),
        (S.WAITING_FOR_CLARIFICATION, S.GENERATION),
        (S.WAITING_FOR_CLARIFICATION, S.REJECTED),
        (S.GENERATION, S.INPUT_VALIDATION),
        (S.GENERATION, S.COMPLETED),
        (S.EXECUTION, S.EXECUTION),
        (S.REJECTED, S.INPUT_VALIDATION),
        (S.REJECTED, S.GENERATION),
        (S.COMPLETED, S.GENERATION),
        (S.COMPLETED, S.IDLE),
        (S.FAILED, S.GENERATION),
        (S.FAILED, S.FAILED),
    ],
    ids=str,
)
def test_named_forbidden_moves(src: Stage, to: Stage) -> None:
    state = state_at(src)
    with pytest.raises(IllegalTransitionError) as info:
        advance(state, to, **extras_for(src, to))
    message = str(info.value)
    assert src.value in message
    if src in TERMINAL:
        assert "ask the question again" in message


def test_waiting_needs_a_clarification_and_records_who_asked() -> None:
    state = state_at(S.INPUT_VALIDATION)
    with pytest.raises(IllegalTransitionError, match="clarification"):
        advance(state, S.WAITING_FOR_CLARIFICATION)
    answered = ask().model_copy(update={"answer": "inlet"})
    with pytest.raises(IllegalTransitionError, match="unanswered"):
        advance(state, S.WAITING_FOR_CLARIFICATION, clarification=answered)
    now = T0 + timedelta(minutes=5)
    waiting = advance(state, S.WAITING_FOR_CLARIFICATION, clarification=ask(), now=now)
    assert waiting.status is Status.WAITING_FOR_CLARIFICATION
    asked = waiting.artifacts.clarification
    assert asked is not None
    assert asked.asked_by_stage is S.INPUT_VALIDATION
    assert asked.asked_at == now
    assert asked.field is ClarificationField.METRIC


def test_leaving_waiting_needs_an_answer() -> None:
    with pytest.raises(IllegalTransitionError, match="resume"):
        advance(state_at(S.WAITING_FOR_CLARIFICATION), S.INPUT_VALIDATION)


@pytest.mark.parametrize("to", [S.FAILED, S.REJECTED])
def test_failing_or_rejecting_needs_an_error(to: Stage) -> None:
    state = state_at(S.INPUT_VALIDATION)
    with pytest.raises(IllegalTransitionError, match="error"):
        advance(state, to)
    exc = QueryRejectedError("metric 'foo' is not in the catalogue", hint="name a metric")
    done = advance(state, to, error=ErrorInfo.from_error(exc))
    assert done.artifacts.error == ErrorInfo(
        code="rejected", message="metric 'foo' is not in the catalogue", hint="name a metric"
    )
    assert done.terminal


def test_re_entering_a_stage_is_counted() -> None:
    state = advance(state_at(S.GENERATION), S.GENERATION, note="validation failed")
    assert state.retries[S.GENERATION] == 1
    state = advance(state, S.EXECUTION)
    state = advance(state, S.GENERATION, note="syntax error at execution")
    assert state.retries[S.GENERATION] == 2
    assert S.EXECUTION not in state.retries  # entered once


def test_a_checkpoint_with_the_removed_retry_budget_still_loads() -> None:
    state = state_at(S.WAITING_FOR_CLARIFICATION)
    legacy = {**state.model_dump(mode="json"), "max_retries": 3}
    assert RequestState.model_validate(legacy) == state


def test_resume_returns_to_the_stage_that_asked_with_the_answer() -> None:
    waiting = state_at(S.WAITING_FOR_CLARIFICATION)
    now = T0 + timedelta(days=2)
    back = resume(waiting, "  the inlet one  ", now=now)
    assert back.stage is S.INPUT_VALIDATION
    assert back.status is Status.RUNNING
    asked = back.artifacts.clarification
    assert asked is not None
    assert asked.answer == "the inlet one"
    assert asked.answered_at == now
    assert back.history[-1].note == "clarified metric: the inlet one"
    assert back.retries[S.INPUT_VALIDATION] == 1
    assert asked.asked_by_stage is S.INPUT_VALIDATION


def test_a_second_clarification_keeps_the_first_answer() -> None:
    first = resume(state_at(S.WAITING_FOR_CLARIFICATION), "inlet")
    second = advance(first, S.WAITING_FOR_CLARIFICATION, clarification=ask(ClarificationField.TIME))
    answered = second.artifacts.answered
    assert [c.answer for c in answered] == ["inlet"]
    assert second.artifacts.clarification is not None
    assert second.artifacts.clarification.answer is None
    third = resume(second, "1 June 2022")
    assert third.retries[S.INPUT_VALIDATION] == 2
    assert [c.answer for c in third.artifacts.answered] == ["inlet"]
    assert third.artifacts.clarification is not None
    assert third.artifacts.clarification.answer == "1 June 2022"


@pytest.mark.parametrize("stage", [s for s in Stage if s is not S.WAITING_FOR_CLARIFICATION])
def test_resume_refuses_a_request_that_is_not_waiting(stage: Stage) -> None:
    with pytest.raises(IllegalTransitionError, match="not waiting"):
        resume(state_at(stage), "inlet")


def test_resume_refuses_an_empty_answer() -> None:
    with pytest.raises(UsageError) as info:
        resume(state_at(S.WAITING_FOR_CLARIFICATION), "   ")
    assert "inlet or exhaust" in str(info.value.hint)


def test_artifact_updates_merge_and_are_typed() -> None:
    state = advance(
        state_at(S.INPUT_VALIDATION),
        S.GENERATION,
        entities={"nodes": [900]},
        metrics=({"plugin": "ipmi", "metric": "ambient"},),
    )
    state = advance(state, S.EXECUTION, sparql="SELECT ?x WHERE { ?x ?p ?o }", vkg=None)
    assert state.artifacts.entities == {"nodes": [900]}
    assert state.artifacts.sparql is not None
    with pytest.raises(UsageError, match="sparq"):
        advance(state, S.COMPLETED, sparq="typo")
    with pytest.raises(UsageError, match="vkg"):
        advance(state, S.COMPLETED, vkg={"graph": "g", "key": "k", "triples": -1})
    with pytest.raises(UsageError):
        advance(state, S.COMPLETED, entities=object())


def full_state() -> RequestState:
    state = resume(state_at(S.WAITING_FOR_CLARIFICATION), "inlet")
    state = advance(
        state,
        S.GENERATION,
        entities={"nodes": [900, 920], "all_nodes": False},
        time={"status": "ok", "windows": [["2022-06-01T08:00:00Z", "2022-06-01T09:00:00Z"]]},
        metrics=({"query": "inlet", "plugin": "ipmi", "metric": "ambient", "score": 0.91},),
        plan={"metrics": ["ambient"], "nodes": [900, 920]},
        sparql="SELECT ?v WHERE { ?s ?p ?v }",
        validation={"ok": True, "diagnostics": []},
        extra={"tokens": {"retriever": 1234}},
    )
    state = advance(state, S.GENERATION, note="repair")
    state = advance(
        state, S.EXECUTION, vkg=VKGRef(graph="urn:oda:vkg:ab12", key="ab12", triples=4321)
    )
    return advance(
        state,
        S.COMPLETED,
        result=ResultRef(
            columns=("node", "value"), rows=((900, 21.5), (920, None)), row_count=2, csv=None
        ),
    )


def test_json_round_trip_is_exact() -> None:
    state = full_state()
    text = state.model_dump_json()
    again = RequestState.model_validate_json(text)
    assert again == state
    assert again.model_dump_json() == text
    assert again.retries == {S.INPUT_VALIDATION: 1, S.GENERATION: 1}
    assert again.artifacts.answered == ()
    assert again.artifacts.clarification is not None
    assert again.artifacts.clarification.answer == "inlet"


def test_status_must_follow_stage() -> None:
    data = full_state().model_dump(mode="json")
    data["status"] = "running"
    with pytest.raises(ValidationError, match="does not match"):
        RequestState.model_validate(data)


def test_new_request_validation() -> None:
    state = fresh()
    assert (state.stage, state.status, state.version) == (S.IDLE, Status.PENDING, 0)
    assert state.as_of == T0
    assert len(state.request_id) == 32
    with pytest.raises(UsageError, match="empty"):
        new_request("   ", user="alice")
    with pytest.raises(UsageError, match="request_id"):
        new_request("q", user="alice", request_id="oda:req:../x")
    with pytest.raises(UsageError, match="user"):
        new_request("q", user="")
    with pytest.raises(UsageError, match="as_of"):
        new_request("q", user="alice", as_of=datetime(2022, 6, 1))


def test_request_ids_sort_by_creation_time_and_are_unique() -> None:
    times = [T0 + timedelta(milliseconds=i) for i in range(50)]
    ids = [new_request_id(t) for t in times]
    assert ids == sorted(ids)
    assert len({new_request_id(T0) for _ in range(200)}) == 200
