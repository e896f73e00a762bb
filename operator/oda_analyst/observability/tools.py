"""A span per MCP tool call, with its arguments and a summary of its result.

FastMCP already opens a server span per request and carries the caller's trace context in the
request's ``_meta``; this middleware adds the tool's own span beneath it, so a trace reads
coordinator → MCP call → tool → what the tool did. Arguments are kept as JSON, with uploads
(base64 payloads) replaced by their size and code by its text and sha256, all bounded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import mcp.types as mt
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult

from oda_analyst.observability.tracing import clip, set_attributes, span

SUMMARY_CHARS = 2000
_PAYLOAD_KEYS = ("content_base64", "data", "payload")


def tool_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as a trace keeps them: payloads by size, code with its hash."""
    kept: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in _PAYLOAD_KEYS and isinstance(value, str):
            kept[key] = f"<{len(value)} base64 chars>"
        elif key == "code" and isinstance(value, str):
            kept[key] = value
            kept["code_sha256"] = hashlib.sha256(value.encode()).hexdigest()
        else:
            kept[key] = value
    return kept


def result_summary(result: ToolResult) -> str:
    """The structured result as JSON, else the text parts, else the kinds of content; bounded
    (an image is named by its type, never inlined)."""
    if result.structured_content is not None:
        return clip(json.dumps(result.structured_content, default=str), SUMMARY_CHARS)
    parts = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
        else:
            # ``mime_type`` in MCP SDK 2 (``mimeType`` before, deprecated since)
            media = getattr(block, "mime_type", None) or getattr(block, "mimeType", None)
            parts.append(f"<{block.type} {media}>" if media else f"<{block.type}>")
    return clip("\n".join(parts), SUMMARY_CHARS)


class ToolSpans(Middleware):
    """Add to a FastMCP server: ``mcp.add_middleware(ToolSpans("oda-retriever"))``."""

    def __init__(self, server: str) -> None:
        self.server = server

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        name = context.message.name
        args = tool_arguments(dict(context.message.arguments or {}))
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "oda.mcp.server": self.server,
            "gen_ai.tool.call.arguments": json.dumps(args, default=str),
            "langfuse.observation.input": json.dumps(args, default=str),
        }
        with span(f"tool {name}", attrs, observation="tool") as current:
            result = await call_next(context)
            summary = result_summary(result)
            set_attributes(current, {"gen_ai.tool.call.result": summary,
                                     "langfuse.observation.output": summary})  # fmt: skip
            return result
