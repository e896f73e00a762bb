"""The LLM client every model-backed stage uses: an OpenAI-compatible endpoint (vLLM, llama.cpp).

The ``openai`` SDK speaks the protocol (base URL, key, bodies, server-sent events, typed errors,
timeouts); what is ours is around it. Every ``chat`` carries a ``max_tokens`` bound and is retried
(boundedly) on 429, 5xx, connect timeouts and dropped connections, never for a request the server
rejected as malformed. ``structured`` asks for a JSON Schema in the form the server takes
(configured, or asked once: ``auto``) and checks the answer, optionally showing the model its
errors. Every call, failed or not, goes in a ``TokenLedger`` with the server's own ``usage`` and
is one ``gen_ai.*`` span. A server found unusable is remembered for ``down_ttl_s`` by every client
of it in this process: later calls fail at once, saying why, instead of asking again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import httpx
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
from oda_analyst.llm.failures import Target, auth_or_route
from oda_analyst.llm.memory import MEMORY
from oda_analyst.llm.protocol import chat_arguments, parse_chat_response, parse_models
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.llm.structured import check_answer, check_schema
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

if TYPE_CHECKING:
    from oda_analyst.llm.sdk import Sdk

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_TOKENS = 512
"""The completion bound of a call whose caller gave none: no call is ever unbounded."""
DOWN_TTL_S = 60.0
"""How long an endpoint found unusable is remembered as such."""


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
        # Imported here: the SDK takes most of a second, which a process without a model skips.
        from oda_analyst.llm.sdk import Sdk  # noqa: PLC0415

        self._sdk: Sdk = Sdk(self.base_url, api_key, self._timeout(None), transport)

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
        self._sdk.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what this client knows about its server ---------------------------------------------

    @property
    def _key(self) -> tuple[str, str]:
        return (self.base_url, self.model)

    @property
    def _target(self) -> Target:
        return Target(self.base_url, self.model, self.configured_mode)

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

    def _get(self, url: str, read_s: float | None = None) -> _Outcome:
        """GET a JSON document (``url`` relative to the base URL, or absolute), with retries."""
        return self._send(partial(self._sdk.get, url), self._timeout(read_s))

    def _models_body(self) -> Any:
        outcome = self._get("models")
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
            props = self._get(f"{self.base_url.removesuffix('/v1')}/props", 5.0)
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
            args = chat_arguments(
                self.model,
                [{"role": "user", "content": "Answer with an empty JSON object."}],
                max_tokens=1,
                response_schema={"type": "object"},
                schema_name="probe",
                structured_mode=mode,
                strict=self.strict_schema,
            )
            outcome = self._send(partial(self._sdk.complete, args), self._timeout(None))
            if outcome.error is None:
                MEMORY.learn_mode(self._key, mode)
                return mode
            if not isinstance(outcome.error, LLMRequestError) or auth_or_route(outcome.error):
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
        args = chat_arguments(
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
            stream=stream,
            extra={**self.extra_body, **(extra or {})},
        )
        gen = start_generation(
            model=self.model, stage=stage, server=self.base_url, messages=messages,
            max_tokens=bound, temperature=temperature, structured=response_schema is not None,
            tools=len(tools or ()),
        )  # fmt: skip
        started = self._clock()
        outcome = self._send(partial(self._sdk.complete, args), self._timeout(timeout_s))
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
                return check_answer(result, validator, model_cls), result
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

    def _send(self, request: Callable[[httpx.Timeout], Any], timeout: httpx.Timeout) -> _Outcome:
        """``request`` with bounded retries; never raises, the outcome carries the error."""
        outcome = _Outcome()
        while True:
            outcome.attempts += 1
            try:
                outcome.data = request(timeout)
                return outcome
            except LLMError as exc:  # an answer that is not a chat completion: no resend helps
                outcome.error = exc
                return outcome
            except self._sdk.failures as exc:
                failed = self._sdk.failure(exc, self._target, timeout.read)
            retry = outcome.attempts - 1
            if not failed.retryable or retry >= self.retry.max_retries:
                outcome.error = (
                    failed.given_up(outcome.attempts) if failed.retryable else failed.error
                )
                return outcome
            self._sleep(self.retry.wait_s(retry, failed.retry_after))


def _generated_text(answer: ChatResult | None) -> str | None:
    """What the model generated, for the trace: its text, or its tool calls as JSON."""
    if answer is None:
        return None
    if answer.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in answer.tool_calls]
        return json.dumps(calls, default=str)
    return answer.content
