"""The LLM client every model-backed stage uses: an OpenAI-compatible endpoint (vLLM).

One ``chat`` call is one ``POST {base_url}/chat/completions`` (plus bounded retries on 429,
5xx, timeouts and connection errors). ``structured`` adds constrained decoding from a JSON Schema
and checks the answer, optionally showing the model its errors and asking again. Every call,
failed or not, is recorded per stage in a ``TokenLedger``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import httpx
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError, OdaError
from oda_analyst.llm.errors import LLMError, LLMOutputError, LLMUnavailableError
from oda_analyst.llm.protocol import (
    build_chat_body,
    error_message,
    parse_chat_response,
    parse_models,
)
from oda_analyst.llm.retry import RetryPolicy, parse_retry_after, retryable_status
from oda_analyst.llm.structured import check_schema, model_errors, parse_json, schema_errors
from oda_analyst.llm.tokens import TokenLedger
from oda_analyst.llm.types import ChatResult, Message, StructuredMode, ToolSpec, Usage

M = TypeVar("M", bound=BaseModel)

_USER_AGENT = "oda-analyst-llm/0.1"
_BASE_URL_HINT = "check ODA_LLM_BASE_URL and that the model server (e.g. vLLM) is running"
_OVERLOADED_HINT = (
    "the model server is overloaded or failing: check its logs, or ODA_LLM_BASE_URL if it is "
    "the wrong server"
)


@dataclass
class _Outcome:
    data: Any = None
    error: OdaError | None = None
    attempts: int = 0


class LLMClient:
    """A synchronous client for one model on one OpenAI-compatible endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        structured_mode: StructuredMode = "response_format",
        strict_schema: bool = True,
        ledger: TokenLedger | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.structured_mode: StructuredMode = structured_mode
        self.strict_schema = strict_schema
        self.retry = retry or RetryPolicy()
        self.ledger = ledger if ledger is not None else TokenLedger()
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._sleep = sleep
        self._clock = clock
        headers = {"User-Agent": _USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=self._timeout(None),
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> LLMClient | None:
        """A client for ODA_LLM_BASE_URL/ODA_LLM_MODEL, or None when neither is set (rules only).

        ``options`` go to the constructor (timeouts, retry policy, ledger, structured mode).
        """
        base_url = (settings.llm_base_url or "").strip()
        model = (settings.llm_model or "").strip()
        if not base_url and not model:
            return None
        if not base_url or not model:
            missing = "ODA_LLM_BASE_URL" if not base_url else "ODA_LLM_MODEL"
            raise ConfigError(
                f"{missing} is not set but the other LLM setting is",
                hint="set both ODA_LLM_BASE_URL (e.g. http://vllm:8000/v1) and ODA_LLM_MODEL, "
                "or neither for the rule-based path",
            )
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"ODA_LLM_BASE_URL must be an http(s) URL, got {base_url!r}",
                hint="use the OpenAI-compatible API root, e.g. http://vllm:8000/v1",
            )
        mode = settings.llm_structured_mode
        if mode not in ("response_format", "structured_outputs", "guided_json"):
            raise ConfigError(
                f"ODA_LLM_STRUCTURED_MODE {mode!r} is not known",
                hint="use response_format, structured_outputs or guided_json",
            )
        options.setdefault("read_timeout_s", settings.llm_timeout_s)
        options.setdefault("retry", RetryPolicy(max_retries=settings.llm_max_retries))
        options.setdefault("structured_mode", mode)
        return cls(base_url, model, api_key=settings.llm_api_key or None, **options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def models(self) -> list[str]:
        """The model ids the endpoint serves (``GET /models``); a cheap health check."""
        outcome = self._send("GET", "models", None, self._timeout(None))
        if outcome.error is not None:
            raise outcome.error
        return parse_models(outcome.data)

    def check_model(self) -> None:
        """Raise ConfigError unless the configured model is among those served."""
        served = self.models()
        if self.model not in served:
            raise ConfigError(
                f"model {self.model!r} is not served at {self.base_url}",
                hint=f"set ODA_LLM_MODEL to one of: {', '.join(served) or '(none served)'}",
            )

    def chat(
        self,
        messages: Sequence[Message],
        *,
        stage: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        response_schema: dict[str, Any] | None = None,
        schema_name: str = "plan",
        timeout_s: float | None = None,
        ledger: TokenLedger | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion; tool calls come back parsed (and checked against ``tools``).

        Raises ``LLMUnavailableError`` after the bounded retries, ``LLMError`` for a rejected
        request or a malformed response, ``LLMToolCallError`` for an invalid tool call.
        """
        body = build_chat_body(
            self.model,
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=tools,
            tool_choice=tool_choice,
            response_schema=response_schema,
            schema_name=schema_name,
            structured_mode=self.structured_mode,
            strict=self.strict_schema,
            extra=extra,
        )
        book = ledger if ledger is not None else self.ledger
        started = self._clock()
        outcome = self._send("POST", "chat/completions", body, self._timeout(timeout_s))
        latency = self._clock() - started
        usage: Usage | None = None
        try:
            if outcome.error is not None:
                raise outcome.error
            result = parse_chat_response(
                outcome.data, stage=stage, latency_s=latency, attempts=outcome.attempts, tools=tools
            )
            usage = result.usage
        except LLMOutputError as exc:
            # The server answered and billed the tokens; the answer is the model's mistake, not
            # a failed call, so it is counted like any other.
            usage = exc.result.usage if exc.result else Usage()
            raise
        finally:
            book.record(
                stage,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                total_tokens=usage.total_tokens if usage else 0,
                retries=max(outcome.attempts - 1, 0),
                latency_s=latency,
                failed=usage is None,
            )
        return result

    @overload
    def structured(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        *,
        stage: str,
        model_cls: type[M],
        schema_name: str = ...,
        repairs: int = ...,
        **chat_options: Any,
    ) -> tuple[M, ChatResult]: ...

    @overload
    def structured(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any],
        *,
        stage: str,
        model_cls: None = ...,
        schema_name: str = ...,
        repairs: int = ...,
        **chat_options: Any,
    ) -> tuple[dict[str, Any], ChatResult]: ...

    def structured(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        *,
        stage: str,
        model_cls: type[BaseModel] | None = None,
        schema_name: str = "plan",
        repairs: int = 0,
        **chat_options: Any,
    ) -> tuple[Any, ChatResult]:
        """A JSON object constrained by ``schema`` (default: ``model_cls``'s schema), checked.

        With ``model_cls`` the object is also validated into that model, so rules the schema
        cannot express (cross-field checks) are enforced too. ``repairs`` is how many times a
        rejected answer is shown back to the model with its errors before ``LLMOutputError``.
        """
        if schema is None:
            if model_cls is None:
                raise ValueError("structured() needs a schema or a model_cls")
            schema = model_cls.model_json_schema()
        validator = check_schema(schema)
        conversation = list(messages)
        for attempt in range(repairs + 1):
            result = self.chat(
                conversation,
                stage=stage,
                response_schema=schema,
                schema_name=schema_name,
                **chat_options,
            )
            try:
                return _check_answer(result, validator, model_cls), result
            except LLMOutputError as exc:
                if attempt == repairs:
                    raise
                conversation += [
                    {"role": "assistant", "content": result.content or ""},
                    {"role": "user", "content": exc.feedback()},
                ]
        raise AssertionError("unreachable")  # pragma: no cover

    def _timeout(self, read_s: float | None) -> httpx.Timeout:
        read = self.read_timeout_s if read_s is None else read_s
        return httpx.Timeout(read, connect=min(self.connect_timeout_s, read))

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, timeout: httpx.Timeout
    ) -> _Outcome:
        """Send with bounded retries; never raises, the outcome carries the error."""
        outcome = _Outcome()
        while True:
            outcome.attempts += 1
            retry_after: float | None = None
            try:
                response = self._http.request(method, path, json=body, timeout=timeout)
            except httpx.TimeoutException as exc:
                failure = (
                    f"the model endpoint {self.base_url} timed out ({type(exc).__name__}, "
                    f"read timeout {timeout.read} s)"
                )
                hint = _BASE_URL_HINT
            except httpx.TransportError as exc:
                failure = f"cannot reach the model endpoint {self.base_url}: {exc or type(exc)}"
                hint = _BASE_URL_HINT
            else:
                if response.status_code < 400:
                    return _decode(response, outcome)
                message = error_message(_json_or_none(response), response.text[:300])
                if not retryable_status(response.status_code):
                    outcome.error = _status_error(response.status_code, message, self)
                    return outcome
                failure = f"the model endpoint answered HTTP {response.status_code}: {message}"
                hint = _OVERLOADED_HINT
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            retry = outcome.attempts - 1
            if retry >= self.retry.max_retries:
                outcome.error = LLMUnavailableError(
                    f"{failure} (gave up after {outcome.attempts} attempt(s))", hint
                )
                return outcome
            self._sleep(self.retry.wait_s(retry, retry_after))


def _check_answer(
    result: ChatResult, validator: Draft202012Validator, model_cls: type[BaseModel] | None
) -> dict[str, Any] | BaseModel:
    data, problem = parse_json(result.content)
    if problem is not None:
        cut = result.finish_reason == "length"
        raise LLMOutputError(
            problem + (" (the answer was cut off at max_tokens)" if cut else ""),
            hint="raise max_tokens for this stage" if cut else None,
            content=result.content or "",
            errors=(problem,),
            result=result,
        )
    errors = schema_errors(data, validator)
    if not errors and not isinstance(data, dict):
        errors = (f"$: expected a JSON object, got {type(data).__name__}",)
    if not errors and model_cls is not None:
        instance, errors = model_errors(data, model_cls)
        if instance is not None:
            return instance
    if errors:
        raise LLMOutputError(
            f"the model's answer breaks the schema: {errors[0]}",
            content=result.content or "",
            errors=errors,
            result=result,
        )
    assert isinstance(data, dict)
    return data


def _decode(response: httpx.Response, outcome: _Outcome) -> _Outcome:
    try:
        outcome.data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        outcome.error = LLMError(
            f"the model endpoint answered HTTP {response.status_code} with a body that is not "
            f"JSON: {response.text[:200]!r}",
            hint="check that ODA_LLM_BASE_URL points at an OpenAI-compatible /v1 endpoint",
        )
    return outcome


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _status_error(status: int, message: str, client: LLMClient) -> LLMError:
    text = f"the model endpoint rejected the request with HTTP {status}: {message}"
    if status in (401, 403):
        return LLMError(text, hint="check ODA_LLM_API_KEY (sent as a Bearer token)")
    if status == 404:
        return LLMError(
            text,
            hint=f"check ODA_LLM_BASE_URL (the API root, usually ending in /v1; now "
            f"{client.base_url}) and ODA_LLM_MODEL (now {client.model!r})",
        )
    return LLMError(
        text,
        hint="the request is malformed for this server; if it names response_format, "
        "try another structured mode (structured_outputs or guided_json for vLLM)",
    )
