"""What the UI needs of a history store, whichever one holds it (SQLite, Redis, Postgres).

Every read takes the user and answers None or nothing for another user's ids, so a route that
looks an id up *for the signed-in user* cannot show someone else's conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from oda_analyst.webui.history import Conversation, Message


@dataclass(frozen=True)
class Feedback:
    """One thumbs up (+1) or down (-1) on an answer, as stored and as sent on (LangFuse)."""

    message_id: str
    user: str
    request_id: str | None
    trace_id: str | None
    score: int
    comment: str


class HistoryStore(Protocol):
    def close(self) -> None: ...

    def create_conversation(self, user: str, title: str) -> Conversation: ...

    def conversation(self, user: str, conversation_id: str) -> Conversation | None: ...

    def conversations(self, user: str) -> list[Conversation]:
        """``user``'s conversations, newest first."""
        ...

    def add_message(self, conversation_id: str, role: str, payload: dict[str, Any]) -> Message: ...

    def messages(self, user: str, conversation_id: str) -> list[Message]:
        """The conversation's messages in the order they were added, if it is ``user``'s."""
        ...

    def message(self, user: str, message_id: str) -> Message | None: ...

    def set_feedback(
        self, user: str, message_id: str, request_id: str | None, score: int, comment: str
    ) -> None: ...

    def feedback(self, message_id: str) -> tuple[int, str, str | None] | None:
        """(score, comment, request_id) of the feedback on an answer, if any."""
        ...
