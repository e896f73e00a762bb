"""The LLM client every model-backed stage uses: an OpenAI-compatible endpoint (vLLM, llama.cpp).

One ``chat`` call is one ``POST {base_url}/chat/completions``, streamed or not, always with a
``max_tokens`` bound (plus bounded retries on 429, 5xx, timeouts and connection errors; never for
a request the server rejected as malformed). ``structured`` adds constrained decoding from a JSON
Schema, in the form the server takes (configured, or found by asking it once: ``auto``), and
checks the answer, optionally showing the model its errors and asking again. Every call, failed
or not, is recorded per stage in a ``TokenLedger`` with the server's own ``usage``.

A server found unusable (down after the retries, or rejecting the requests themselves) is
remembered as such for ``down_ttl_s`` by every client of the same endpoint and model in this
process: later calls fail at once, with the reason in plain words, instead of asking again.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

import httpx
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError, OdaError
from oda_analyst.llm.errors import (
    LLMContextError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
)
from oda_analyst.llm.protocol import (
    assemble_stream,
    build_chat_body,
    error_message,
    parse_chat_response,
    parse_models,
)
from oda_analyst.llm.retry import RetryPolicy, parse_retry_after, retryable_status
from oda_analyst.llm.structured import check_schema, model_errors, parse_json, schema_errors
from oda_analyst.llm.tokens import TokenLedger
from oda_analyst.llm.types import (
    MODE_LABELS,
    STRUCTURED_MODES,
    ChatResult,
    Message,
    StructuredMode,
    ToolSpec,
    Usage,
)
from oda_analyst.observability.genai import start_generation

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_TOKENS = 512
"""The completion bound of a call whose caller gave none: no call is ever unbounded."""
DOWN_TTL_S = 60.0
"""How long an endpoint found unusable is remembered as such."""

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


class _Memory:
    """What this process learned about endpoints: the structured form each takes, and which are
    unusable (until when, and why). Shared by every client of the same endpoint and model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.modes: dict[tuple[str, str], StructuredMode] = {}
        self.down: dict[tuple[str, str], tuple[str, float]] = {}

    def mode(self, key: tuple[str, str]) -> StructuredMode | None:
        with self._lock:
            return self.modes.get(key)

    def learn_mode(self, key: tuple[str, str], mode: StructuredMode) -> None:
        with self._lock:
            self.modes[key] = mode

    def down_reason(self, key: tuple[str, str], now: float) -> str | None:
        with self._lock:
            entry = self.down.get(key)
            if entry is None:
                return None
            if now >= entry[1]:
                del self.down[key]
                return None
            return entry[0]

    def mark_down(self, key: tuple[str, str], reason: str, until: float) -> None:
        with self._lock:
            self.down[key] = (reason, until)

    def forget(self, key: tuple[str, str] | None = None) -> None:
        with self._lock:
            if key is None:
                self.modes.clear()
                self.down.clear()
            else:
                self.modes.pop(key, None)
                self.down.pop(key, None)


MEMORY = _Memory()


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
        structured_mode: StructuredMode | Literal["auto"] = "response_format",
        strict_schema: bool = True,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        down_ttl_s: float = DOWN_TTL_S,
        context_tokens: int | None = None,
        max_tokens_cap: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        ledger: TokenLedger | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        if structured_mode != "auto" and structured_mode not in STRUCTURED_MODES:
            raise ValueError(f"unknown structured mode {structured_mode!r}")
        self.configured_mode: StructuredMode | Literal["auto"] = structured_mode
        self.strict_schema = strict_schema
        if default_max_tokens < 1:
            raise ValueError("default_max_tokens must be >= 1")
        self.default_max_tokens = default_max_tokens
        self.down_ttl_s = down_ttl_s
        self.context_tokens = context_tokens
        """The model's context window, when known (configured, reported, or learnt)."""
        self.max_tokens_cap = max_tokens_cap
        """A bound on every call's ``max_tokens`` (an operator's cost cap; tests use it to make
        a real model's answers truncated)."""
        self.extra_body = dict(extra_body or {})
        """Fields added to every chat request (e.g. vLLM's ``top_k``, or ``stop`` sequences)."""
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
        if mode != "auto" and mode not in STRUCTURED_MODES:
            raise ConfigError(
                f"ODA_LLM_STRUCTURED_MODE {mode!r} is not known",
                hint=f"use auto (ask the server once), {', '.join(STRUCTURED_MODES)}",
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

    # --- what this client knows about its server ---------------------------------------------

    @property
    def _key(self) -> tuple[str, str]:
        return (self.base_url, self.model)

    @property
    def structured_mode(self) -> StructuredMode | None:
        """The structured-output form in use: the configured one, or the one ``auto`` found
        (None while it has not asked yet)."""
        if self.configured_mode != "auto":
            return self.configured_mode
        return MEMORY.mode(self._key)

    def unusable(self) -> str | None:
        """Why the server was found unusable (within ``down_ttl_s``), in plain words; or None."""
        return MEMORY.down_reason(self._key, self._clock())

    def _mark_down(self, err: LLMError) -> None:
        if self.down_ttl_s > 0:
            MEMORY.mark_down(self._key, err.message, self._clock() + self.down_ttl_s)

    def models(self) -> list[str]:
        """The model ids the endpoint serves (``GET /models``); a cheap health check."""
        return parse_models(self._models_body())

    def _models_body(self) -> Any:
        outcome = self._send("GET", "models", None, self._timeout(None))
        if outcome.error is not None:
            raise outcome.error
        return outcome.data

    def served_context(self) -> int | None:
        """The context window the server reports for this model (vLLM's ``max_model_len``,
        llama.cpp's ``/props``), else the configured or learnt one; None when nobody says."""
        try:
            entries = self._models_body().get("data") or []
        except (LLMError, AttributeError):
            entries = []
        for entry in entries:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                for field in ("max_model_len", "context_length", "n_ctx"):
                    if isinstance(entry.get(field), int):
                        self.context_tokens = entry[field]
                meta = entry.get("meta")
                if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
                    self.context_tokens = self.context_tokens or meta["n_ctx_train"]
        if self.context_tokens is None:
            root = self.base_url.removesuffix("/v1")
            props = self._send("GET", f"{root}/props", None, self._timeout(5.0))
            data = props.data if isinstance(props.data, dict) else {}
            settings = data.get("default_generation_settings")
            if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
                self.context_tokens = settings["n_ctx"]
        return self.context_tokens

    def check_model(self) -> None:
        """Raise ConfigError unless the configured model is among those served."""
        served = self.models()
        if self.model not in served:
            raise ConfigError(
                f"model {self.model!r} is not served at {self.base_url}",
                hint=f"set ODA_LLM_MODEL to one of: {', '.join(served) or '(none served)'}",
            )

    def detect_structured_mode(self) -> StructuredMode:
        """The structured-output form this server takes: the configured one, else found by
        asking it once (a one-token request per form, in ``STRUCTURED_MODES`` order) and
        remembered for the process. Raises ``LLMError`` when it takes none or does not answer.
        """
        known = self.structured_mode
        if known is not None:
            return known
        down = self.unusable()
        if down is not None:
            raise LLMUnavailableError(self._down_text(down), hint=None)
        refused: list[str] = []
        for mode in STRUCTURED_MODES:
            body = build_chat_body(
                self.model,
                [{"role": "user", "content": "Answer with an empty JSON object."}],
                max_tokens=1,
                response_schema={"type": "object"},
                schema_name="probe",
                structured_mode=mode,
                strict=self.strict_schema,
            )
            outcome = self._send("POST", "chat/completions", body, self._timeout(None))
            if outcome.error is None:
                MEMORY.learn_mode(self._key, mode)
                return mode
            if not isinstance(outcome.error, LLMRequestError) or _auth_or_route(outcome.error):
                assert isinstance(outcome.error, LLMError)
                self._mark_down(outcome.error)
                raise outcome.error
            refused.append(f"{MODE_LABELS[mode]}: {outcome.error.message}")
        err = LLMRequestError(
            f"the model server at {self.base_url} takes none of the structured-output forms "
            "this client knows",
            hint="; ".join(refused)[:600],
        )
        self._mark_down(err)
        raise err

    def _down_text(self, reason: str) -> str:
        return (
            f"the model server at {self.base_url} (model {self.model!r}) is not usable: {reason} "
            f"(remembered for {self.down_ttl_s:.0f} s; not asked again meanwhile)"
        )

    # --- calls -----------------------------------------------------------------------------

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
        stream: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion; tool calls come back parsed (and checked against ``tools``).

        ``max_tokens`` defaults to ``default_max_tokens``: every request carries a bound.
        ``stream`` reads the answer as server-sent events (the same ``ChatResult``).

        Raises ``LLMUnavailableError`` after the bounded retries (or at once while the server
        is remembered unusable), ``LLMRequestError`` for a request the server rejected (not
        retried; ``LLMContextError`` when the prompt does not fit, naming the stage and sizes),
        ``LLMError`` for a malformed response, ``LLMToolCallError`` for an invalid tool call.
        """
        book = ledger if ledger is not None else self.ledger
        down = self.unusable()
        if down is not None:
            book.record(stage, failed=True)
            raise LLMUnavailableError(self._down_text(down), hint=None)
        mode: StructuredMode = "response_format"
        if response_schema is not None:
            try:
                mode = self.detect_structured_mode()
            except LLMError:
                book.record(stage, failed=True)
                raise
        bound = max_tokens if max_tokens is not None else self.default_max_tokens
        if self.max_tokens_cap is not None:
            bound = min(bound, self.max_tokens_cap)
        body = build_chat_body(
            self.model,
            messages,
            temperature=temperature,
            max_tokens=bound,
            tools=tools,
            tool_choice=tool_choice,
            response_schema=response_schema,
            schema_name=schema_name,
            structured_mode=mode,
            strict=self.strict_schema,
            extra={**self.extra_body, **(extra or {})},
        )
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        gen = start_generation(
            model=self.model, stage=stage, server=self.base_url, messages=messages,
            max_tokens=bound, temperature=temperature, structured=response_schema is not None,
            tools=len(tools or ()),
        )  # fmt: skip
        started = self._clock()
        outcome = self._send("POST", "chat/completions", body, self._timeout(timeout_s), stream)
        latency = self._clock() - started
        usage: Usage | None = None
        answer: ChatResult | None = None
        try:
            if outcome.error is not None:
                # A deadline the caller shortened says nothing about the server's health.
                own_deadline = timeout_s is not None and timeout_s < self.read_timeout_s
                raise self._for_stage(outcome.error, stage, remember=not own_deadline)
            result = parse_chat_response(
                outcome.data, stage=stage, latency_s=latency, attempts=outcome.attempts, tools=tools
            )
            usage, answer = result.usage, result
        except LLMOutputError as exc:
            # The server answered and billed the tokens; the answer is the model's mistake, not
            # a failed call, so it is counted like any other.
            usage = exc.result.usage if exc.result else Usage(reported=False)
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
                unreported=usage is not None and not usage.reported,
            )
            gen.finish(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                latency_s=latency, ok=outcome.error is None, attempts=outcome.attempts,
                response_model=answer.model if answer else None,
                finish_reason=answer.finish_reason if answer else None,
                output=_generated_text(answer),
                error=None if outcome.error is None else outcome.error.message,
                error_type=None if outcome.error is None else outcome.error.code,
            )  # fmt: skip
        return result

    def _for_stage(self, err: OdaError, stage: str, *, remember: bool = True) -> OdaError:
        """The error of a failed call as the caller sees it: a context overflow names the
        stage; an unusable server is remembered (a context overflow is the prompt's fault)."""
        if isinstance(err, LLMContextError):
            if err.context_tokens:
                self.context_tokens = err.context_tokens
            size = f"{err.prompt_tokens:,} tokens" if err.prompt_tokens else "its size unknown"
            window = f"{err.context_tokens:,} tokens" if err.context_tokens else "its window"
            return LLMContextError(
                f"stage {stage!r}: the prompt ({size}) does not fit the model's context window "
                f"({window}) at {self.base_url}",
                stage=stage,
                prompt_tokens=err.prompt_tokens,
                context_tokens=err.context_tokens,
            )
        if isinstance(err, LLMRequestError) or (remember and isinstance(err, LLMUnavailableError)):
            self._mark_down(err)
        return err

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
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        timeout: httpx.Timeout,
        stream: bool = False,
    ) -> _Outcome:
        """Send with bounded retries; never raises, the outcome carries the error.

        Retried: connection errors (a server restarting mid-request drops the connection),
        connect timeouts, 429 and 5xx (not a read timeout: the server is still on it) — except
        a 500 whose text is a request-validation error
        (llama-cpp-python answers a malformed request so): a request stays malformed."""
        outcome = _Outcome()
        while True:
            outcome.attempts += 1
            retry_after: float | None = None
            try:
                if stream:
                    with self._http.stream(method, path, json=body, timeout=timeout) as response:
                        if response.status_code < 400:
                            outcome.data = assemble_stream(response.iter_lines())
                            return _stream_error(outcome)
                        response.read()
                else:
                    response = self._http.request(method, path, json=body, timeout=timeout)
            except httpx.ReadTimeout:
                # The server took the request and is still working on it (llama.cpp does not
                # cancel it): sending it again would queue a second copy behind the first.
                outcome.error = LLMUnavailableError(
                    f"the model endpoint {self.base_url} did not answer within the read timeout "
                    f"of {timeout.read} s (not retried: the server is still busy with it)",
                    "the model server is too slow for ODA_LLM_TIMEOUT_S: give it more time, "
                    "or a smaller model or prompt",
                )
                return outcome
            except httpx.TimeoutException as exc:
                failure = (
                    f"the model endpoint {self.base_url} timed out ({type(exc).__name__}, "
                    f"read timeout {timeout.read} s)"
                )
                hint = _BASE_URL_HINT
            except httpx.TransportError as exc:
                failure = f"cannot reach the model endpoint {self.base_url}: {exc or type(exc)}"
                hint = _BASE_URL_HINT
            except LLMError as exc:  # a stream that is not server-sent chat events
                outcome.error = exc
                return outcome
            else:
                if response.status_code < 400:
                    return _decode(response, outcome)
                message = plain_server_text(
                    error_message(_json_or_none(response), response.text[:300])
                )
                status = response.status_code
                if not retryable_status(status) or _validation_text(message):
                    outcome.error = _status_error(status, message, self)
                    return outcome
                failure = f"the model endpoint answered HTTP {status}: {message}"
                hint = _OVERLOADED_HINT
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            retry = outcome.attempts - 1
            if retry >= self.retry.max_retries:
                outcome.error = LLMUnavailableError(
                    f"{failure} (gave up after {outcome.attempts} attempt(s))", hint
                )
                return outcome
            self._sleep(self.retry.wait_s(retry, retry_after))


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


def _generated_text(answer: ChatResult | None) -> str | None:
    """What the model generated, for the trace: its text, or its tool calls as JSON."""
    if answer is None:
        return None
    if answer.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in answer.tool_calls]
        return json.dumps(calls, default=str)
    return answer.content


def _validation_text(message: str) -> bool:
    return bool(_VALIDATION.search(message))


def plain_server_text(message: str, limit: int = 240) -> str:
    """A server's error text on one line, without a traceback, bounded: fit for a warning."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        tail = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "^", "~"))]
        lines = tail[-1:] or lines[:1]
    text = " ".join(lines)
    text = re.sub(r"\s*For further information visit \S+", "", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _auth_or_route(err: LLMError) -> bool:
    return " HTTP 401" in err.message or " HTTP 403" in err.message or " HTTP 404" in err.message


def _stream_error(outcome: _Outcome) -> _Outcome:
    data = outcome.data
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        message = plain_server_text(error_message(data, "an error inside the stream"))
        outcome.error = LLMUnavailableError(
            f"the model endpoint reported an error mid-stream: {message}", _OVERLOADED_HINT
        )
        outcome.data = None
    return outcome


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
        return LLMRequestError(text, hint="check ODA_LLM_API_KEY (sent as a Bearer token)")
    if status == 404:
        return LLMRequestError(
            text,
            hint=f"check ODA_LLM_BASE_URL (the API root, usually ending in /v1; now "
            f"{client.base_url}) and ODA_LLM_MODEL (now {client.model!r})",
        )
    found = _CONTEXT_LLAMA.search(message) or _CONTEXT.search(message)
    if found is not None and "context" in message.lower():
        prompt = found.groupdict().get("prompt")
        return LLMContextError(
            text,
            prompt_tokens=int(prompt) if prompt else None,
            context_tokens=int(found.group("ctx")),
        )
    if client.configured_mode != "auto" and (
        "response_format" in message or "structured_outputs" in message
    ):
        text = (
            f"the model server does not take the structured-output form "
            f"{MODE_LABELS.get(client.configured_mode, client.configured_mode)} (HTTP {status}: "
            f"{message})"
        )
    return LLMRequestError(
        text,
        hint="the request is malformed for this server; if it names response_format, set "
        "ODA_LLM_STRUCTURED_MODE=auto (or the form the server takes: json_object for llama.cpp, "
        "structured_outputs for vLLM)",
    )
