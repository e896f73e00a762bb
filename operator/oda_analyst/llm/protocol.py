"""The OpenAI chat-completions wire format: building request bodies, reading responses.

Pure functions on dicts, shared by the client and its tests. Only the fields this product uses
are built; ``extra`` passes anything else through unchanged (e.g. vLLM's ``top_k``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from oda_analyst.llm.errors import LLMError, LLMToolCallError
from oda_analyst.llm.structured import check_schema, parse_json, schema_errors
from oda_analyst.llm.types import ChatResult, Message, StructuredMode, ToolCall, ToolSpec, Usage

_TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required"})


def build_chat_body(
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
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``.

    ``tool_choice`` is "auto", "none", "required", a tool name (forces that tool) or an OpenAI
    tool-choice dict.
    """
    if not messages:
        raise ValueError("a chat needs at least one message")
    body: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "temperature": temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if tools:
        body["tools"] = list(tools)
    if tool_choice is not None:
        if not tools and tool_choice != "none":
            raise ValueError("tool_choice needs tools")
        body["tool_choice"] = _tool_choice(tool_choice)
    if response_schema is not None:
        body.update(structured_fields(response_schema, schema_name, structured_mode, strict))
    if extra:
        body.update(extra)
    return body


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
        raise _protocol_error(f"the response is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _protocol_error("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _protocol_error("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _protocol_error("the message content is not a string")
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
        raise _protocol_error("tool_calls is not a list")
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
        raise _protocol_error(f"tool call {index} has no function")
    function = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise _protocol_error(f"tool call {index} has no function name")
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


def error_message(data: Any, fallback: str) -> str:
    """The server's explanation from an error body (OpenAI or older vLLM shape)."""
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if data.get("message"):
            return str(data["message"])
        if data.get("detail"):
            return str(data["detail"])
    return fallback


def parse_models(data: Any) -> list[str]:
    """Model ids from a ``GET /models`` body."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise _protocol_error("GET /models did not return a model list")
    return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]


def _protocol_error(what: str) -> LLMError:
    return LLMError(
        f"the model endpoint returned something that is not an OpenAI chat completion: {what}",
        hint="check that ODA_LLM_BASE_URL points at an OpenAI-compatible /v1 endpoint",
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def assemble_stream(lines: Iterable[str]) -> dict[str, Any]:
    """A non-streamed chat-completion body from the server-sent events of a streamed one.

    Content and tool-call argument deltas are concatenated in order; ``usage`` is the one the
    server sent (with ``stream_options.include_usage``), absent when it sent none.
    """
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    body: dict[str, Any] = {"choices": []}
    finish: str | None = None
    seen = False
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            raise _protocol_error(f"a streamed event is not JSON: {data[:80]!r}") from None
        if not isinstance(chunk, dict):
            raise _protocol_error("a streamed event is not an object")
        if isinstance(chunk.get("error"), dict):
            return chunk  # an error reported inside the stream
        seen = True
        body["model"] = chunk.get("model", body.get("model", ""))
        if isinstance(chunk.get("usage"), dict):
            body["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for part in delta.get("tool_calls") or ():
                slot = calls.setdefault(
                    int(part.get("index", 0)), {"type": "function", "function": {"name": ""}}
                )
                if part.get("id"):
                    slot["id"] = part["id"]
                function = part.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] += function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] = (
                        slot["function"].get("arguments", "") + function["arguments"]
                    )
    if not seen:
        raise _protocol_error("the stream ended before any event")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    body["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    return body
