"""When to retry a model call and how long to wait: pure functions, so tests need no clock.

Retried: connection errors, connect timeouts, 429 and 5xx — what a busy or restarting vLLM
returns. Not retried: other 4xx and a 500 that is a request-validation error (a bad request stays
bad), a read timeout (the server is still working on the request; a resend would queue behind
it), and answers that parse but break the schema (that is the reflection loop's job, with
feedback, not a blind resend).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter."""

    max_retries: int = 3
    """Retries after the first attempt (0: one attempt only)."""
    backoff_base_s: float = 0.5
    """Wait before the first retry, doubled for each further one (before jitter)."""
    backoff_max_s: float = 8.0
    """Cap on one backoff wait."""
    jitter: float = 0.5
    """Fraction of each wait drawn at random, so clients that failed together spread out."""
    max_retry_after_s: float = 30.0
    """Cap on a server's Retry-After: a server asking for longer still gets retried this soon."""
    rand: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be within [0, 1]")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("waits must be >= 0")

    def backoff_s(self, retry: int) -> float:
        """Wait before retry number ``retry`` (0-based) when the server gave no Retry-After."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2.0**retry))
        return ceiling * (1.0 - self.jitter) + ceiling * self.jitter * self.rand()

    def wait_s(self, retry: int, retry_after: float | None) -> float:
        """Wait before retry ``retry``: the server's Retry-After (capped) wins over backoff."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        return self.backoff_s(retry)


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt."""
    return status == 429 or 500 <= status <= 599


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
