"""Scheduled queries (pure): which runs are due, and which finished runs to delete.

``spec.schedule`` is a cron expression in UTC; an optional sixth field gives seconds (croniter's
convention), which the tests use to see two runs in half a minute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

from oda_analyst.controller import names
from oda_analyst.errors import UsageError

DEFAULT_HISTORY = 3
MAX_CATCH_UP = 1  # a late operator starts the latest missed run, not every one it missed


def check(expression: str) -> None:
    if not croniter.is_valid(expression):
        raise UsageError(
            f"spec.schedule {expression!r} is not a cron expression",
            hint="five fields (minute hour day month weekday), e.g. '0 * * * *'",
        )


def due_run(expression: str, *, since: datetime, now: datetime) -> datetime | None:
    """The latest run time in (since, now], or None when none is due yet."""
    it = croniter(expression, since.astimezone(UTC))
    due = None
    while True:
        nxt = it.get_next(datetime)
        if nxt > now:
            return due
        due = nxt


def next_run(expression: str, *, after: datetime) -> datetime:
    nxt: datetime = croniter(expression, after.astimezone(UTC)).get_next(datetime)
    return nxt


def runs_to_delete(runs: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    """Finished runs beyond ``limit``, oldest first; running ones are never deleted."""
    finished = [r for r in runs if (r.get("status") or {}).get("phase") in names.TERMINAL]
    finished.sort(key=lambda r: r["metadata"].get("annotations", {}).get(
        names.ANNOTATION_RUN_TIME, r["metadata"].get("creationTimestamp", "")))  # fmt: skip
    excess = len(finished) - limit
    return [r["metadata"]["name"] for r in finished[:excess]] if excess > 0 else []
