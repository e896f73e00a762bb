"""Status patches, built pure: the phase, its condition, and the answer bounded in size.

An object in etcd is at most ~1.5 MB, so the status carries at most ``STATUS_ROWS`` rows and
truncated SPARQL/answer text; the whole answer is in the bucket (``status.artifacts``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from oda_analyst.controller import names

STATUS_ROWS = 50
MAX_TEXT = 8000

_CONDITION = {
    names.PENDING: ("Understood", "Unknown"),
    names.BUILDING: ("GraphReady", "False"),
    names.RETRIEVING: ("Retrieved", "False"),
    names.ANALYSING: ("Analysed", "False"),
    names.WAITING: ("Clarified", "False"),
    names.COMPLETED: ("Completed", "True"),
    names.REJECTED: ("Completed", "False"),
    names.FAILED: ("Completed", "False"),
    names.SCHEDULED: ("Scheduled", "True"),
}


def stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(previous: Sequence[Mapping[str, Any]], phase: str, reason: str, message: str,
               now: datetime) -> list[dict[str, Any]]:  # fmt: skip
    """The phase's condition set (one per type; lastTransitionTime moves only on a change)."""
    kind, state = _CONDITION[phase]
    out = [dict(c) for c in previous if c.get("type") != kind]
    old = next((c for c in previous if c.get("type") == kind), None)
    moved = old is None or old.get("status") != state
    out.append({"type": kind, "status": state, "reason": reason, "message": message[:1000],
                "lastTransitionTime": stamp(now) if moved or old is None
                else old.get("lastTransitionTime", stamp(now))})  # fmt: skip
    return out


def phase_patch(status: Mapping[str, Any], phase: str, *, reason: str, message: str,
                now: datetime, generation: int | None = None, **fields: Any
                ) -> dict[str, Any]:  # fmt: skip
    patch: dict[str, Any] = {
        "phase": phase,
        "stage": fields.pop("stage", phase),
        "message": message[:MAX_TEXT],
        "conditions": conditions(status.get("conditions") or [], phase, reason, message, now),
    }
    if generation is not None:
        patch["observedGeneration"] = generation
    patch.update(fields)
    return {"status": patch}


def answer_fields(answer: Mapping[str, Any], table: str | None = None) -> dict[str, Any]:
    """What of the retriever's answer goes into status (the rest is in answer.json); the first
    rows of ``table`` (the result CSV) when the answer's rows were too many to be inline."""
    rows = answer.get("rows")
    if rows is None and table:
        parsed = list(csv.reader(io.StringIO(table)))
        rows = parsed[1 : STATUS_ROWS + 1]
    rows = rows or []
    return {
        "answer": str(answer.get("answer") or "")[:MAX_TEXT],
        "understoodAs": answer.get("understood_as"),
        "sparql": (answer.get("sparql") or "")[:MAX_TEXT] or None,
        "requestId": answer.get("request_id"),
        "columns": list(answer.get("columns") or []),
        "rows": [dict(zip(answer.get("columns") or [], r, strict=False))
                 for r in rows[:STATUS_ROWS]],
        "rowCount": answer.get("row_count"),
        "tokens": answer.get("tokens") or {},
        "warnings": list(answer.get("warnings") or [])[:20],
    }  # fmt: skip
