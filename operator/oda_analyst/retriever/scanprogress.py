"""Progress of a long lake scan: throttled lines for the user, the latest figures for status.

A month-scale plan scans one partition (month x metric) at a time (``vkg.pushdown``), which can
take minutes. ``reporter`` turns each partition done into two things: a line for the request's
progress callback (the CLI prints it on stderr, the MCP server sends it as a progress
notification) at most once per ``every_s`` — the first and the last partition always — and the
latest figures on a ``ScanBoard``, which the MCP ``status`` tool reads while the request runs.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from oda_analyst.vkg.pushdown import ScanProgress

Say = Callable[[str], None]
Clock = Callable[[], float]
EVERY_S = 1.0
BOARD_SIZE = 1024


@dataclass(frozen=True)
class ScanStatus:
    """Where one request's scan stands: ``done`` of ``total`` partitions, ``rows`` read."""

    plan: str
    done: int
    total: int
    rows: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        where = f" of plan {self.plan}" if self.plan else ""
        return (
            f"lake scan{where}: {self.done}/{self.total} partitions, {self.rows:,} rows "
            f"({self.label})"
        )


class ScanBoard:
    """The latest ``ScanStatus`` of the most recent requests (thread-safe, bounded)."""

    def __init__(self, size: int = BOARD_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._latest: OrderedDict[str, ScanStatus] = OrderedDict()

    def update(self, request_id: str, status: ScanStatus) -> None:
        with self._lock:
            self._latest[request_id] = status
            self._latest.move_to_end(request_id)
            while len(self._latest) > self._size:
                self._latest.popitem(last=False)

    def get(self, request_id: str) -> ScanStatus | None:
        with self._lock:
            return self._latest.get(request_id)


BOARD = ScanBoard()


def reporter(
    request_id: str,
    say: Say,
    *,
    plan: str = "",
    every_s: float = EVERY_S,
    board: ScanBoard = BOARD,
    clock: Clock = time.monotonic,
) -> Callable[[ScanProgress], None]:
    """A scan progress callback: every partition to ``board``; a line to ``say`` for the
    first and the last partition, and in between at most once per ``every_s``."""
    last: float | None = None
    lock = threading.Lock()  # a Dask engine reports from its result loop, one thread; be safe

    def report(p: ScanProgress) -> None:
        nonlocal last
        status = ScanStatus(plan, p.done, p.total, p.rows, p.label)
        board.update(request_id, status)
        now = clock()
        with lock:
            due = last is None or p.done == p.total or now - last >= every_s
            if due:
                last = now
        if due:
            say(status.line())

    return report
