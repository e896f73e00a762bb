"""The coordinator's checkpoint store: one SQLite file that many requests open at once.

LangGraph's ``AsyncSqliteSaver`` sets its database up on every connection (``PRAGMA
journal_mode=WAL`` and the tables). Two requests doing that at once on a new file raced for
the write lock and one failed with "database is locked". So the file is set up once per
process, under a lock, before any request opens it; after that a connection's own set-up
writes nothing, and WAL lets readers run beside the one writer while a busy writer waits
(``BUSY_TIMEOUT_S``) instead of failing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

# Long enough for another request's checkpoint write on loaded cores; writes take milliseconds.
BUSY_TIMEOUT_S = 30.0

_prepared: set[Path] = set()
_lock = threading.Lock()


def prepare(path: Path) -> None:
    """Create the file, its tables and WAL mode once per process (idempotent)."""
    with _lock:
        if path in _prepared:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        with closing(conn):
            SqliteSaver(conn).setup()
        _prepared.add(path)


@asynccontextmanager
async def open_saver(path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """A saver on its own connection to the prepared file."""
    prepare(path)
    async with aiosqlite.connect(path, timeout=BUSY_TIMEOUT_S) as conn:
        yield AsyncSqliteSaver(conn)
