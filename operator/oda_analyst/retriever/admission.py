"""Admission of the blocking work behind the MCP tools: bounded, timed, cancellable.

The Retriever is synchronous, so each tool call runs in a worker thread. ``Gate`` bounds that:
at most ``workers`` calls run at once and at most ``queue`` more wait for a slot; a call beyond
that is refused at once with ``BusyError`` ("busy: … retry after N s", N estimated from the recent
call durations), never piled up. A call that waits and runs longer than ``timeout_s`` ends with
``RequestTimeoutError``. When the caller stops waiting (the MCP client cancelled or went away,
or the timeout passed), the call is marked cancelled: a call still waiting for a slot never
starts, and a running one stops at its next checkpoint (``Ticket.check``, which the Retriever
calls at every progress step). A thread cannot be killed, so its slot stays taken until it
really ends: the bounds hold for threads, not only for answers.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from oda_analyst.errors import BusyError, RequestCancelledError, RequestTimeoutError

T = TypeVar("T")

_POLL_S = 0.05  # how often a waiting call looks whether its caller is still there


class Ticket:
    """One admitted call: whether its caller still waits for it."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self.reason = ""
        self.started = False  # its thread took it (guarded by the gate's lock)
        self.dropped = False  # given up before any thread took it (idem)

    def cancel(self, reason: str) -> None:
        self.reason = self.reason or reason
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise RequestCancelledError when the caller has gone (call at safe points)."""
        if self._cancelled.is_set():
            raise RequestCancelledError(
                f"the request was stopped: {self.reason}",
                hint="ask again; a graph built so far is kept if it was complete",
            )


class Gate:
    """``workers`` calls at once, ``queue`` more waiting, each within ``timeout_s``."""

    def __init__(self, workers: int, queue: int, timeout_s: float) -> None:
        if workers < 1 or queue < 0 or timeout_s <= 0:
            raise ValueError("workers >= 1, queue >= 0 and timeout_s > 0 are required")
        self.workers, self.queue, self.timeout_s = workers, queue, timeout_s
        self._slots = threading.Semaphore(workers)
        self._lock = threading.Lock()
        self._admitted = 0  # running or waiting; decremented when the thread really ends
        self._running: dict[int, float] = {}  # id(ticket) -> when its call started
        self._durations: deque[float] = deque(maxlen=32)

    @property
    def admitted(self) -> int:
        with self._lock:
            return self._admitted

    def retry_after_s(self) -> int:
        """A fair wait before retrying: the queue ahead drained at the recent pace (the median
        call, or the median age of the running calls when they run longer, as on a cold
        server)."""
        now = time.monotonic()
        with self._lock:
            recent = sorted(self._durations)
            ages = sorted(now - t for t in self._running.values())
            ahead = self._admitted
        typical = max(recent[len(recent) // 2] if recent else 1.0,
                      ages[len(ages) // 2] if ages else 0.0)  # fmt: skip
        return max(1, math.ceil(typical * ahead / self.workers))

    async def run(self, func: Callable[[Ticket], T], *, what: str = "request") -> T:
        """Run ``func(ticket)`` in a worker thread under the bounds; BusyError when full,
        RequestTimeoutError past ``timeout_s``; cancelled with the awaiting task."""
        with self._lock:
            full = self._admitted >= self.workers + self.queue
            if not full:
                self._admitted += 1
            running = len(self._running)
        if full:
            raise BusyError(
                f"the server is running {running} tool calls with {self.queue} more waiting, "
                f"the most it holds; this {what} call was not started — retry after "
                f"{self.retry_after_s()} s",
                hint="retry later, or ask the operator to raise ODA_MCP_MAX_QUEUED or "
                "ODA_MCP_MAX_CONCURRENT",
            )
        ticket = Ticket()
        try:
            with anyio.move_on_after(self.timeout_s):
                return await anyio.to_thread.run_sync(
                    self._work, func, ticket, abandon_on_cancel=True
                )
        except anyio.get_cancelled_exc_class():  # the client went away
            ticket.cancel("the client went away")
            self._drop(ticket)
            raise
        # Only the time limit ends the scope without an answer or an error.
        ticket.cancel(f"it ran longer than {self.timeout_s:g} s")
        self._drop(ticket)
        raise RequestTimeoutError(
            f"the {what} call took longer than {self.timeout_s:g} s and was stopped",
            hint="narrow the time window or the entities, retry when the server is less "
            "busy, or ask the operator to raise ODA_MCP_TIMEOUT_S",
        )

    def _drop(self, ticket: Ticket) -> None:
        """Release the admission of a call no thread took (a thread releases its own)."""
        with self._lock:
            if not ticket.started and not ticket.dropped:
                ticket.dropped = True
                self._admitted -= 1

    def _work(self, func: Callable[[Ticket], T], ticket: Ticket) -> T:
        with self._lock:
            if ticket.dropped:
                ticket.check()
            ticket.started = True
        acquired = False
        try:
            while not (acquired := self._slots.acquire(timeout=_POLL_S)):
                ticket.check()
            ticket.check()
            start = time.monotonic()
            with self._lock:
                self._running[id(ticket)] = start
            try:
                return func(ticket)
            finally:
                with self._lock:
                    del self._running[id(ticket)]
                    self._durations.append(time.monotonic() - start)
        finally:
            if acquired:
                self._slots.release()
            with self._lock:
                self._admitted -= 1
