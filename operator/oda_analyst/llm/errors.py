"""Errors of the LLM client, all under ``OdaError`` so the CLI maps them to an exit code.

``LLMError`` is the base a stage catches to fall back to its rule-based path. An
``LLMOutputError`` carries what the model said and why it was rejected, so a reflection loop can
show the model its mistake and ask again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oda_analyst.errors import OdaError

if TYPE_CHECKING:
    from oda_analyst.llm.types import ChatResult

_BASE_URL_HINT = "check ODA_LLM_BASE_URL and that the model server (e.g. vLLM) is running"


class LLMError(OdaError):
    """The model endpoint answered in a way this client cannot use (a protocol error)."""

    code = "llm_error"


class LLMUnavailableError(LLMError):
    """The endpoint is down, too slow or rate-limited, still after the bounded retries."""

    code = "llm_unavailable"

    def __init__(self, message: str, hint: str | None = _BASE_URL_HINT) -> None:
        super().__init__(message, hint)


class LLMRequestError(LLMError):
    """The server rejected the request itself as malformed: resending it cannot help."""

    code = "llm_request_rejected"


class LLMContextError(LLMRequestError):
    """A stage's prompt does not fit the model's context window."""

    code = "llm_context_exceeded"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        stage: str = "",
        prompt_tokens: int | None = None,
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(
            message,
            hint
            or "use a model server with a larger context (llama.cpp --n_ctx, vLLM "
            "--max-model-len) or a shorter question",
        )
        self.stage = stage
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class LLMOutputError(LLMError):
    """The model answered, but its answer breaks the requested schema or is not JSON."""

    code = "llm_output_error"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        content: str = "",
        errors: tuple[str, ...] = (),
        result: ChatResult | None = None,
    ) -> None:
        super().__init__(
            message, hint or "the model's answer was rejected; ask it again with the errors shown"
        )
        self.content = content
        self.errors = errors
        self.result = result

    def feedback(self) -> str:
        """A user-turn text that tells the model what was wrong, for a reflection retry."""
        listed = "\n".join(f"- {err}" for err in self.errors) or f"- {self.message}"
        return (
            "Your previous answer was rejected:\n"
            f"{listed}\n"
            "Answer again with JSON that satisfies the schema exactly, and nothing else."
        )


class LLMToolCallError(LLMOutputError):
    """A tool call names an unknown tool or its arguments are not valid JSON for that tool."""

    code = "llm_tool_call_error"
