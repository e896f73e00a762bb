"""Server-side sessions (OWASP ASVS 4.0 V3.2, V3.3, V3.4), with ``starsessions``.

The cookie holds only a random session id (128 bits); what it stands for is kept here, so
signing out deletes it and a copy of the old cookie reads nothing afterwards. Sign-in issues a
new id (no fixation). A session ends after ``idle_s`` without a request and, however busy,
``absolute_s`` after sign-in: both are checked on every request from the times kept in the
session itself, so they hold whichever store keeps it (this process's memory, or Redis when
there are replicas). The cookie is ``HttpOnly``, ``SameSite`` and, when the UI's public URL is
https, ``Secure`` with the ``__Host-`` prefix (no sub-domain can set or read it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.requests import HTTPConnection
from starsessions import SessionStore, get_session_id, regenerate_session_id

COOKIE = "oda_session"
# The keys the UI keeps in a session; Authlib keeps its OIDC state beside them.
_USER, _SINCE, _SEEN = "user", "since", "seen"


@dataclass(frozen=True)
class SessionPolicy:
    idle_s: int = 30 * 60
    absolute_s: int = 12 * 3600
    secure: bool = False

    @property
    def cookie(self) -> str:
        # Browsers accept a __Host- cookie only when Secure, with Path=/ and no Domain.
        return f"__Host-{COOKIE}" if self.secure else COOKIE


class ExpiringMemoryStore(SessionStore):
    """Sessions in this process's memory that expire on their own and never grow without
    bound (starsessions' InMemoryStore keeps every session for ever). One process only: with
    replicas, ``webui.serve`` uses starsessions' RedisStore."""

    def __init__(self, *, max_sessions: int = 50_000) -> None:
        self.max_sessions = max_sessions
        self._data: dict[str, tuple[float, bytes]] = {}

    async def read(self, session_id: str, lifetime: int) -> bytes:
        entry = self._data.get(session_id)
        if entry is None:
            return b""
        if entry[0] <= time.monotonic():
            del self._data[session_id]
            return b""
        return entry[1]

    async def write(self, session_id: str, data: bytes, lifetime: int, ttl: int) -> str:
        self._data.pop(session_id, None)  # re-inserted last: the dict's order is by last write
        if len(self._data) >= self.max_sessions:
            now = time.monotonic()
            for sid in [s for s, (until, _) in self._data.items() if until <= now]:
                del self._data[sid]
            while len(self._data) >= self.max_sessions:
                del self._data[next(iter(self._data))]  # the least recently written
        self._data[session_id] = (time.monotonic() + max(ttl, 1), data)
        return session_id

    async def remove(self, session_id: str) -> None:
        self._data.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._data)


async def sign_in(connection: HTTPConnection, store: SessionStore, user: str) -> None:
    """Make ``user`` the session's user under a fresh session id; the old id is dropped."""
    old = get_session_id(connection)
    if old:
        await store.remove(old)
    connection.session.clear()
    regenerate_session_id(connection)
    now = time.time()
    connection.session.update({_USER: user, _SINCE: now, _SEEN: now})


def sign_out(connection: HTTPConnection) -> None:
    """End the session: starsessions deletes it from the store and expires the cookie."""
    connection.session.clear()


def current_user(connection: HTTPConnection, policy: SessionPolicy) -> str | None:
    """The signed-in user, or None; a session past its idle or absolute lifetime is ended."""
    session = connection.session
    user, since, seen = session.get(_USER), session.get(_SINCE), session.get(_SEEN)
    if not isinstance(user, str):
        return None
    now = time.time()
    if (
        not isinstance(since, int | float)
        or not isinstance(seen, int | float)
        or now - since > policy.absolute_s
        or now - seen > policy.idle_s
    ):
        sign_out(connection)
        return None
    session[_SEEN] = now
    return user
