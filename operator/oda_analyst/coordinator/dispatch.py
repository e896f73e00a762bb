"""Dispatch: every call the coordinator makes to a subagent, through that subagent's MCP client.

The coordinator holds two fastmcp Clients, one per MCP server (the retriever's, the code
agent's), and nothing else that reaches data or code: a subagent cannot reach the other, and the
coordinator sees only what the tools return. Each call

- is counted under its name (``retriever.query``, ``codeagent.execute``…) and refused once the
  request's bound is reached (``DispatchLimitError``), so a loop cannot run away;
- runs in an OpenTelemetry span ``dispatch <agent>.<tool>`` with the tool, a short summary of
  its arguments and its status, nested under the request's and the task's spans (fastmcp adds
  its own client span beneath);
- is retried, up to the retry bound, when the server says it is busy or timed out; any other
  tool error is a ``DispatchError`` that carries the server's message for the caller to refine
  its request from, or to report.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from fastmcp import Client
from fastmcp.client.client import CallToolResult
from fastmcp.client.progress import ProgressHandler
from fastmcp.exceptions import ToolError
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from oda_analyst.errors import OdaError

tracer = trace.get_tracer(__name__)

_TRANSIENT = re.compile(r"^(?:busy|timeout)\b")
_BACKOFF_S = 1.0


class DispatchError(OdaError):
    """A subagent's tool failed; ``message`` is what the server said (code, message, hint)."""

    code = "dispatch_failed"

    def __init__(self, agent: str, tool: str, message: str, hint: str | None = None) -> None:
        super().__init__(f"{agent} {tool} failed: {message}", hint=hint)
        self.agent = agent
        self.tool = tool
        self.server_message = message


class DispatchLimitError(OdaError):
    """The request used every dispatch it may (a bound against runaway loops)."""

    code = "dispatch_limit"


def summarise_arguments(arguments: Mapping[str, Any], limit: int = 160) -> str:
    """The arguments in one short line for a span (long values cut, base64 payloads sized)."""
    parts = []
    for key, value in arguments.items():
        if key == "content_base64" and isinstance(value, str):
            parts.append(f"{key}=<{len(value) * 3 // 4:,} bytes>")
            continue
        text = repr(value)
        parts.append(f"{key}={text[:60] + '…' if len(text) > 60 else text}")
    line = ", ".join(parts)
    return line[:limit]


class Dispatcher:
    """The request's MCP clients, its named dispatch counters and their bounds."""

    def __init__(
        self,
        clients: Mapping[str, Client[Any]],
        *,
        max_dispatches: int,
        max_retries: int,
        progress: Callable[[str], None] | None = None,
        backoff_s: float = _BACKOFF_S,
    ) -> None:
        self.clients = dict(clients)
        self.max_dispatches = max_dispatches
        self.max_retries = max_retries
        self.counters: Counter[str] = Counter()
        self.progress = progress or (lambda _: None)
        self.backoff_s = backoff_s

    def _forward(self, agent: str) -> ProgressHandler:
        """A subagent's progress reports (the retriever's stages), shown as the caller's."""

        async def handler(progress: float, total: float | None, message: str | None) -> None:
            if message:
                self.progress(f"{agent}: {message}")

        return handler

    @property
    def total(self) -> int:
        return sum(v for k, v in self.counters.items() if not k.startswith(("failed.", "retry.")))

    def count(self, name: str) -> None:
        """Count one dispatch (or one failure/retry) under ``name``; refuse past the bound."""
        if not name.startswith(("failed.", "retry.")) and self.total >= self.max_dispatches:
            raise DispatchLimitError(
                f"this request reached its bound of {self.max_dispatches} subagent dispatches",
                hint="ask for less at once (fewer charts or a shorter window), or raise "
                "ODA_COORDINATOR_MAX_DISPATCHES",
            )
        self.counters[name] += 1

    async def call(self, agent: str, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """Call ``tool`` on ``agent``'s MCP server; transient failures are retried (bounded)."""
        name = f"{agent}.{tool.removeprefix('codeagent_')}"
        client = self.clients[agent]
        attempt = 0
        while True:
            self.count(name)
            with tracer.start_as_current_span(
                f"dispatch {name}",
                attributes={
                    "oda.agent": agent,
                    "oda.tool": tool,
                    "oda.arguments": summarise_arguments(arguments),
                    "oda.attempt": attempt,
                },
            ) as span:
                try:
                    result = await client.call_tool(
                        tool, dict(arguments), progress_handler=self._forward(agent)
                    )
                except ToolError as err:
                    message = str(err)
                    span.set_attribute("oda.status", "error")
                    span.set_status(Status(StatusCode.ERROR, message[:200]))
                    self.counters[f"failed.{name}"] += 1
                    if _TRANSIENT.match(message) and attempt < self.max_retries:
                        attempt += 1
                        self.counters[f"retry.{name}"] += 1
                        self.progress(f"{name}: {message[:80]}; retrying ({attempt})")
                        await asyncio.sleep(self.backoff_s * attempt)
                        continue
                    raise DispatchError(agent, tool, message) from None
                span.set_attribute("oda.status", "ok")
                return result
