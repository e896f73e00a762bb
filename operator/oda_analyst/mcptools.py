"""What every MCP server of ours shares: who a call acts for, and how our errors reach a model.

Lives beside ``config`` and ``errors`` so that the retriever's and the code agent's servers, which
import-linter keeps apart, use one definition of the caller's identity and one error format.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_headers
from starlette.middleware import Middleware

from oda_analyst.config import get_settings
from oda_analyst.errors import OdaError, UsageError
from oda_analyst.service_auth import BearerAuth, bearer_header, check_bind

USER_HEADER = "x-oda-user"
USER_ENV = "ODA_MCP_USER"
TOKEN_ENV = "ODA_MCP_TOKEN"
_USER = re.compile(r"^[A-Za-z0-9_.@+-]{1,128}$")
# An in-process caller (the coordinator serving several users from one process) says whom a call
# is for here, not in the process environment, which every concurrent request would share.
_ACTING_AS: ContextVar[str | None] = ContextVar("oda_mcp_acting_as", default=None)


@contextmanager
def acting_as(user: str) -> Iterator[None]:
    """In-process MCP calls made (and servers connected) inside this block act for ``user``."""
    token = _ACTING_AS.set(user)
    try:
        yield
    finally:
        _ACTING_AS.reset(token)


def http_middleware(host: str) -> list[Middleware]:
    """What an MCP server served over HTTP on ``host`` runs behind: the release's bearer token
    (ODA_MCP_TOKEN) on every route but /healthz; none on loopback without a token."""
    token = get_settings().mcp_token
    check_bind(host, token, what="the MCP server", variable=TOKEN_ENV)
    return [Middleware(BearerAuth, token=token, what="the MCP server")] if token else []


def call_headers(user: str) -> dict[str, str]:
    """The headers of an HTTP MCP call made for ``user``: who it is for, and the release's token
    that lets the server believe it."""
    return {USER_HEADER: user, **bearer_header(get_settings().mcp_token)}


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (e.g. an arbitrary uid in a container)
        return "anonymous"


def current_user() -> str:
    """The user this call acts for: the x-oda-user header, else the in-process caller's
    ``acting_as``, else ODA_MCP_USER, else the OS user."""
    header = get_http_headers().get(USER_HEADER, "").strip()
    acting = (_ACTING_AS.get() or "").strip()
    user = header or acting or os.environ.get(USER_ENV, "").strip() or _os_user()
    if not _USER.match(user):
        source = (
            f"the {USER_HEADER} header"
            if header
            else "the in-process caller"
            if acting
            else f"{USER_ENV} or the OS user"
        )
        raise UsageError(
            f"invalid user name from {source}",
            hint="use 1-128 letters, digits, '_', '.', '@', '+', '-'",
        )
    return user


def tool_message(err: OdaError) -> str:
    """What a model reads: the code, the message and what to do."""
    return f"{err.code}: {err.message}" + (f" — {err.hint}" if err.hint else "")


@contextmanager
def tool_errors() -> Iterator[None]:
    """Our typed errors become ToolErrors the model reads; any other stays masked."""
    try:
        yield
    except OdaError as err:
        raise ToolError(tool_message(err)) from None


def parse_as_of(value: str | None) -> datetime | None:
    """A tool's ``as_of`` argument: ISO 8601 (a trailing Z, or no zone, is UTC); empty = now."""
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"as_of {value!r} is not an ISO 8601 time", hint="e.g. 2022-06-02T00:00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
