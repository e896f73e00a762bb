"""Checkpoints of request states, keyed by request id, that outlive the process.

Two stores share one contract (``CheckpointStore``):

- ``EmbeddedCheckpointStore``: one SQLite file (``<data_dir>/state.sqlite3``) in WAL mode, so
  several processes may use it at once and a request waiting for clarification is still there
  after a restart, without any server. The default.
- ``RedisCheckpointStore``: the paper's Redis cache; one JSON document per request under
  ``oda:req:<id>`` with an expiry, plus a set of ids per user for ``list``. Chosen by
  ``open_checkpoint_store`` when ``ODA_REDIS_URL`` is set.

Contract:

- ``save(state)`` is a compare-and-set on ``state.version``: it succeeds only if the stored
  version is the one the caller read (0 for a request never saved), stores the state with the
  version bumped and returns that copy. A stale writer gets ``ConcurrentUpdateError`` and must
  load again; saving over a request that expired or was deleted gets ``UnknownRequestError``.
- ``load(id)`` returns the state or raises ``UnknownRequestError`` (never saved, expired or
  deleted).
- Each save sets the request's time to live from ``Retention``: finished requests (rejected,
  completed, failed) are kept 7 days by default, open ones (above all those waiting for an answer)
  30 days.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import ValidationError

from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import StoreError, UsageError
from oda_analyst.retriever.state import RequestState, Stage, utcnow

if TYPE_CHECKING:
    import redis

STATE_FILE = "state.sqlite3"
_EXPIRED_HINT = "the request id may have expired or be mistyped; ask again"

States = list[RequestState]  # `list` is also a method name in the stores below


class ConcurrentUpdateError(StoreError):
    """Another writer saved the request since this copy was loaded."""

    code = "concurrent_update"


class UnknownRequestError(UsageError):
    """No request with this id is stored (never saved, expired or deleted)."""

    code = "unknown_request"


@dataclass(frozen=True)
class Retention:
    """How long a request is kept after its last save."""

    finished: timedelta = timedelta(days=7)
    open: timedelta = timedelta(days=30)

    def __post_init__(self) -> None:
        if self.finished <= timedelta(0) or self.open <= timedelta(0):
            raise UsageError("retention times must be positive", hint="e.g. timedelta(days=7)")

    def ttl(self, state: RequestState) -> timedelta:
        return self.finished if state.terminal else self.open

    @property
    def longest(self) -> timedelta:
        return max(self.finished, self.open)


class CheckpointStore(Protocol):
    """What the retriever needs from a checkpoint store."""

    def save(self, state: RequestState) -> RequestState:
        """Compare-and-set on ``state.version``; return the stored copy (version + 1)."""
        ...

    def load(self, request_id: str) -> RequestState:
        """The stored state, or UnknownRequestError."""
        ...

    def list(self, user: str | None = None, stage: Stage | None = None) -> States:
        """Live requests, oldest first, optionally of one user and/or in one stage."""
        ...

    def delete(self, request_id: str) -> bool:
        """Forget a request; True if it was stored."""
        ...

    def close(self) -> None: ...


def _unknown(request_id: str) -> UnknownRequestError:
    return UnknownRequestError(f"no request {request_id!r} is stored", hint=_EXPIRED_HINT)


def _conflict(request_id: str, found: int, expected: int) -> ConcurrentUpdateError:
    return ConcurrentUpdateError(
        f"request {request_id} was saved by someone else (stored version {found}, "
        f"this copy has {expected})",
        hint="load the request again and re-apply the change",
    )


def _check_cas(request_id: str, found: int | None, expected: int) -> None:
    """Raise unless a save of a copy at ``expected`` may replace what is stored (``found``)."""
    if found is None:
        if expected != 0:
            raise _unknown(request_id)
    elif found != expected:
        raise _conflict(request_id, found, expected)


def _parse(body: str | bytes, where: str) -> RequestState:
    try:
        return RequestState.model_validate_json(body)
    except ValidationError as exc:
        raise StoreError(
            f"the stored state at {where} is not a valid request state: {exc.errors()[0]['msg']}",
            hint="delete that request (or the state file) and ask again",
        ) from None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    stage TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    expires_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_user ON requests (user);
CREATE INDEX IF NOT EXISTS requests_expiry ON requests (expires_at);
"""


class EmbeddedCheckpointStore:
    """Checkpoints in one SQLite file; safe for several threads and processes at once."""

    def __init__(
        self,
        path: Path | str,
        *,
        retention: Retention | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.path = Path(path)
        self.retention = retention or Retention()
        self._clock = clock
        self._lock = threading.Lock()
        with self._errors("open"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are opened explicitly (BEGIN IMMEDIATE) where a
            # read must not be overtaken by another process's write.
            self._db: sqlite3.Connection | None = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable against crashes
            self._db.executescript(_SCHEMA)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(
                f"checkpoint store {self.path}: cannot {what}: {exc}",
                hint="check that ODA_DATA_DIR is a writable folder on a local disk",
            ) from None
        except OSError as exc:
            raise StoreError(
                f"checkpoint store {self.path}: cannot {what}: {exc.strerror or exc}",
                hint="check that ODA_DATA_DIR is a writable folder on a local disk",
            ) from None

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the checkpoint store is closed", hint="open it again")
        return self._db

    def _now(self) -> float:
        return self._clock().timestamp()

    def save(self, state: RequestState) -> RequestState:
        now = self._now()
        saved = state.model_copy(update={"version": state.version + 1})
        expires = now + self.retention.ttl(state).total_seconds()
        with self._lock, self._errors("save"):
            db = self._conn
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT version FROM requests WHERE request_id = ? AND expires_at > ?",
                    (state.request_id, now),
                ).fetchone()
                _check_cas(state.request_id, None if row is None else int(row[0]), state.version)
                db.execute("DELETE FROM requests WHERE expires_at <= ?", (now,))
                db.execute(
                    "INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        saved.request_id,
                        saved.user,
                        saved.stage.value,
                        saved.version,
                        saved.created_at.isoformat(),
                        expires,
                        saved.model_dump_json(),
                    ),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return saved

    def load(self, request_id: str) -> RequestState:
        with self._lock, self._errors("load"):
            row = self._conn.execute(
                "SELECT body FROM requests WHERE request_id = ? AND expires_at > ?",
                (request_id, self._now()),
            ).fetchone()
        if row is None:
            raise _unknown(request_id)
        return _parse(str(row[0]), f"{self.path}#{request_id}")

    def list(self, user: str | None = None, stage: Stage | None = None) -> States:
        sql = "SELECT request_id, body FROM requests WHERE expires_at > ?"
        args: list[object] = [self._now()]
        if user is not None:
            sql += " AND user = ?"
            args.append(user)
        if stage is not None:
            sql += " AND stage = ?"
            args.append(Stage(stage).value)
        sql += " ORDER BY created_at, request_id"
        with self._lock, self._errors("list"):
            rows = self._conn.execute(sql, args).fetchall()
        return [_parse(str(body), f"{self.path}#{rid}") for rid, body in rows]

    def delete(self, request_id: str) -> bool:
        with self._lock, self._errors("delete"):
            cur = self._conn.execute(
                "DELETE FROM requests WHERE request_id = ? AND expires_at > ?",
                (request_id, self._now()),
            )
        return cur.rowcount > 0

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


# Compare-and-set in one round trip, atomic on the server.
# KEYS: request key, all-requests index, user index.
# ARGV: expected version, new JSON, ttl ms, request id, index ttl ms.
_CAS_SCRIPT = """
local current = redis.call('GET', KEYS[1])
local expected = tonumber(ARGV[1])
local found = -1
if current then found = tonumber(cjson.decode(current)['version']) end
if (current and found ~= expected) or ((not current) and expected ~= 0) then
  return {0, found}
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
for i = 2, 3 do
  redis.call('SADD', KEYS[i], ARGV[4])
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[5])
  end
end
return {1, expected + 1}
"""


def _text(value: str | bytes) -> str:
    # The client decodes responses; this only narrows the type the stubs give.
    return value if isinstance(value, str) else value.decode()


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


class RedisCheckpointStore:
    """Checkpoints in Redis: JSON per request with an expiry, sets of ids as indexes.

    Index sets expire no earlier than their longest-lived member; ids whose document has expired
    are dropped from them lazily by ``list``.
    """

    def __init__(
        self,
        url: str,
        *,
        retention: Retention | None = None,
        prefix: str = "oda",
        timeout_s: float = 5.0,
    ) -> None:
        self.url = url
        self.retention = retention or Retention()
        self.prefix = prefix
        # Not reaching the server (refused, timeout, authentication) is a setting to check;
        # any other Redis error means the data under the prefix is not what this store wrote.
        self._unreachable: tuple[type[Exception], ...] = (
            redis.ConnectionError,
            redis.TimeoutError,
        )
        self._redis_errors: tuple[type[Exception], ...] = (redis.RedisError,)
        with self._errors("connect"):
            try:
                self._client: redis.Redis = redis.Redis.from_url(
                    url,
                    decode_responses=True,
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                )
            except ValueError as exc:
                raise StoreError(
                    f"invalid Redis URL {redact_url(url)}: {exc}",
                    hint="check ODA_REDIS_URL (redis://host:6379/0)",
                ) from None
            self._client.ping()
        self._cas = self._client.register_script(_CAS_SCRIPT)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._unreachable as exc:
            raise StoreError(
                f"Redis at {redact_url(self.url)}: cannot {what}: {exc}",
                hint="check ODA_REDIS_URL and that the Redis server is running and reachable",
            ) from None
        except self._redis_errors as exc:
            raise StoreError(
                f"Redis at {redact_url(self.url)}: cannot {what}: {exc}",
                hint=f"the keys under {self.prefix!r}: may not have been written by ODA Analyst; "
                "delete them or choose another database in ODA_REDIS_URL",
            ) from None

    def _key(self, request_id: str) -> str:
        return f"{self.prefix}:req:{request_id}"

    def _all_key(self) -> str:
        return f"{self.prefix}:reqs"

    def _user_key(self, user: str) -> str:
        return f"{self.prefix}:user:{user}"

    def save(self, state: RequestState) -> RequestState:
        saved = state.model_copy(update={"version": state.version + 1})
        ttl_ms = int(self.retention.ttl(state).total_seconds() * 1000)
        index_ms = int(self.retention.longest.total_seconds() * 1000)
        keys = [self._key(state.request_id), self._all_key(), self._user_key(state.user)]
        args: list[str | int] = [
            state.version,
            saved.model_dump_json(),
            ttl_ms,
            state.request_id,
            index_ms,
        ]
        with self._errors("save"):
            ok, found = self._cas(keys=keys, args=args)
        if not ok:
            _check_cas(state.request_id, None if int(found) < 0 else int(found), state.version)
        return saved

    def load(self, request_id: str) -> RequestState:
        with self._errors("load"):
            body = self._client.get(self._key(request_id))
        if body is None:
            raise _unknown(request_id)
        return _parse(body, self._key(request_id))

    def list(self, user: str | None = None, stage: Stage | None = None) -> States:
        index = self._all_key() if user is None else self._user_key(user)
        with self._errors("list"):
            ids = sorted(_text(i) for i in self._client.smembers(index))
            bodies = self._client.mget([self._key(i) for i in ids]) if ids else []
            stale = [i for i, body in zip(ids, bodies, strict=True) if body is None]
            if stale:
                self._client.srem(index, *stale)
        states = [_parse(b, self._key(i)) for i, b in zip(ids, bodies, strict=True) if b]
        if stage is not None:
            states = [s for s in states if s.stage is Stage(stage)]
        return sorted(states, key=lambda s: (s.created_at, s.request_id))

    def delete(self, request_id: str) -> bool:
        with self._errors("delete"):
            body = self._client.get(self._key(request_id))
            if body is None:
                return False
            user = _parse(body, self._key(request_id)).user
            pipe = self._client.pipeline()
            pipe.delete(self._key(request_id))
            pipe.srem(self._all_key(), request_id)
            pipe.srem(self._user_key(user), request_id)
            deleted = pipe.execute()[0]
        return bool(deleted)

    def close(self) -> None:
        self._client.close()


def open_checkpoint_store(
    settings: Settings | None = None, *, retention: Retention | None = None
) -> CheckpointStore:
    """Redis when ``ODA_REDIS_URL`` is set, else the embedded store under ``ODA_DATA_DIR``."""
    settings = settings or get_settings()
    if settings.redis_url:
        return RedisCheckpointStore(settings.redis_url, retention=retention)
    return EmbeddedCheckpointStore(settings.data_dir / STATE_FILE, retention=retention)
