"""The answer shape the baselines share with the retriever (``ask --json``, the MCP tools).

The same fields as the retriever's answer, so the CLI, the coordinator and the benchmark read
every backend alike; ``backend`` says which one answered. Kept apart from the retriever's model
on purpose: the baselines may not import the retriever (``tests`` check the fields agree).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

from oda_analyst.errors import OdaError

AnswerStatus = Literal["completed", "clarification", "rejected", "failed"]
EXIT_CODES: dict[str, int] = {"completed": 0, "clarification": 3, "rejected": 4, "failed": 1}


class BaselineClarification(BaseModel):
    """Never produced by a baseline (they cannot ask); present for the shared shape."""

    field: str
    question: str
    candidates: list[dict[str, Any]] = Field(default_factory=list)


class BaselineAnswer(BaseModel):
    """One baseline answer, field for field the retriever's ``AnswerPayload``."""

    status: AnswerStatus
    request_id: str
    answer: str
    backend: str
    understood_as: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    row_count: int | None = None
    csv: str | None = None
    csv_handle: str | None = None
    sparql: str | None = None
    plan: dict[str, Any] | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    clarification: BaselineClarification | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    tokens: dict[str, dict[str, float]] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    # The retriever's shape; the paper's tools record neither a trace nor provenance.
    trace: str | None = None
    provenance: dict[str, Any] | None = None
    asked: dict[str, Any] | None = None  # the paper's tools read no analysis request

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def new_request_id(backend: str) -> str:
    return f"{backend}-{uuid.uuid4().hex[:12]}"


def failed(backend: str, err: OdaError, *, request_id: str | None = None,
           status: AnswerStatus = "failed", timings: dict[str, float] | None = None,
           sparql: str | None = None) -> BaselineAnswer:  # fmt: skip
    """A terminal answer carrying the error's message and hint (no traceback, no guess)."""
    text = err.message + (f" ({err.hint})" if err.hint else "")
    return BaselineAnswer(
        status=status, request_id=request_id or new_request_id(backend), answer=text,
        backend=backend, error=err.to_dict(), timings=timings or {}, sparql=sparql,
    )  # fmt: skip


def completed(backend: str, results: list[dict[str, Any]], *, request_id: str, answer: str,
              timings: dict[str, float], warnings: list[str] | None = None,
              understood_as: str | None = None) -> BaselineAnswer:  # fmt: skip
    """A completed answer: the first result inline at the top, every result in ``results``.

    Each result holds ``columns``, ``rows`` (or None when written to CSV), ``row_count``,
    ``csv``, ``csv_handle``, ``explanation`` and ``sparql`` (None for a lake query)."""
    head = results[0]
    return BaselineAnswer(
        status="completed", request_id=request_id, answer=answer, backend=backend,
        understood_as=understood_as, columns=head["columns"], rows=head["rows"],
        row_count=head["row_count"], csv=head.get("csv"), csv_handle=head.get("csv_handle"),
        sparql=head.get("sparql"), plan=head.get("plan"), results=results,
        artifacts=[r["csv"] for r in results if r.get("csv")], warnings=warnings or [],
        timings=timings,
    )  # fmt: skip
