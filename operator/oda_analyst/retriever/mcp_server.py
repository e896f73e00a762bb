"""The retriever's MCP server: the paper's three tools (§III-C), plus ``status``.

The paper's EXASAGE exposes ``exasage_query``, ``exasage_clarify`` and ``exasage_download_csv``;
here they are ``query``, ``clarify`` and ``download_csv``. Results are bounded on purpose: rows
come inline up to the row limit, a larger result comes back as a preview and a CSV handle, and
``download_csv`` pages through that file, so a model never receives an unbounded blob.

Errors a model can act on are ``ToolError``s whose text starts with the error code, then the
message and the hint ("unknown_request: no request … — ask again"). Anything else is masked
(``mask_error_details=True``): the model reads "Error calling tool 'query'", the server log keeps
the traceback.

The server acts for one user per call: the ``x-oda-user`` HTTP header when present, else
``ODA_MCP_USER``, else the OS user. Over HTTP every call but ``/healthz`` must carry the
release's bearer token (``ODA_MCP_TOKEN``; without one the server binds loopback only), so only
the token's holders (the web UI and the operator, which act for their signed-in or stamped users)
can name a user at all (``mcptools.http_middleware``, ``oda_analyst.service_auth``).

The Retriever is synchronous (Polars, pyoxigraph, torch) and is built lazily on the first call;
tools run it in a worker thread so the event loop keeps serving other sessions, through one
``admission.Gate``: at most ``ODA_MCP_MAX_CONCURRENT`` calls run at once, ``ODA_MCP_MAX_QUEUED``
more wait, and a call beyond that is refused at once ("busy: … retry after N s"); a call is
stopped after ``ODA_MCP_TIMEOUT_S`` ("timeout: …"), and when its client cancels or goes away it
stops at its next progress step.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from oda_analyst.config import get_settings
from oda_analyst.errors import AccessDeniedError, UsageError
from oda_analyst.mcptools import current_user, parse_as_of, tool_errors
from oda_analyst.observability.tools import ToolSpans
from oda_analyst.reading.model import Reading
from oda_analyst.retriever.admission import Gate, Ticket
from oda_analyst.retriever.answer import AnswerPayload, ClarificationPayload
from oda_analyst.retriever.replay import replay as replay_request
from oda_analyst.retriever.scanprogress import BOARD
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.state import RequestState

T = TypeVar("T")

DEFAULT_CHUNK_BYTES = 200_000
MAX_CHUNK_BYTES = 1_000_000
MIN_CHUNK_BYTES = 1_024  # at least a few characters, so every page makes progress

INSTRUCTIONS = """\
Retrieval of HPC operational telemetry (the M100 ExaData lake) by plain-language questions.
1. Call `query` with one question naming the metric, the entities (nodes, racks, jobs, ...) and
   the time window, e.g. "total power of node 900 on 1 June 2022 from 00:00 to 01:00".
2. status "clarification": pick one of `clarification.candidates` (or ask the user) and call
   `clarify` with the request_id and the answer, e.g. the metric name "ambient".
3. status "completed": `rows` hold the result when it is small. When `csv_handle` is set, `rows`
   is null, `results[0].preview` shows the first rows and `download_csv` pages through the whole
   file: pass `offset = next_offset` until `next_offset` is null.
4. status "rejected": read `answer` and `error.hint`, rephrase, and query again.
5. `replay` a completed request_id to learn whether its figures still hold on the lake as it is
   now ("unchanged"), or which partitions were rewritten and which figures changed.
Tool errors start with a code (usage_error, unknown_request, access_denied, ...) and end with
what to do.
"""

mcp = FastMCP("oda-retriever", instructions=INSTRUCTIONS, mask_error_details=True)
mcp.add_middleware(ToolSpans("oda-retriever"))  # a span per tool call: arguments, result


# --- the Retriever behind the tools -------------------------------------------------------------


class _Slot:
    """The one Retriever of this process (built lazily; replaceable for tests)."""

    def __init__(self) -> None:
        self.retriever: Retriever | None = None
        self.gate: Gate | None = None
        self.lock = threading.Lock()


_slot = _Slot()


def get_retriever() -> Retriever:
    """The process's Retriever, built from the settings on first use."""
    with _slot.lock:
        if _slot.retriever is None:
            _slot.retriever = Retriever(get_settings())
        return _slot.retriever


def set_retriever(retriever: Retriever | None) -> None:
    """Serve with this Retriever (tests, embedding); None builds a fresh one on the next call."""
    with _slot.lock:
        _slot.retriever = retriever


def get_gate() -> Gate:
    """The process's admission gate, sized by the settings on first use."""
    with _slot.lock:
        if _slot.gate is None:
            s = get_settings()
            _slot.gate = Gate(s.mcp_max_concurrent, s.mcp_max_queued, s.mcp_timeout_s)
        return _slot.gate


def set_gate(gate: Gate | None) -> None:
    """Admit calls through this gate (tests); None sizes a fresh one on the next call."""
    with _slot.lock:
        _slot.gate = gate


def reset_retriever() -> None:
    """Forget the Retriever (the next call builds one from the then-current settings)."""
    set_retriever(None)


# --- who is asking ------------------------------------------------------------------------------


# --- running the synchronous service ------------------------------------------------------------


async def _run(func: Callable[[Ticket], T], what: str) -> T:
    """Run ``func`` in a worker thread through the gate (bounded, timed, cancellable)."""
    with tool_errors():
        return await get_gate().run(func, what=what)


def _progress(ctx: Context, ticket: Ticket) -> Callable[[str], None]:
    """A progress callback for the worker thread that forwards to the client; it stops the
    request (RequestCancelledError) once the client has gone or the time limit passed."""
    step = 0

    def report(message: str) -> None:
        nonlocal step
        ticket.check()
        step += 1
        try:
            anyio.from_thread.run(partial(ctx.report_progress, step, None, message))
        except Exception:  # progress is best effort: never fail a query on it
            return

    return report


# --- the tools ----------------------------------------------------------------------------------


def _reading(raw: dict[str, Any] | None) -> Reading | None:
    if raw is None:
        return None
    try:
        return Reading.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(
            f"the reading sent is not a Reading: {exc.errors()[0]['msg']}",
            hint="send a Reading as its JSON schema gives it, or none",
        ) from None


Question = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4000,
        description="One plain-language question naming the metric, the entities and the time "
        "window, e.g. 'total power of node 900 on 1 June 2022 from 00:00 to 01:00'.",
    ),
]
AsOf = Annotated[
    str | None,
    Field(
        description="Reference time for relative windows ('last 10 hours'), ISO 8601 "
        "(UTC when no offset is given); default now.",
    ),
]
ReadingArg = Annotated[
    dict[str, Any] | None,
    Field(
        description="The question as the caller already read it (a Reading, JSON; its schema is "
        "oda_analyst.reading.model.Reading). Optional: without it the question is read here.",
    ),
]
RequestId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        description="The request_id an earlier answer gave.",
    ),
]


@mcp.tool
async def query(
    question: Question, ctx: Context, as_of: AsOf = None, reading: ReadingArg = None
) -> AnswerPayload:
    """Answer a telemetry question (the paper's exasage_query).

    Returns status "completed" (rows inline, or a CSV handle and a preview when large),
    "clarification" (a question with candidates: answer it with `clarify`), "rejected" (the
    question cannot be grounded: read the hint and rephrase) or "failed".
    """
    with tool_errors():
        user, moment = current_user(), parse_as_of(as_of)
        read_as = _reading(reading)

    def answer(ticket: Ticket) -> AnswerPayload:
        progress = _progress(ctx, ticket)
        return get_retriever().query(question, user=user, as_of=moment, progress=progress,
                                     reading=read_as)  # fmt: skip

    return await _run(answer, "query")


@mcp.tool
async def clarify(
    request_id: RequestId,
    answer: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="The answer to the clarification question, e.g. one candidate's name "
            "('ambient') or a time window ('from 00:00 to 01:00').",
        ),
    ],
    ctx: Context,
) -> AnswerPayload:
    """Answer the clarification a request asked and resume it where it stopped (the paper's
    exasage_clarify). Works across server restarts: the request state is checkpointed."""
    with tool_errors():
        user = current_user()

    def resume(ticket: Ticket) -> AnswerPayload:
        progress = _progress(ctx, ticket)
        return get_retriever().clarify(request_id, answer, user=user, progress=progress)

    return await _run(resume, "clarify")


class CsvChunk(BaseModel):
    """One page of a large result's CSV file."""

    handle: str
    path: str = Field(description="The file on the server (readable where the disk is shared).")
    offset: int = Field(description="Byte offset of this page in the file.")
    next_offset: int | None = Field(description="Offset of the next page; null at the end.")
    total_bytes: int = Field(description="Size of the whole file in bytes.")
    text: str = Field(description="This page: whole CSV lines when they fit, UTF-8 text.")


def read_chunk(path: Path, offset: int, max_bytes: int) -> tuple[str, int | None, int]:
    """``(text, next_offset, total_bytes)`` of the page of ``path`` that starts at ``offset``.

    A page ends after its last newline, so it holds whole lines, unless one line is longer than
    ``max_bytes``; then it ends on a character boundary. Concatenating every page in order gives
    the file exactly.
    """
    total = path.stat().st_size
    if offset > total:
        raise UsageError(
            f"offset {offset} is beyond the end of the file ({total} bytes)",
            hint="start at 0, then pass the next_offset of the previous page",
        )
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read(max_bytes)
    if data and (data[0] & 0xC0) == 0x80:
        raise UsageError(
            f"offset {offset} is inside a character",
            hint="start at 0, then pass the next_offset of the previous page",
        )
    end = offset + len(data)
    if end < total:
        newline = data.rfind(b"\n")
        if newline >= 0:
            data = data[: newline + 1]
    # An incremental decoder keeps back an incomplete trailing character for the next page.
    text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    consumed = offset + len(text.encode("utf-8"))
    return text, (consumed if consumed < total else None), total


@mcp.tool
async def download_csv(
    handle: Annotated[
        str, Field(min_length=1, max_length=200, description="The csv_handle of an answer.")
    ],
    offset: Annotated[
        int, Field(ge=0, description="Byte offset to start at: 0, then the previous next_offset.")
    ] = 0,
    max_bytes: Annotated[
        int,
        Field(ge=MIN_CHUNK_BYTES, le=MAX_CHUNK_BYTES, description="Largest page, in bytes."),
    ] = DEFAULT_CHUNK_BYTES,
) -> CsvChunk:
    """Read a large result's CSV file page by page (the paper's exasage_download_csv).

    Call with offset 0, then with each page's next_offset until it is null.
    """
    with tool_errors():
        user = current_user()

    def read(_: Ticket) -> CsvChunk:
        path = get_retriever().download_csv(handle, user=user)
        text, next_offset, total = read_chunk(path, offset, max_bytes)
        return CsvChunk(handle=handle, path=str(path), offset=offset, next_offset=next_offset,
                        total_bytes=total, text=text)  # fmt: skip

    return await _run(read, "download_csv")


class RequestStatus(BaseModel):
    """Where a request stands in the lifecycle (Fig. 5)."""

    request_id: str
    stage: str
    status: str
    question: str
    as_of: str
    updated_at: str
    clarification: ClarificationPayload | None = None
    error: dict[str, Any] | None = None
    history: list[str] = Field(default_factory=list, description="Transitions, oldest first.")
    scan: dict[str, Any] | None = Field(
        default=None,
        description="A month-scale plan's lake scan, while it runs and after: plan, partitions "
        "done and total, rows read, the last partition.",
    )


def describe_state(state: RequestState) -> RequestStatus:
    """The status of a request as a model needs it (no internal artifacts)."""
    arts = state.artifacts
    asked = arts.clarification
    open_question = None
    if asked is not None and asked.answer is None:
        candidates = [c for c in asked.candidates if isinstance(c, dict)]
        open_question = ClarificationPayload(
            field=asked.field.value, question=asked.question, candidates=candidates
        )
    return RequestStatus(
        request_id=state.request_id,
        stage=state.stage.value,
        status=state.status.value,
        question=state.question,
        as_of=state.as_of.isoformat(),
        updated_at=state.updated_at.isoformat(),
        clarification=open_question,
        error=None if arts.error is None else arts.error.model_dump(),
        history=[
            f"{t.from_stage.value} → {t.to_stage.value}" + (f": {t.note}" if t.note else "")
            for t in state.history
        ],
    )


@mcp.tool
async def status(request_id: RequestId) -> RequestStatus:
    """The stage and status of one of your requests, with its open clarification or its error."""
    with tool_errors():
        user = current_user()

    def look(_: Ticket) -> RequestStatus:
        state = get_retriever().status(request_id)
        if state.user != user:
            raise AccessDeniedError(
                f"request {request_id} belongs to another user", hint="ask about your own requests"
            )
        scanned = BOARD.get(request_id)
        return describe_state(state).model_copy(
            update={"scan": None if scanned is None else scanned.to_dict()}
        )

    return await _run(look, "status")


@mcp.tool
async def replay(request_id: RequestId) -> dict[str, Any]:
    """Run one of your completed requests again on the lake as it is now: status "unchanged"
    (every figure the same), or "changed" with the partitions rewritten and the figures that
    differ (before and after)."""
    with tool_errors():
        user = current_user()

    def again(_: Ticket) -> dict[str, Any]:
        return replay_request(get_retriever(), request_id, user=user).to_json()

    return await _run(again, "replay")


@mcp.custom_route("/healthz", methods=["GET"])
async def healthz(_: Request) -> JSONResponse:
    """Liveness for probes and tests (HTTP transport only); builds nothing."""
    return JSONResponse({"status": "ok", "server": mcp.name})
