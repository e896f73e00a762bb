"""Conversation history in SQLite: conversations, their messages, feedback on answers.

Every read takes the user and filters on it, so a conversation id alone never reveals another
user's conversation. Messages are stored as JSON payloads (the question, or the coordinator's
answer as the UI shows it), so a restart shows the same page.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, user TEXT NOT NULL, title TEXT NOT NULL, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_user ON conversations(user, created);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations(id),
    role TEXT NOT NULL, payload TEXT NOT NULL, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_conversation ON messages(conversation_id, created);
CREATE TABLE IF NOT EXISTS feedback (
    message_id TEXT PRIMARY KEY REFERENCES messages(id), user TEXT NOT NULL,
    request_id TEXT, score INTEGER NOT NULL, comment TEXT NOT NULL, created REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Conversation:
    id: str
    user: str
    title: str
    created: float


@dataclass(frozen=True)
class Message:
    id: str
    conversation_id: str
    role: str
    payload: dict[str, Any]
    created: float


class History:
    """The UI's store. One connection guarded by a lock: the UI's writes are few and small."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def create_conversation(self, user: str, title: str) -> Conversation:
        conv = Conversation(uuid.uuid4().hex, user, title[:120], time.time())
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?)",
                (conv.id, conv.user, conv.title, conv.created),
            )
        return conv

    def conversation(self, user: str, conversation_id: str) -> Conversation | None:
        """The conversation if it is ``user``'s, else None (whether or not it exists)."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, user, title, created FROM conversations WHERE id = ? AND user = ?",
                (conversation_id, user),
            ).fetchone()
        return Conversation(*row) if row else None

    def conversations(self, user: str) -> list[Conversation]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, user, title, created FROM conversations WHERE user = ? "
                "ORDER BY created DESC",
                (user,),
            ).fetchall()
        return [Conversation(*r) for r in rows]

    def add_message(self, conversation_id: str, role: str, payload: dict[str, Any]) -> Message:
        msg = Message(uuid.uuid4().hex, conversation_id, role, payload, time.time())
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                (msg.id, conversation_id, role, json.dumps(payload, default=str), msg.created),
            )
        return msg

    def messages(self, user: str, conversation_id: str) -> list[Message]:
        with self._lock:
            rows = self._db.execute(
                "SELECT m.id, m.conversation_id, m.role, m.payload, m.created FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_id "
                "WHERE m.conversation_id = ? AND c.user = ? ORDER BY m.created",
                (conversation_id, user),
            ).fetchall()
        return [Message(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    def message(self, user: str, message_id: str) -> Message | None:
        with self._lock:
            row = self._db.execute(
                "SELECT m.id, m.conversation_id, m.role, m.payload, m.created FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ? AND c.user = ?",
                (message_id, user),
            ).fetchone()
        return Message(row[0], row[1], row[2], json.loads(row[3]), row[4]) if row else None

    def set_feedback(
        self, user: str, message_id: str, request_id: str | None, score: int, comment: str
    ) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO feedback VALUES (?, ?, ?, ?, ?, ?)",
                (message_id, user, request_id, score, comment[:2000], time.time()),
            )

    def feedback(self, message_id: str) -> tuple[int, str, str | None] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT score, comment, request_id FROM feedback WHERE message_id = ?",
                (message_id,),
            ).fetchone()
        return (int(row[0]), str(row[1]), row[2]) if row else None
