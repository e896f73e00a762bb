"""Conversation history in Postgres, for a cluster install that runs one.

The same three tables as the SQLite store, with a sequence column so messages keep the order
they were added in even when two land within one clock tick. Payloads are ``jsonb``. One
connection in autocommit mode, guarded by a lock: the UI's writes are few and small.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from oda_analyst.errors import StoreError
from oda_analyst.webui.history import Conversation, Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS oda_ui_conversations (
    id text PRIMARY KEY, user_id text NOT NULL, title text NOT NULL,
    created double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS oda_ui_conversations_user
    ON oda_ui_conversations (user_id, created);
CREATE TABLE IF NOT EXISTS oda_ui_messages (
    seq bigserial, id text PRIMARY KEY,
    conversation_id text NOT NULL REFERENCES oda_ui_conversations (id),
    role text NOT NULL, payload jsonb NOT NULL, created double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS oda_ui_messages_conversation
    ON oda_ui_messages (conversation_id, seq);
CREATE TABLE IF NOT EXISTS oda_ui_feedback (
    message_id text PRIMARY KEY REFERENCES oda_ui_messages (id), user_id text NOT NULL,
    request_id text, score integer NOT NULL, comment text NOT NULL,
    created double precision NOT NULL
);
"""
_MESSAGE = (
    "SELECT m.id, m.conversation_id, m.role, m.payload, m.created FROM oda_ui_messages m "
    "JOIN oda_ui_conversations c ON c.id = m.conversation_id "
)


@contextmanager
def _guard() -> Iterator[None]:
    """Postgres failing mid-way is a StoreError the page can show, not a driver traceback."""
    try:
        yield
    except psycopg.OperationalError as err:
        raise StoreError(
            f"the conversation history (Postgres) did not answer: {str(err).strip()[:200]}",
            hint="try again in a minute; if it persists, tell the administrator",
        ) from err


class PostgresHistory:
    """The UI's store in Postgres (same contract as ``History``)."""

    def __init__(self, url: str, *, timeout_s: int = 5) -> None:
        try:
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=timeout_s)
            self._db.execute(_SCHEMA)
        except psycopg.Error as err:
            where = url.rpartition("@")[2]
            raise StoreError(
                f"the web UI's history store at {where} is not usable ({type(err).__name__}: "
                f"{str(err).strip().splitlines()[0] if str(err).strip() else 'no detail'})",
                hint="check ODA_UI_POSTGRES_URL and that Postgres is running, or set "
                "ODA_UI_HISTORY=sqlite",
            ) from err
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock, _guard():
            return self._db.execute(sql, args).fetchall()

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        with self._lock, _guard():
            self._db.execute(sql, args)

    def create_conversation(self, user: str, title: str) -> Conversation:
        conv = Conversation(uuid.uuid4().hex, user, title[:120], time.time())
        self._write(
            "INSERT INTO oda_ui_conversations VALUES (%s, %s, %s, %s)",
            (conv.id, conv.user, conv.title, conv.created),
        )
        return conv

    def conversation(self, user: str, conversation_id: str) -> Conversation | None:
        rows = self._rows(
            "SELECT id, user_id, title, created FROM oda_ui_conversations "
            "WHERE id = %s AND user_id = %s",
            (conversation_id, user),
        )
        return Conversation(*rows[0]) if rows else None

    def conversations(self, user: str) -> list[Conversation]:
        rows = self._rows(
            "SELECT id, user_id, title, created FROM oda_ui_conversations "
            "WHERE user_id = %s ORDER BY created DESC",
            (user,),
        )
        return [Conversation(*r) for r in rows]

    def add_message(self, conversation_id: str, role: str, payload: dict[str, Any]) -> Message:
        msg = Message(uuid.uuid4().hex, conversation_id, role, payload, time.time())
        # Through json once, as the other stores do: a payload may hold dates or paths.
        stored = json.loads(json.dumps(payload, default=str))
        self._write(
            "INSERT INTO oda_ui_messages (id, conversation_id, role, payload, created) "
            "VALUES (%s, %s, %s, %s, %s)",
            (msg.id, conversation_id, role, Jsonb(stored), msg.created),
        )
        return msg

    def messages(self, user: str, conversation_id: str) -> list[Message]:
        rows = self._rows(
            _MESSAGE + "WHERE m.conversation_id = %s AND c.user_id = %s ORDER BY m.seq",
            (conversation_id, user),
        )
        return [Message(*r) for r in rows]

    def message(self, user: str, message_id: str) -> Message | None:
        rows = self._rows(_MESSAGE + "WHERE m.id = %s AND c.user_id = %s", (message_id, user))
        return Message(*rows[0]) if rows else None

    def set_feedback(
        self, user: str, message_id: str, request_id: str | None, score: int, comment: str
    ) -> None:
        self._write(
            "INSERT INTO oda_ui_feedback VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (message_id) DO UPDATE SET user_id = EXCLUDED.user_id, "
            "request_id = EXCLUDED.request_id, score = EXCLUDED.score, "
            "comment = EXCLUDED.comment, created = EXCLUDED.created",
            (message_id, user, request_id, score, comment[:2000], time.time()),
        )

    def feedback(self, message_id: str) -> tuple[int, str, str | None] | None:
        rows = self._rows(
            "SELECT score, comment, request_id FROM oda_ui_feedback WHERE message_id = %s",
            (message_id,),
        )
        return (int(rows[0][0]), str(rows[0][1]), rows[0][2]) if rows else None
