"""The coordinator's graph state: what one conversation thread checkpoints.

Per request: the question, the task list, the retriever's last answer, the artefacts. Per
conversation: a sliding window of recent turns (question, summary), trimmed by its reducer, so a
checkpoint never carries an unbounded history and a model is never replayed one.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

MAX_TURNS = 6
"""Turns kept in a conversation's window (older ones are dropped from the checkpoint)."""


class Turn(TypedDict):
    request_id: str
    question: str
    summary: str
    status: str


def window(old: list[Turn] | None, new: list[Turn] | None) -> list[Turn]:
    """Reducer of ``turns``: append, keep the last ``MAX_TURNS``."""
    return [*(old or []), *(new or [])][-MAX_TURNS:]


class TaskRecord(TypedDict):
    name: str
    status: str
    detail: str


class CoordinatorState(TypedDict, total=False):
    # who and what, injected per turn
    request_id: str
    conversation_id: str
    user: str
    backend: str  # which retrieval server the request's client reaches (nsa, sota1, sota2)
    question: str
    as_of: str | None
    out_dir: str
    # the question as the reader read it (a Reading, JSON): read once, sent to the retriever
    reading: dict[str, Any] | None
    # the plan and its progress
    plan: dict[str, Any] | None
    unclear: dict[str, Any] | None
    sent: str | None
    attempts: int
    clarifications: int
    retrieval: dict[str, Any] | None
    tasks: list[TaskRecord]
    artifacts: list[dict[str, Any]]
    # the outcome
    status: str
    summary: str
    error: dict[str, Any] | None
    warnings: list[str]
    counters: dict[str, int]
    next: str
    turns: Annotated[list[Turn], window]
    # the model path only: this request's messages (reset per request) and its turns
    messages: list[dict[str, Any]]
    model_turns: int
    model_text: str
