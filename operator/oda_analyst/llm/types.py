"""Value types of the LLM client: what a chat call returns and how tools are described.

Messages and tool specifications stay plain OpenAI-shaped dicts: they go on the wire unchanged and
every OpenAI-compatible server (vLLM included) reads them the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

Message = dict[str, Any]
"""One chat message as the OpenAI API spells it: ``{"role": ..., "content": ...}``."""

ToolSpec = dict[str, Any]
"""One tool as the OpenAI API spells it: ``{"type": "function", "function": {...}}``."""

StructuredMode = Literal["response_format", "json_object", "structured_outputs", "guided_json"]
"""How a JSON Schema is sent for constrained decoding (``auto`` in the settings picks one).

``response_format``: OpenAI's ``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM).
``json_object``: ``{"type": "json_object", "schema": ...}``, the form llama.cpp's servers take
(llama-cpp-python rejects the ``json_schema`` form).
``structured_outputs``: vLLM's own field ``{"structured_outputs": {"json": schema}}``.
``guided_json``: the older vLLM field (removed in vLLM 0.12), for older servers.
"""

STRUCTURED_MODES: tuple[StructuredMode, ...] = (
    "response_format",
    "json_object",
    "structured_outputs",
    "guided_json",
)
"""Every form, in the order ``auto`` tries them."""

MODE_LABELS: dict[str, str] = {
    "response_format": 'response_format {"type": "json_schema"} (OpenAI, vLLM)',
    "json_object": 'response_format {"type": "json_object", "schema": ...} (llama.cpp)',
    "structured_outputs": "structured_outputs (vLLM >= 0.12)",
    "guided_json": "guided_json (vLLM < 0.12)",
}
"""How each form is named to a user (doctor, warnings)."""


@dataclass(frozen=True)
class Usage:
    """Token counts the server reported for one completion (zeros when it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reported: bool = True
    """False when the server sent no ``usage`` (the counts are then zeros, never estimates)."""


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for, its arguments already parsed from JSON."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_message_part(self) -> dict[str, Any]:
        """The call as it appears in an assistant message sent back to the server."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class ChatResult:
    """The first choice of one chat completion, with its accounting."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage
    model: str
    latency_s: float
    """Wall time of the whole call, retries and backoff waits included."""
    stage: str
    attempts: int = 1
    """HTTP attempts made (1 + retries)."""
    message: Message = field(default_factory=dict)
    """The assistant message exactly as received (kept for reflection and tool round trips)."""

    def assistant_message(self) -> Message:
        """The assistant turn to append to the conversation before sending tool results."""
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [call.to_message_part() for call in self.tool_calls]
        return msg


def tool_result_message(call: ToolCall | str, content: str | dict[str, Any] | list[Any]) -> Message:
    """The ``tool`` turn that answers one tool call (non-string content is sent as JSON)."""
    call_id = call.id if isinstance(call, ToolCall) else call
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def function_tool(name: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
    """A tool specification from a name, a description and a JSON Schema for its arguments."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def tool_from_model(model_cls: type[BaseModel], name: str, description: str = "") -> ToolSpec:
    """A tool whose arguments are the fields of a pydantic model."""
    return function_tool(
        name, description or (model_cls.__doc__ or "").strip(), model_cls.model_json_schema()
    )
