"""Conversation history in Redis, for a cluster install: the Redis that already keeps the
pipeline's checkpoints (``ODA_REDIS_URL``), under keys of the UI's own prefix.

Keys (``p`` is the prefix, ``oda:ui`` unless told otherwise)::

    p:conv:<id>          hash  user, title, created
    p:user:<user>        zset  conversation ids scored by creation time
    p:msgs:<conv id>     list  message ids in the order they were added
    p:msg:<id>           hash  conversation_id, role, payload (JSON), created
    p:feedback:<msg id>  hash  user, request_id, score, comment, created

Nothing expires: history is kept until someone deletes it, as with the SQLite file. Whether it
survives a Redis restart is the server's persistence (AOF or RDB), which a cluster Redis has on.
Every read checks the conversation's ``user`` field, so an id alone reveals nothing.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import redis

from oda_analyst.errors import StoreError
from oda_analyst.webui.history import Conversation, Message

DEFAULT_PREFIX = "oda:ui"
P = ParamSpec("P")
R = TypeVar("R")


def _guarded(
    method: Callable[Concatenate[RedisHistory, P], R],
) -> Callable[Concatenate[RedisHistory, P], R]:
    """Redis failing mid-way is a StoreError the page can show, not a driver traceback."""

    def call(store: RedisHistory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(store, *args, **kwargs)
        except redis.RedisError as err:
            raise StoreError(
                f"the conversation history (Redis) did not answer: {err}",
                hint="try again in a minute; if it persists, tell the administrator",
            ) from err

    functools.update_wrapper(call, method)
    return call


class RedisHistory:
    """The UI's store in Redis (same contract as ``History``)."""

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, timeout_s: float = 5.0) -> None:
        self._p = prefix
        self._r = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
        )
        try:
            self._r.ping()
        except redis.RedisError as err:
            raise StoreError(
                f"the web UI's history store at {_safe(url)} does not answer ({err})",
                hint="check ODA_REDIS_URL and that Redis is running, or set ODA_UI_HISTORY=sqlite",
            ) from err

    def close(self) -> None:
        self._r.close()

    def _k(self, *parts: str) -> str:
        return ":".join((self._p, *parts))

    @_guarded
    def create_conversation(self, user: str, title: str) -> Conversation:
        conv = Conversation(uuid.uuid4().hex, user, title[:120], time.time())
        with self._r.pipeline(transaction=True) as pipe:
            pipe.hset(
                self._k("conv", conv.id),
                mapping={"user": user, "title": conv.title, "created": repr(conv.created)},
            )
            pipe.zadd(self._k("user", user), {conv.id: conv.created})
            pipe.execute()
        return conv

    @_guarded
    def conversation(self, user: str, conversation_id: str) -> Conversation | None:
        row = cast(dict[str, str], self._r.hgetall(self._k("conv", conversation_id)))
        if not row or row.get("user") != user:
            return None
        return Conversation(conversation_id, user, row["title"], float(row["created"]))

    @_guarded
    def conversations(self, user: str) -> list[Conversation]:
        ids = cast(list[str], self._r.zrevrange(self._k("user", user), 0, -1))
        with self._r.pipeline(transaction=False) as pipe:
            for cid in ids:
                pipe.hgetall(self._k("conv", cid))
            rows = cast(list[dict[str, str]], pipe.execute())
        return [
            Conversation(cid, user, row["title"], float(row["created"]))
            for cid, row in zip(ids, rows, strict=True)
            if row and row.get("user") == user
        ]

    @_guarded
    def add_message(self, conversation_id: str, role: str, payload: dict[str, Any]) -> Message:
        msg = Message(uuid.uuid4().hex, conversation_id, role, payload, time.time())
        with self._r.pipeline(transaction=True) as pipe:
            pipe.hset(
                self._k("msg", msg.id),
                mapping={
                    "conversation_id": conversation_id,
                    "role": role,
                    "payload": json.dumps(payload, default=str),
                    "created": repr(msg.created),
                },
            )
            pipe.rpush(self._k("msgs", conversation_id), msg.id)
            pipe.execute()
        return msg

    @_guarded
    def messages(self, user: str, conversation_id: str) -> list[Message]:
        if self.conversation(user, conversation_id) is None:
            return []
        ids = cast(list[str], self._r.lrange(self._k("msgs", conversation_id), 0, -1))
        with self._r.pipeline(transaction=False) as pipe:
            for mid in ids:
                pipe.hgetall(self._k("msg", mid))
            rows = cast(list[dict[str, str]], pipe.execute())
        return [_message(mid, row) for mid, row in zip(ids, rows, strict=True) if row]

    @_guarded
    def message(self, user: str, message_id: str) -> Message | None:
        row = cast(dict[str, str], self._r.hgetall(self._k("msg", message_id)))
        if not row or self.conversation(user, row["conversation_id"]) is None:
            return None
        return _message(message_id, row)

    @_guarded
    def set_feedback(
        self, user: str, message_id: str, request_id: str | None, score: int, comment: str
    ) -> None:
        self._r.hset(
            self._k("feedback", message_id),
            mapping={
                "user": user,
                "request_id": request_id or "",
                "score": str(score),
                "comment": comment[:2000],
                "created": repr(time.time()),
            },
        )

    @_guarded
    def feedback(self, message_id: str) -> tuple[int, str, str | None] | None:
        row = cast(dict[str, str], self._r.hgetall(self._k("feedback", message_id)))
        if not row:
            return None
        return int(row["score"]), row["comment"], row["request_id"] or None


def _message(mid: str, row: dict[str, str]) -> Message:
    return Message(
        mid, row["conversation_id"], row["role"], json.loads(row["payload"]), float(row["created"])
    )


def _safe(url: str) -> str:
    """The URL without a password in it (it goes into an error message)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url
