"""The chat-completions format where it is ours: the request fields the OpenAI SDK has no typed
argument for (the structured-output dialects), and reading an answer into a ``ChatResult``.

The SDK builds its response models without validating them, so a body that is not a chat
completion, or a tool call that names no tool or breaks its schema, is caught here in words a
model or a user can act on. Pure functions, shared by the client and its tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from oda_analyst.llm.errors import LLMError, LLMToolCallError
from oda_analyst.llm.failures import PROTOCOL_HINT
from oda_analyst.llm.structured import check_schema, parse_json, schema_errors
from oda_analyst.llm.types import ChatResult, Message, StructuredMode, ToolCall, ToolSpec, Usage

_TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required"})


def chat_arguments(
    model: str,
    messages: Sequence[Message],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    tools: Sequence[ToolSpec] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    response_schema: dict[str, Any] | None = None,
    schema_name: str = "plan",
    structured_mode: StructuredMode = "response_format",
    strict: bool = True,
    stream: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of the SDK's ``chat.completions.create``.

    ``tool_choice`` is "auto", "none", "required", a tool name (forces that tool) or an OpenAI
    tool-choice dict. Fields the SDK has no argument for (vLLM's structured-output fields,
    ``extra``) go in ``extra_body``, which the SDK merges into the JSON body last.
    """
    if not messages:
        raise ValueError("a chat needs at least one message")
    args: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "temperature": temperature,
    }
    if max_tokens is not None:
        args["max_tokens"] = max_tokens
    if tools:
        args["tools"] = list(tools)
    if tool_choice is not None:
        if not tools and tool_choice != "none":
            raise ValueError("tool_choice needs tools")
        args["tool_choice"] = _tool_choice(tool_choice)
    if stream:
        args["stream"] = True
        args["stream_options"] = {"include_usage": True}
    extra_body: dict[str, Any] = {}
    if response_schema is not None:
        fields = structured_fields(response_schema, schema_name, structured_mode, strict)
        if "response_format" in fields:
            args["response_format"] = fields.pop("response_format")
        extra_body.update(fields)
    extra_body.update(extra or {})
    if extra_body:
        args["extra_body"] = extra_body
    return args


def structured_fields(
    schema: dict[str, Any], name: str, mode: StructuredMode, strict: bool = True
) -> dict[str, Any]:
    """The request fields that ask the server to constrain its answer to ``schema``."""
    if mode == "response_format":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": strict},
            }
        }
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "structured_outputs":
        return {"structured_outputs": {"json": schema}}
    if mode == "guided_json":
        return {"guided_json": schema}
    raise ValueError(f"unknown structured mode {mode!r}")


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict) or choice in _TOOL_CHOICE_WORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def parse_chat_response(
    data: Any,
    *,
    stage: str,
    latency_s: float,
    attempts: int = 1,
    tools: Sequence[ToolSpec] | None = None,
) -> ChatResult:
    """A ``ChatResult`` from a decoded response body.

    Raises ``LLMError`` when the body is not a chat completion, and ``LLMToolCallError`` (with
    the partial result attached) when a tool call is unknown or its arguments are invalid.
    """
    if not isinstance(data, dict):
        raise protocol_error(f"the response is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise protocol_error("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise protocol_error("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise protocol_error("the message content is not a string")
    result = ChatResult(
        content=content,
        tool_calls=(),
        finish_reason=_opt_str(choice.get("finish_reason")),
        usage=parse_usage(data.get("usage")),
        model=str(data.get("model", "")),
        latency_s=latency_s,
        stage=stage,
        attempts=attempts,
        message=message,
    )
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise protocol_error("tool_calls is not a list")
    calls = tuple(_parse_tool_call(raw, i, tools, result) for i, raw in enumerate(raw_calls))
    return replace(result, tool_calls=calls)


def parse_usage(raw: Any) -> Usage:
    """Token counts from a ``usage`` object; zeros for what is missing."""
    if not isinstance(raw, dict):
        return Usage(reported=False)
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    total = raw.get("total_tokens")
    return Usage(prompt, completion, _int(total) if total is not None else prompt + completion)


def _parse_tool_call(
    raw: Any, index: int, tools: Sequence[ToolSpec] | None, result: ChatResult
) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise protocol_error(f"tool call {index} has no function")
    function = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise protocol_error(f"tool call {index} has no function name")
    raw_id = raw.get("id")
    call_id = raw_id if isinstance(raw_id, str) and raw_id else f"call_{index}"
    arguments = function.get("arguments", "{}")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    # Servers send arguments as a JSON string (OpenAI) or, rarely, an object already.
    parsed, problem = (arguments, None) if isinstance(arguments, dict) else parse_json(arguments)
    spec = _find_tool(tools, name)
    errors: tuple[str, ...] = ()
    if tools is not None and spec is None:
        known = ", ".join(sorted(_tool_names(tools))) or "none"
        errors = (f"there is no tool named {name!r}; the tools are: {known}",)
    elif problem is not None:
        errors = (f"arguments of {name}: {problem}",)
    elif not isinstance(parsed, dict):
        errors = (f"arguments of {name}: expected a JSON object, got {type(parsed).__name__}",)
    elif spec is not None and isinstance(spec.get("parameters"), dict):
        errors = tuple(
            f"arguments of {name}: {err}"
            for err in schema_errors(parsed, check_schema(spec["parameters"]))
        )
    if errors:
        raise LLMToolCallError(
            f"the model's call to tool {name!r} is invalid: {errors[0]}",
            content=text,
            errors=errors,
            result=result,
        )
    assert isinstance(parsed, dict)
    return ToolCall(id=call_id, name=name, arguments=parsed)


def _tool_names(tools: Sequence[ToolSpec]) -> set[str]:
    return {str(t.get("function", {}).get("name")) for t in tools}


def _find_tool(tools: Sequence[ToolSpec] | None, name: str) -> dict[str, Any] | None:
    for tool in tools or ():
        function = tool.get("function")
        if isinstance(function, dict) and function.get("name") == name:
            return function
    return None


def parse_models(data: Any) -> list[str]:
    """Model ids from a ``GET /models`` body."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise protocol_error("GET /models did not return a model list")
    return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]


def protocol_error(what: str) -> LLMError:
    return LLMError(
        f"the model endpoint returned something that is not an OpenAI chat completion: {what}",
        hint=PROTOCOL_HINT,
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
