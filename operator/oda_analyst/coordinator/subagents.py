"""The two subagents as the coordinator sees them: typed calls over their MCP tools.

``RetrieverAgent`` asks (``query``), answers clarifications (``clarify``) and reads a large
result page by page (``download_csv``); ``CodeAgent`` runs the sandbox lifecycle (``init``,
``start``, ``upload``, ``execute``, ``get_artifacts``, ``stop``). Everything goes through the
``Dispatcher`` (counted, bounded, traced); nothing here reads a file the servers wrote, so the
servers may run in other containers.
"""

from __future__ import annotations

import base64
import csv
import io
import uuid
from collections.abc import Mapping
from typing import Any

from fastmcp.client.client import CallToolResult
from mcp.types import ImageContent, TextContent

from oda_analyst.coordinator.dispatch import Dispatcher, DispatchError

MAX_PAGES = 200
"""Pages of one CSV download at most (200 x 1 MB): a bound, not a size anyone should reach."""
PAGE_BYTES = 1_000_000


def _structured(result: CallToolResult, agent: str, tool: str) -> dict[str, Any]:
    data = result.structured_content
    if not isinstance(data, dict):
        raise DispatchError(agent, tool, "the tool returned no structured result")
    # fastmcp wraps a non-object return value as {"result": …}
    return data


class RetrieverAgent:
    """The retriever's MCP tools."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher

    async def query(self, question: str, as_of: str | None,
                    reading: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        args: dict[str, Any] = {"question": question}
        if as_of:
            args["as_of"] = as_of
        if reading is not None:
            args["reading"] = dict(reading)
        return _structured(await self.d.call("retriever", "query", args), "retriever", "query")

    async def clarify(self, request_id: str, answer: str) -> dict[str, Any]:
        result = await self.d.call(
            "retriever", "clarify", {"request_id": request_id, "answer": answer}
        )
        return _structured(result, "retriever", "clarify")

    async def csv_text(self, result: Mapping[str, Any]) -> str:
        """One result as CSV text: written from its inline rows, or downloaded page by page."""
        if result.get("rows") is not None:
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(result["columns"])
            writer.writerows(result["rows"])
            return out.getvalue()
        handle = result.get("csv_handle")
        if not handle:
            raise DispatchError(
                "retriever", "download_csv", "the result has neither rows nor a CSV"
            )
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            if len(pages) >= MAX_PAGES:
                raise DispatchError(
                    "retriever", "download_csv", f"the CSV is longer than {MAX_PAGES} pages"
                )
            page = _structured(
                await self.d.call(
                    "retriever",
                    "download_csv",
                    {"handle": handle, "offset": offset, "max_bytes": PAGE_BYTES},
                ),
                "retriever",
                "download_csv",
            )
            pages.append(str(page["text"]))
            offset = page.get("next_offset")
        return "".join(pages)


class CodeAgent:
    """The code agent's MCP tools: one sandbox session of the caller's user, named for this
    request, so two requests of one user at once never share /in or /out (each uploads 'r1.csv'
    and its chart writes 'figures.json')."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher
        self.started = False
        self.session = uuid.uuid4().hex[:16]

    async def start(self) -> dict[str, Any]:
        await self.d.call("codeagent", "codeagent_init", {"backend": "auto", **self._named})
        info = _structured(await self.d.call("codeagent", "codeagent_start", self._named),
                           "codeagent", "codeagent_start")  # fmt: skip
        self.started = True
        return info

    @property
    def _named(self) -> dict[str, Any]:
        return {"session": self.session}

    async def upload(self, name: str, data: bytes) -> None:
        await self.d.call(
            "codeagent",
            "codeagent_upload",
            {"name": name, "content_base64": base64.b64encode(data).decode(), **self._named},
        )

    async def execute(self, code: str, timeout_s: float | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"code": code, **self._named}
        if timeout_s is not None:
            args["timeout_s"] = timeout_s
        return _structured(
            await self.d.call("codeagent", "codeagent_execute", args),
            "codeagent",
            "codeagent_execute",
        )

    async def artifacts(self, names: list[str]) -> dict[str, bytes]:
        """The named files of /out: PNGs as bytes, text files as UTF-8 bytes."""
        result = await self.d.call("codeagent", "codeagent_get_artifacts",
                                   {"names": names, **self._named})  # fmt: skip
        files: dict[str, bytes] = {}
        images = iter(n for n in names if n.endswith(".png"))
        for part in result.content:
            if isinstance(part, ImageContent):
                files[next(images)] = base64.b64decode(part.data)
            elif isinstance(part, TextContent) and ":\n" in part.text:
                name, text = part.text.split(":\n", 1)
                if name in names:
                    files[name] = text.encode("utf-8")
        return files

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.d.call("codeagent", "codeagent_stop", self._named)
