"""How many queries the analyst works on at once: bounded per cluster, per namespace, per user.

The operator is the one active replica (kopf's peering), so it alone decides which query's
pipeline call goes to the analyst now and which waits; the bounds are settings
(``ODA_OPERATOR_MAX_QUERIES``, ``…_PER_NAMESPACE``, ``…_PER_USER``). A query that waits says so
in its status (``status.admission``) until it is admitted: the backpressure a user sees, rather
than a query that seems to hang. The waiting is in memory: an operator that restarts forgets the
queue, and the queries it resumes queue again in the order kopf resumes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    cluster: int
    namespace: int
    user: int


@dataclass(frozen=True)
class Holder:
    namespace: str
    user: str


def blocked_by(running: Mapping[str, Holder], namespace: str, user: str, bounds: Bounds
               ) -> str | None:  # fmt: skip
    """Why a query of ``user`` in ``namespace`` cannot start now, or None (pure)."""
    if len(running) >= bounds.cluster:
        return (f"{len(running)} queries are being answered, the most this cluster answers at "
                "once (ODA_OPERATOR_MAX_QUERIES)")  # fmt: skip
    in_ns = sum(1 for h in running.values() if h.namespace == namespace)
    if in_ns >= bounds.namespace:
        return (f"{in_ns} queries of namespace {namespace} are being answered, the most it "
                "may have at once (ODA_OPERATOR_MAX_QUERIES_PER_NAMESPACE)")  # fmt: skip
    of_user = sum(1 for h in running.values() if h.user == user)
    if of_user >= bounds.user:
        return (f"{of_user} queries of {user} are being answered, the most one user may have "
                "at once (ODA_OPERATOR_MAX_QUERIES_PER_USER)")  # fmt: skip
    return None


Queued = Callable[[str, int], Awaitable[None]]  # (why, how many wait ahead) -> said in status


class Admission:
    """The running queries and the queue in front of them (on kopf's loop: no lock needed,
    since nothing awaits between a check and taking the place)."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._running: dict[str, Holder] = {}
        self._waiting: list[tuple[str, Holder]] = []
        self._changed = asyncio.Event()

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _why_not(self, key: str, holder: Holder) -> str | None:
        why = blocked_by(self._running, holder.namespace, holder.user, self.bounds)
        if why is not None:
            return why
        # First come, first served among those the bounds admit: a query waits for one ahead
        # of it that could start too, which takes its place first.
        for ahead, other in self._waiting:
            if ahead == key:
                break
            if blocked_by(self._running, other.namespace, other.user, self.bounds) is None:
                return f"query {ahead} came first"
        return None

    @asynccontextmanager
    async def slot(self, key: str, namespace: str, user: str, on_queued: Queued
                   ) -> AsyncIterator[bool]:  # fmt: skip
        """Hold one of the running places for query ``key`` while the block runs; yields
        whether it had to wait. ``on_queued`` is awaited once, when it has to."""
        if key in self._running:  # the same query again (kopf serialises it): one place
            yield False
            return
        holder = Holder(namespace, user)
        self._waiting.append((key, holder))
        queued = False
        try:
            while (why := self._why_not(key, holder)) is not None:
                if queued:
                    await self._changed.wait()
                    continue
                queued = True
                ahead = next(i for i, (k, _) in enumerate(self._waiting) if k == key)
                await on_queued(why, ahead)  # the state may change meanwhile: check again
        finally:
            self._waiting.remove((key, holder))
            self._wake()
        self._running[key] = holder
        try:
            yield queued
        finally:
            self._running.pop(key, None)
            self._wake()
