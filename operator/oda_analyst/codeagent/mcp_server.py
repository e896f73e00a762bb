"""The Deep Code Agent's MCP server: the paper's six lifecycle tools (§III-B c).

``codeagent_init`` creates the user's sandbox session, ``codeagent_start`` picks the backend
(gVisor, else bwrap; never unsandboxed) and launches the warm executor in it,
``codeagent_upload`` puts a base64 payload into ``/in`` (the caller gets no filesystem access),
``codeagent_execute`` audits and runs Python and returns stdout, stderr, the exit status and the
produced files, ``codeagent_get_artifacts`` returns produced files (a PNG as image content),
``codeagent_stop`` removes the sandbox.

Per user: the ``x-oda-user`` HTTP header, else ``ODA_MCP_USER``, else the OS user (the same rule
as the retriever's server, and over HTTP the same bearer token before any of it). Idle sessions
are reaped. Errors a model can act on are ``ToolError``s starting with the error code; anything
else is masked (``mask_error_details=True``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

import anyio.to_thread
from fastmcp import FastMCP
from fastmcp.utilities.types import Image
from mcp.types import ImageContent, TextContent
from pydantic import BaseModel, Field

from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.sessions import DEFAULT_SESSION, Session, SessionManager, owner_key
from oda_analyst.codeagent.workspace import media_type
from oda_analyst.config import get_settings
from oda_analyst.mcptools import current_user, tool_errors
from oda_analyst.observability.tools import ToolSpans

T = TypeVar("T")
MAX_ARTIFACT_BYTES = 8 * 2**20
MAX_TEXT_ARTIFACT_CHARS = 200_000

INSTRUCTIONS = """\
Runs Python analysis and plotting code in a per-user sandbox: no network, /in read-only (your
uploads), /out read-write (your results), pandas, numpy, matplotlib, scipy, scikit-learn,
seaborn, statsmodels, openpyxl and the `odaplot` recipes (line, histogram, dual_axis, bar, pie,
heatmap, box, summary, coefficient_of_variation, daily_counts).
1. codeagent_init, then codeagent_start.
2. codeagent_upload each data file (base64), e.g. the CSV the retriever returned, as data.csv.
3. codeagent_execute Python that reads /in/data.csv and writes plots/tables to /out.
   status "refused": the auditor's findings say what to change; fix and execute again.
4. codeagent_get_artifacts with the names from `files` (a PNG comes back as an image).
5. codeagent_stop when done (idle sandboxes are removed anyway).
"""

mcp = FastMCP("oda-codeagent", instructions=INSTRUCTIONS, mask_error_details=True)
mcp.add_middleware(ToolSpans("oda-codeagent"))  # a span per tool call: arguments, result


class _Slot:
    def __init__(self) -> None:
        self.manager: SessionManager | None = None
        self.lock = threading.Lock()


_slot = _Slot()


def get_manager() -> SessionManager:
    """The process's sessions, under <ODA_DATA_DIR>/codeagent/sessions (built on first use)."""
    with _slot.lock:
        if _slot.manager is None:
            _slot.manager = SessionManager(get_settings().data_dir / "codeagent" / "sessions")
            _slot.manager.start_reaper()
        return _slot.manager


def set_manager(manager: SessionManager | None) -> None:
    """Serve with these sessions (tests, embedding); None builds a fresh one on the next call."""
    with _slot.lock:
        _slot.manager = manager


async def _run(func: Callable[[], T]) -> T:
    with tool_errors():
        return await anyio.to_thread.run_sync(func)


def _user() -> str:
    with tool_errors():
        return current_user()


SessionName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Which of your sessions (default: 'default'). A caller running several "
        "requests at once names one per request, so each has its own sandbox and folders.",
    ),
]


def _owner(session: str) -> str:
    with tool_errors():
        return owner_key(current_user(), session)


class SessionInfo(BaseModel):
    """Where a user's sandbox stands."""

    user: str
    state: Literal["created", "started"]
    requested_backend: str
    backend: str | None = Field(
        description="The backend chosen at start (gvisor, bwrap, or a remote one such as the "
        "operator's kubernetes pods)."
    )
    inputs: list[str] = Field(description="Files in /in.")
    outputs: list[str] = Field(description="Files in /out.")
    limits: Limits


def _info(manager: SessionManager, session: Session, key: str) -> SessionInfo:
    return SessionInfo(
        user=session.user,
        state=session.state,
        requested_backend=session.requested,
        backend=session.backend_name,
        inputs=manager.inputs(key),
        outputs=manager.outputs(key),
        limits=manager.limits,
    )


@mcp.tool
async def codeagent_init(
    backend: Annotated[
        Literal["auto", "gvisor", "bwrap"],
        Field(description="auto: gVisor, else bubblewrap; never an unsandboxed run."),
    ] = "auto",
    session: SessionName = DEFAULT_SESSION,
) -> SessionInfo:
    """Create your sandbox session with empty /in and /out (idempotent)."""
    user = _user()
    key = _owner(session)

    def init() -> SessionInfo:
        manager = get_manager()
        return _info(manager, manager.init(user, backend, session), key)

    return await _run(init)


@mcp.tool
async def codeagent_start(session: SessionName = DEFAULT_SESSION) -> SessionInfo:
    """Launch the executor: choose the sandbox backend and start your sandbox with the libraries
    loaded. Fails (sandbox_unavailable) when no sandbox can run here; code then never runs."""
    key = _owner(session)

    def start() -> SessionInfo:
        manager = get_manager()
        return _info(manager, manager.start(key), key)

    return await _run(start)


class Uploaded(BaseModel):
    name: str
    bytes: int
    path_in_sandbox: str


@mcp.tool
async def codeagent_upload(
    name: Annotated[
        str, Field(min_length=1, max_length=128, description="File name in /in, e.g. data.csv.")
    ],
    content_base64: Annotated[str, Field(description="The file's bytes, standard base64.")],
    session: SessionName = DEFAULT_SESSION,
) -> Uploaded:
    """Put a file into /in (read-only to the code), e.g. the CSV a retrieval returned."""
    key = _owner(session)
    size = await _run(lambda: get_manager().upload(key, name, content_base64))
    return Uploaded(name=name, bytes=size, path_in_sandbox=f"/in/{name}")


@mcp.tool
async def codeagent_execute(
    code: Annotated[
        str,
        Field(
            min_length=1,
            max_length=200_000,
            description="Python 3.11 source. Read /in/<name>, write /out.",
        ),
    ],
    timeout_s: Annotated[
        float | None, Field(gt=0, le=600, description="Wall-clock limit (default 60 s).")
    ] = None,
    session: SessionName = DEFAULT_SESSION,
) -> RunResult:
    """Audit and run code (a fresh fork in your sandbox) on your /in and /out: stdout, stderr,
    exit status, the files in /out and the auditor's findings. status: ok, refused (fix what
    the findings say), error, timeout or killed (a limit was reached)."""
    key = _owner(session)

    def run() -> RunResult:
        manager = get_manager()
        limits = None
        if timeout_s is not None:
            limits = manager.limits.model_copy(update={"wall_s": timeout_s})
        return manager.execute(key, code, limits)

    return await _run(run)


@mcp.tool
async def codeagent_get_artifacts(
    names: Annotated[list[str] | None, Field(description="Files of /out; default all.")] = None,
    session: SessionName = DEFAULT_SESSION,
) -> list[ImageContent | TextContent]:
    """Files the code produced: a PNG as image content, a CSV/JSON/text file as text; other
    files are named with their size only."""
    key = _owner(session)

    def collect() -> list[ImageContent | TextContent]:
        manager = get_manager()
        wanted = names if names else manager.outputs(key)
        if not wanted:
            return [_text("no files in /out: execute code that writes to /out first")]
        parts: list[ImageContent | TextContent] = []
        for name in wanted:
            data = manager.artifact(key, name, MAX_ARTIFACT_BYTES)
            kind = media_type(name)
            if kind == "image/png":
                parts.append(Image(data=data, format="png").to_image_content())
            elif kind.startswith("text/") or kind == "application/json":
                text = data.decode("utf-8", errors="replace")
                clipped = text[:MAX_TEXT_ARTIFACT_CHARS]
                more = "" if clipped == text else f"\n… ({len(text) - len(clipped)} more chars)"
                parts.append(_text(f"{name}:\n{clipped}{more}"))
            else:
                parts.append(_text(f"{name}: {len(data)} bytes of {kind} (not shown)"))
        return parts

    return await _run(collect)


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


class Stopped(BaseModel):
    stopped: bool = Field(description="False when there was no session to stop.")


@mcp.tool
async def codeagent_stop(session: SessionName = DEFAULT_SESSION) -> Stopped:
    """Shut your sandbox down and delete its /in and /out."""
    key = _owner(session)
    return Stopped(stopped=await _run(lambda: get_manager().stop(key)))
