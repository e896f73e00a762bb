"""The retriever's tool interface for a baseline: ``query``, ``clarify``, ``download_csv``,
``status`` — same names, same arguments, same answer shape, so a host (the coordinator, the
benchmark) swaps backends without changing a call.

The baselines are single-shot and keep no request state beyond a bounded record of the last
answers' statuses (``status``); ``clarify`` always refuses, as neither tool can ask.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Protocol

import anyio.to_thread
from fastmcp import FastMCP
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse

from oda_analyst.baselines.payload import BaselineAnswer
from oda_analyst.errors import UsageError
from oda_analyst.mcptools import current_user, parse_as_of, tool_errors

KEEP_STATUSES = 1000
Question = Annotated[
    str, Field(min_length=1, max_length=4000, description="One plain-language question.")
]
RequestId = Annotated[str, Field(min_length=1, max_length=128)]


class BaselineTool(Protocol):
    def query(self, question: str, *, user: str = ..., as_of: datetime | None = ...
              ) -> BaselineAnswer: ...  # fmt: skip

    def clarify(self, request_id: str, answer: str, *, user: str = ...) -> BaselineAnswer: ...

    def download_csv(self, handle: str, *, user: str = ...) -> Path: ...


class BaselineStatus(BaseModel):
    request_id: str
    status: str
    backend: str
    answer: str


class CsvPage(BaseModel):
    handle: str
    path: str
    offset: int
    next_offset: int | None
    total_bytes: int
    text: str


class _Statuses:
    """The last answers' statuses, per user, bounded."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[str, BaselineStatus]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, user: str, answer: BaselineAnswer) -> None:
        with self._lock:
            self._items[answer.request_id] = (user, BaselineStatus(
                request_id=answer.request_id, status=answer.status, backend=answer.backend,
                answer=answer.answer[:500]))  # fmt: skip
            while len(self._items) > KEEP_STATUSES:
                self._items.popitem(last=False)

    def get(self, user: str, request_id: str) -> BaselineStatus:
        with self._lock:
            found = self._items.get(request_id)
        if found is None or found[0] != user:
            raise UsageError(
                f"no request {request_id} of yours here",
                hint="the baselines remember only recent requests; ask again",
            )
        return found[1]


def add_retriever_tools(mcp: FastMCP, tool: Callable[[], BaselineTool]) -> None:
    """Register the retriever-shaped tools on ``mcp``, served by ``tool()``, and the
    retriever's ``/healthz`` route (so probes and tests treat every backend's server alike)."""
    statuses = _Statuses()

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(_: Request) -> JSONResponse:
        """Liveness (HTTP transport only); builds nothing."""
        return JSONResponse({"status": "ok", "server": mcp.name})

    @mcp.tool
    async def query(question: Question, as_of: str | None = None) -> BaselineAnswer:
        """Answer a telemetry question (single shot): completed, rejected or failed."""
        with tool_errors():
            user, moment = current_user(), parse_as_of(as_of)

            def run() -> BaselineAnswer:
                return tool().query(question, user=user, as_of=moment)

            answer = await anyio.to_thread.run_sync(run)
            statuses.record(user, answer)
            return answer

    @mcp.tool
    async def clarify(request_id: RequestId,
                      answer: Annotated[str, Field(min_length=1, max_length=1000)]
                      ) -> BaselineAnswer:  # fmt: skip
        """This backend never asks for clarification: always an error saying so."""
        with tool_errors():
            user = current_user()
            return tool().clarify(request_id, answer, user=user)

    @mcp.tool
    async def download_csv(handle: Annotated[str, Field(min_length=1, max_length=200)],
                           offset: Annotated[int, Field(ge=0)] = 0,
                           max_bytes: Annotated[int, Field(ge=1024, le=1_000_000)] = 200_000
                           ) -> CsvPage:  # fmt: skip
        """Read a large result's CSV page by page (offset 0, then each next_offset)."""
        with tool_errors():
            user = current_user()
            path = await anyio.to_thread.run_sync(lambda: tool().download_csv(handle, user=user))
            total = path.stat().st_size
            if offset > total:
                raise UsageError(f"offset {offset} is beyond the end ({total} bytes)",
                                 hint="start at 0, then pass next_offset")  # fmt: skip
            with path.open("rb") as fh:
                fh.seek(offset)
                data = fh.read(max_bytes)
            end = offset + len(data)
            if end < total and b"\n" in data:
                data = data[: data.rfind(b"\n") + 1]
            text = data.decode("utf-8", errors="ignore")
            consumed = offset + len(text.encode("utf-8"))
            return CsvPage(handle=handle, path=str(path), offset=offset,
                           next_offset=consumed if consumed < total else None,
                           total_bytes=total, text=text)  # fmt: skip

    @mcp.tool
    async def replay(request_id: RequestId) -> dict[str, Any]:
        """The retriever's replay tool: the paper's tools keep no provenance, so there is
        nothing to re-run; this says so instead of guessing."""
        with tool_errors():
            statuses.get(current_user(), request_id)  # the caller's own request, or an error
            raise UsageError(
                "this baseline keeps no provenance, so its answers cannot be replayed",
                hint="replay answers of our analyst (--backend nsa)",
            )

    @mcp.tool
    async def status(request_id: RequestId
                     ) -> BaselineStatus:  # fmt: skip
        """The status of one of your recent requests."""
        with tool_errors():
            return statuses.get(current_user(), request_id)
