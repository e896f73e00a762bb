"""A failed model call in our words: whether another attempt can help, and the error a caller sees.

Retried: connection errors (a server restarting mid-request drops the connection), connect
timeouts, 429 and 5xx. Not retried: a read timeout (the server is still working on the request;
llama.cpp does not cancel it, so a resend queues a second copy behind the first), other 4xx, and
a 5xx whose text says the request is invalid (a malformed request stays malformed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oda_analyst.llm.errors import (
    LLMContextError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
)
from oda_analyst.llm.retry import parse_retry_after, retryable_status
from oda_analyst.llm.types import MODE_LABELS

BASE_URL_HINT = "check ODA_LLM_BASE_URL and that the model server (e.g. vLLM) is running"
PROTOCOL_HINT = "check that ODA_LLM_BASE_URL points at an OpenAI-compatible /v1 endpoint"
OVERLOADED_HINT = (
    "the model server is overloaded or failing: check its logs, or ODA_LLM_BASE_URL if it is "
    "the wrong server"
)

_VALIDATION = re.compile(
    r"validation error|Input should be|Extra inputs are not permitted|Field required|"
    r"is not (?:a )?valid|unsupported|not supported",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"maximum context length is (?P<ctx>\d+) tokens.*?(?:requested (?P<req>\d+) tokens)?"
    r"(?:.*?\((?P<prompt>\d+) in the messages)?",
    re.IGNORECASE | re.DOTALL,
)
_CONTEXT_LLAMA = re.compile(
    r"Requested tokens \((?P<prompt>\d+)\) exceed context window of (?P<ctx>\d+)", re.IGNORECASE
)


@dataclass(frozen=True)
class Target:
    """The endpoint a call went to, as the error texts and hints name it."""

    base_url: str
    model: str
    configured_mode: str


@dataclass(frozen=True)
class Failure:
    """One failed attempt: the error it stands for, and whether to try again (and when)."""

    error: LLMError
    retryable: bool = False
    retry_after: float | None = None

    def given_up(self, attempts: int) -> LLMError:
        return LLMUnavailableError(
            f"{self.error.message} (gave up after {attempts} attempt(s))", self.error.hint
        )


def not_json(text: str) -> LLMError:
    return LLMError(
        f"the model endpoint answered with a body that is not JSON: {text[:200]!r}",
        hint=PROTOCOL_HINT,
    )


def status_failure(status: int, message: str, retry_after: str | None, target: Target) -> Failure:
    """An HTTP error answer: 429 and 5xx are worth another attempt, unless the text says the
    request itself is invalid (llama-cpp-python answers a malformed request with a 500)."""
    if not retryable_status(status) or _VALIDATION.search(message):
        return Failure(status_error(status, message, target))
    return Failure(
        LLMUnavailableError(
            f"the model endpoint answered HTTP {status}: {message}", OVERLOADED_HINT
        ),
        retryable=True,
        retry_after=parse_retry_after(retry_after),
    )


def server_text(body: object, fallback: str) -> str:
    """The server's explanation from an error body (the SDK has taken ``error`` out already)."""
    if isinstance(body, dict):
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    elif isinstance(body, str) and body:
        return body
    return fallback


def plain_server_text(message: str, limit: int = 240) -> str:
    """A server's error text on one line, without a traceback, bounded: fit for a warning."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        tail = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "^", "~"))]
        lines = tail[-1:] or lines[:1]
    text = " ".join(lines)
    text = re.sub(r"\s*For further information visit \S+", "", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def auth_or_route(err: LLMError) -> bool:
    """Whether a rejection is about the key or the URL, not the request's fields."""
    return " HTTP 401" in err.message or " HTTP 403" in err.message or " HTTP 404" in err.message


def status_error(status: int, message: str, target: Target) -> LLMError:
    """A rejected request in plain words, with the setting that fixes it."""
    text = f"the model endpoint rejected the request with HTTP {status}: {message}"
    if status in (401, 403):
        return LLMRequestError(text, hint="check ODA_LLM_API_KEY (sent as a Bearer token)")
    if status == 404:
        return LLMRequestError(
            text,
            hint=f"check ODA_LLM_BASE_URL (the API root, usually ending in /v1; now "
            f"{target.base_url}) and ODA_LLM_MODEL (now {target.model!r})",
        )
    found = _CONTEXT_LLAMA.search(message) or _CONTEXT.search(message)
    if found is not None and "context" in message.lower():
        prompt = found.groupdict().get("prompt")
        return LLMContextError(
            text,
            prompt_tokens=int(prompt) if prompt else None,
            context_tokens=int(found.group("ctx")),
        )
    mode = target.configured_mode
    if mode != "auto" and ("response_format" in message or "structured_outputs" in message):
        text = (
            f"the model server does not take the structured-output form "
            f"{MODE_LABELS.get(mode, mode)} (HTTP {status}: {message})"
        )
    return LLMRequestError(
        text,
        hint="the request is malformed for this server; if it names response_format, set "
        "ODA_LLM_STRUCTURED_MODE=auto (or the form the server takes: json_object for llama.cpp, "
        "structured_outputs for vLLM)",
    )
