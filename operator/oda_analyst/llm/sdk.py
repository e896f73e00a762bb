"""The one module that touches the ``openai`` SDK: its client set up for our model servers, and
what its answers and errors mean in our terms.

The client imports it only when a model is configured: the SDK takes most of a second to import,
and a process that runs by the rules alone never pays for it. The SDK's own retries are off
(``max_retries=0``): it would resend a read timeout and every 5xx, including the 500 that
llama-cpp-python answers a malformed request with; failures.py decides instead.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from oda_analyst.llm.errors import LLMUnavailableError
from oda_analyst.llm.failures import (
    BASE_URL_HINT,
    OVERLOADED_HINT,
    Failure,
    Target,
    not_json,
    plain_server_text,
    server_text,
    status_failure,
)
from oda_analyst.llm.protocol import protocol_error

USER_AGENT = "oda-analyst-llm/0.1"
_NO_KEY = "no-key"
"""The SDK will not start without a key; a server that takes none is sent no Authorization."""


class Sdk:
    """An ``openai.OpenAI`` for one endpoint, every request read to its end."""

    failures = (openai.APIError, httpx.TransportError, json.JSONDecodeError, UnicodeDecodeError)
    """What a request can fail with: the SDK's errors, httpx's own while a stream is read, and a
    body the SDK could not decode."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: httpx.Timeout,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = openai.OpenAI(
            base_url=base_url + "/",
            api_key=api_key or _NO_KEY,
            max_retries=0,
            timeout=timeout,
            default_headers={"User-Agent": USER_AGENT},
            http_client=httpx.Client(timeout=timeout, transport=transport),
        )
        self._headers: dict[str, str | openai.Omit] = (
            {} if api_key else {"Authorization": openai.omit}
        )

    def close(self) -> None:
        self._client.close()

    def complete(self, args: dict[str, Any], timeout: httpx.Timeout) -> Any:
        """One chat completion's body, read to the end (a stream too, so that a connection
        dropped mid-stream is a failed attempt like any other)."""
        reply = self._client.chat.completions.create(
            **args, timeout=timeout, extra_headers=self._headers
        )
        if isinstance(reply, openai.Stream):
            with reply:
                return read_stream(reply)
        if isinstance(reply, str):  # the SDK's answer for a body it could not decode
            raise not_json(reply)
        return reply.to_dict() if isinstance(reply, openai.BaseModel) else reply

    def get(self, url: str, timeout: httpx.Timeout) -> Any:
        """A JSON document (``url`` relative to the base URL, or absolute)."""
        return self._client.get(
            url, cast_to=object, options={"timeout": timeout, "headers": self._headers}
        )

    @staticmethod
    def failure(exc: Exception, target: Target, read_timeout_s: float | None) -> Failure:
        """What ``exc`` (one of ``failures``) means."""
        base = target.base_url
        # The SDK wraps transport errors; a stream read after it returned raises httpx's own.
        cause = (exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc) or exc
        if isinstance(cause, httpx.ReadTimeout):
            return Failure(
                LLMUnavailableError(
                    f"the model endpoint {base} did not answer within the read timeout of "
                    f"{read_timeout_s} s (not retried: the server is still busy with it)",
                    "the model server is too slow for ODA_LLM_TIMEOUT_S: give it more time, or "
                    "a smaller model or prompt",
                )
            )
        if isinstance(cause, httpx.TimeoutException | openai.APITimeoutError):
            text = f"the model endpoint {base} timed out ({type(cause).__name__}, read timeout "
            return Failure(LLMUnavailableError(f"{text}{read_timeout_s} s)", BASE_URL_HINT), True)
        if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
            why = str(cause) or type(cause).__name__
            text = f"cannot reach the model endpoint {base}: {why}"
            return Failure(LLMUnavailableError(text, BASE_URL_HINT), True)
        if isinstance(exc, openai.APIStatusError):
            message = plain_server_text(server_text(exc.body, exc.response.text[:300]))
            retry_after = exc.response.headers.get("retry-after")
            return status_failure(exc.status_code, message, retry_after, target)
        if isinstance(exc, openai.APIError):  # an error event inside a stream
            text = plain_server_text(server_text(exc.body, exc.message))
            return Failure(
                LLMUnavailableError(
                    f"the model endpoint reported an error mid-stream: {text}", OVERLOADED_HINT
                )
            )
        return Failure(not_json(getattr(exc, "doc", str(exc))))


def read_stream(chunks: openai.Stream[ChatCompletionChunk]) -> dict[str, Any]:
    """A non-streamed chat-completion body from the chunks of a streamed one.

    The SDK's own accumulator joins content and tool-call argument deltas; ``usage`` is the one
    the server sent (with ``stream_options.include_usage``), absent when it sent none.
    """
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    seen = False
    for chunk in chunks:
        try:
            state.handle_chunk(chunk)
        except (AttributeError, TypeError, IndexError, KeyError):
            what = f"a streamed event is not a chat-completion chunk: {chunk!r:.80}"
            raise protocol_error(what) from None
        seen = True
    if not seen:
        raise protocol_error("the stream ended before any event")
    body: dict[str, Any] = state.current_completion_snapshot.to_dict(exclude_none=True)
    return body
