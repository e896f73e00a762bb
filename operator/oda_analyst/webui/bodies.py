"""Reading an API request's JSON body: anything but the object a route takes is a 400 with a
sentence saying what is wrong (``BadRequestError``), never a server error (ASVS 4.0 V13.1.3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request

MAX_BODY = 64 * 1024  # a question, a reply or a comment: far below this


class BadRequestError(Exception):
    """The request's body is not what the route takes; the message says what is wrong."""


async def json_object(request: Request) -> dict[str, Any]:
    body = await request.body()
    if len(body) > MAX_BODY:
        raise BadRequestError(f"the request body is over {MAX_BODY // 1024} KiB")
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequestError("the request body is not JSON") from err
    if not isinstance(value, dict):
        raise BadRequestError("the request body is not a JSON object")
    return value


def required_str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise BadRequestError(f"'{key}' is missing or not a string")
    return value


def optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise BadRequestError(f"'{key}' is not a string")
    return value


def optional_time(body: dict[str, Any], key: str) -> datetime | None:
    """An ISO 8601 time; one without an offset is UTC (the page's control says UTC)."""
    text = optional_str(body, key)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as err:
        raise BadRequestError(f"'{key}' is not an ISO 8601 time (e.g. 2022-06-02T09:00)") from err
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
