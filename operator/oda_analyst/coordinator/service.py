"""The coordinator's entry points: ``ask`` a question, ``clarify`` a request that asked one.

One request is one run of the graph on a conversation thread (``thread_id`` = the conversation
id; for a one-shot ``ask`` the request id itself). Checkpoints go to SQLite under
``<ODA_DATA_DIR>/coordinator/`` (LangGraph's own checkpointer): a request stopped by a
clarification resumes from there, in this process or the next one. The MCP clients are opened
for the run and passed as run context, never stored.

Subagents are reached only through MCP: each target is a FastMCP server object (in-process
transport, the default) or an ``http(s)://…/mcp`` URL (streamable HTTP, with the caller's user
in the ``x-oda-user`` header and the release's token, ``mcptools.call_headers``). Which targets
to use is the caller's choice (``oda_analyst.analyst``
wires the defaults): this package never imports the servers, so it cannot reach what they wrap.
The retriever target may be our retriever's server or a paper baseline's (same tool interface):
``backend`` only names it, so an answer and a resumed request say which one retrieved.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from langgraph.types import Command
from pydantic import BaseModel, Field

from oda_analyst.config import Settings
from oda_analyst.coordinator import agent as model_graph
from oda_analyst.coordinator import graph as rule_graph
from oda_analyst.coordinator.charts import Glossary
from oda_analyst.coordinator.checkpoints import open_saver
from oda_analyst.coordinator.dispatch import Dispatcher
from oda_analyst.coordinator.state import CoordinatorState
from oda_analyst.coordinator.subagents import CodeAgent, RetrieverAgent
from oda_analyst.errors import AccessDeniedError, ConfigError, UsageError
from oda_analyst.llm.client import LLMClient
from oda_analyst.mcptools import acting_as, call_headers
from oda_analyst.observability import provenance
from oda_analyst.observability.tracing import request_trace
from oda_analyst.reading.model import Reader

Status = Literal["completed", "clarification", "rejected", "failed"]
EXIT_CODES: dict[str, int] = {"completed": 0, "clarification": 3, "rejected": 4, "failed": 1}


class Artifact(BaseModel):
    """A file the request produced."""

    path: str
    media_type: str
    title: str


class CoordinatorAnswer(BaseModel):
    """What ``ask`` prints with ``--json``: the retriever's fields, plus the analysis."""

    status: Status
    request_id: str
    conversation_id: str
    backend: str = Field(
        default="nsa", description="Who retrieved: nsa (ours), sota1 or sota2 (the baselines)."
    )
    answer: str = Field(description="The summary (also in `summary`).")
    summary: str
    understood_as: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    row_count: int | None = None
    csv: str | None = None
    csv_handle: str | None = None
    sparql: str | None = None
    plan: dict[str, Any] | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    clarification: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    dispatches: dict[str, int] = Field(default_factory=dict)
    retrieval_request_id: str | None = None
    trace: str | None = Field(default=None, description="The request's JSON trace file.")
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="What the figures came from (partitions and fingerprints, graph, validated "
        "SPARQL) and the code that drew each chart, with its sha256.",
    )
    tokens: dict[str, dict[str, float]] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


McpTarget = Any
"""A FastMCP server object (in-process) or an http(s) URL of a streamable-HTTP MCP endpoint."""


def _client(target: McpTarget, user: str) -> Client[Any]:
    if isinstance(target, str):
        if not target.startswith(("http://", "https://")):
            raise UsageError(
                f"MCP endpoint {target!r} is not an http(s) URL",
                hint="e.g. http://127.0.0.1:8765/mcp",
            )
        return Client(StreamableHttpTransport(target, headers=call_headers(user)))
    # In-process servers read whom a call is for from acting_as (no HTTP header); the caller
    # enters it before connecting so the server's session task inherits it.
    return Client(target)


def check_server(client: Client[Any], target: McpTarget, backend: str, expected: str) -> None:
    """Refuse a retrieval server that is not the backend's: a URL configured for one backend
    that reaches another's server would answer under the wrong name (a silently wrong
    comparison), so it is an error before any question is sent."""
    info = client.server_info  # either protocol era's (initialize or server/discover)
    name = info.name if info is not None else None
    if name == expected:
        return
    where = target if isinstance(target, str) else "the in-process server"
    raise ConfigError(
        f"the {backend} backend's retrieval server at {where} is {name!r}, not {expected!r}",
        hint=f"point it at a server started with `oda-analyst mcp --backend {backend} "
        "--transport http` (ODA_RETRIEVER_MCP_URL is ours, ODA_SOTA1_MCP_URL and "
        "ODA_SOTA2_MCP_URL the baselines')",
    )


class Coordinator:
    """Plans a request, dispatches it to the subagents over MCP, presents the artefacts."""

    def __init__(
        self,
        settings: Settings,
        *,
        retriever: McpTarget,
        codeagent: McpTarget,
        glossary: Glossary,
        reader: Reader,
        max_dispatches: int = 64,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        llm: LLMClient | None = None,
        skill: str = "",
        backend: str = "nsa",
        retriever_server: str | None = None,
        max_turns: int = model_graph.MAX_TURNS,
        max_tokens: int = model_graph.MAX_TOKENS,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.retriever_server = retriever_server  # the server name to expect (None: any)
        self.targets = {"retriever": retriever, "codeagent": codeagent}
        self.glossary = glossary
        self.reader = reader
        self.max_dispatches = max_dispatches
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.llm = llm
        self.skill = skill
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        # With a model the agent loop runs first; it includes every rule node to fall back on.
        self.builder = model_graph.builder if llm is not None else rule_graph.builder
        self.state_dir = settings.data_dir / "coordinator"

    def request_dir(self, request_id: str) -> Path:
        return self.settings.data_dir / "requests" / request_id

    async def ask(
        self,
        question: str,
        *,
        user: str,
        as_of: datetime | None = None,
        out_dir: Path | None = None,
        conversation_id: str | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> CoordinatorAnswer:
        """Answer ``question``; a clarification stops the run until ``clarify``."""
        if not question.strip():
            raise UsageError(
                "the question is empty", hint="ask about a metric, entities and a time"
            )
        request_id = uuid.uuid4().hex
        conversation = conversation_id or request_id
        state: CoordinatorState = {
            "request_id": request_id,
            "conversation_id": conversation,
            "user": user,
            "backend": self.backend,
            "question": question,
            "as_of": as_of.isoformat() if as_of else None,
            "out_dir": str(out_dir or self.request_dir(request_id)),
            "plan": None,
            "unclear": None,
            "sent": None,
            "attempts": 0,
            "clarifications": 0,
            "retrieval": None,
            "tasks": [],
            "artifacts": [],
            "status": "",
            "summary": "",
            "error": None,
            "warnings": [],
            "counters": {},
            "messages": [],
            "model_turns": 0,
            "model_text": "",
        }
        return await self._run(state, conversation, user, progress, request_id)

    async def clarify(
        self,
        conversation_id: str,
        answer: str,
        *,
        user: str,
        progress: Callable[[str], None] | None = None,
    ) -> CoordinatorAnswer:
        """Answer the question a request asked and resume it where it stopped."""
        return await self._run(Command(resume=answer), conversation_id, user, progress, None)

    async def pending(self, conversation_id: str) -> bool | None:
        """Whether this conversation's last request waits for a clarification (None: the
        coordinator has no such conversation)."""
        async with self._saver() as saver:
            graph = self.builder.compile(checkpointer=saver)
            snapshot = await graph.aget_state({"configurable": {"thread_id": conversation_id}})
            if not snapshot.values:
                return None
            return bool(snapshot.next)

    async def backend_of(self, conversation_id: str) -> str | None:
        """Which backend retrieved this conversation's last request (None: not known here), so
        a resumed request goes back to the server that started it."""
        async with self._saver() as saver:
            graph = self.builder.compile(checkpointer=saver)
            snapshot = await graph.aget_state({"configurable": {"thread_id": conversation_id}})
            if not snapshot.values:
                return None
            return str(snapshot.values.get("backend") or "nsa")

    async def retrieval_request(self, request_id: str) -> str | None:
        """The retriever's request id behind one of ours (None: the coordinator has no such
        request), so ``replay`` takes the id ``ask`` printed."""
        async with self._saver() as saver:
            graph = self.builder.compile(checkpointer=saver)
            snapshot = await graph.aget_state({"configurable": {"thread_id": request_id}})
            retrieval = (snapshot.values or {}).get("retrieval") or {}
            found = retrieval.get("request_id")
            return str(found) if found else None

    def _saver(self) -> Any:
        return open_saver(self.state_dir / "checkpoints.sqlite")

    async def _run(
        self,
        payload: Any,
        thread: str,
        user: str,
        progress: Callable[[str], None] | None,
        request_id: str | None,
    ) -> CoordinatorAnswer:
        began = time.perf_counter()
        show = progress or (lambda _: None)
        config: Any = {"configurable": {"thread_id": thread}}
        attributes = {
            "oda.user": user,
            "oda.conversation": thread,
            "oda.request": request_id or "",
            "oda.resume": request_id is None,
            "oda.backend": self.backend,
        }
        # The request's own trace file: it holds the coordinator's model calls as well as the
        # retrieval's (a baseline writes no trace of its own), so tokens per component are read
        # from one place.
        with request_trace(
            "coordinator request", settings=self.settings, attributes=attributes
        ) as handle:
            span = handle.span
            async with AsyncExitStack() as stack:
                saver = await stack.enter_async_context(self._saver())
                graph = self.builder.compile(checkpointer=saver)
                counts: dict[str, int] = {}
                if request_id is None:
                    snapshot = await graph.aget_state(config)
                    counts = dict(snapshot.values.get("counters") or {})
                    if snapshot.values and snapshot.values.get("user") != user:
                        raise AccessDeniedError(
                            f"request {thread} belongs to another user",
                            hint="clarify your own requests; ask the question again",
                        )
                    if not snapshot.next:
                        what = "it asks no question" if snapshot.values else "it is not known"
                        raise UsageError(
                            f"request {thread} waits for no clarification: {what}",
                            hint="pass the request_id of an answer whose status was "
                            "clarification (or ask again)",
                        )
                stack.enter_context(acting_as(user))
                clients = {
                    name: await stack.enter_async_context(_client(target, user))
                    for name, target in self.targets.items()
                }
                if self.retriever_server is not None:
                    check_server(clients["retriever"], self.targets["retriever"],
                                 self.backend, self.retriever_server)  # fmt: skip
                dispatcher = Dispatcher(
                    clients,
                    max_dispatches=self.max_dispatches,
                    max_retries=self.max_retries,
                    progress=show,
                    backoff_s=self.backoff_s,
                )
                dispatcher.counters.update(counts)
                deps = model_graph.AgentDeps(
                    dispatcher=dispatcher,
                    retriever=RetrieverAgent(dispatcher),
                    codeagent=CodeAgent(dispatcher),
                    reader=self.reader,
                    send_reading=self.backend == "nsa",
                    glossary=self.glossary,
                    max_retries=self.max_retries,
                    progress=show,
                    llm=self.llm,
                    skill=self.skill,
                    max_turns=self.max_turns,
                    max_tokens=self.max_tokens,
                )
                await graph.ainvoke(payload, config, context=deps)
                snapshot = await graph.aget_state(config)
            answer = _answer(snapshot.values, snapshot, dispatcher.counters)
            answer.trace = str(handle.path)
            if self.llm is not None:
                answer.tokens.update(self.llm.ledger.snapshot())  # per stage: 'coordinator'
            span.set_attribute("oda.status", answer.status)
        answer.timings["coordinator_s"] = round(time.perf_counter() - began, 3)
        return answer


def _provenance(record: Any, artifacts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The retrieval's provenance record with the code that drew each chart added (its text,
    sha256 and the sha256 of the file it wrote), so a chart can be traced to its figures."""
    if not isinstance(record, dict):
        return None
    full = provenance.ProvenanceRecord.model_validate(record)
    for art in artifacts:
        script, chart = Path(str(art.get("script") or "")), Path(str(art.get("path") or ""))
        if art.get("script") and script.is_file() and chart.is_file():
            full = provenance.add_code(full, script.read_text(), backend="sandbox",
                                       status="completed",
                                       outputs={chart.name: chart.read_bytes()})  # fmt: skip
    return full.model_dump(mode="json")


def _files(retrieval: Mapping[str, Any]) -> list[Artifact]:
    """The CSV files the retriever wrote (results beyond the row limit)."""
    out = []
    for res in retrieval.get("results") or []:
        if res.get("csv"):
            title = str(res.get("understood_as") or res.get("explanation") or "result")
            out.append(Artifact(path=str(res["csv"]), media_type="text/csv", title=title))
    return out


def _interrupt(snapshot: Any) -> dict[str, Any] | None:
    for task in snapshot.tasks or ():
        for intr in task.interrupts or ():
            value = intr.value
            return value if isinstance(value, dict) else {"question": str(value)}
    return None


def _answer(
    values: Mapping[str, Any], snapshot: Any, counters: Mapping[str, int]
) -> CoordinatorAnswer:
    retrieval = values.get("retrieval") or {}
    asked = _interrupt(snapshot) if snapshot.next else None
    status: str = values.get("status") or str(retrieval.get("status") or "failed")
    summary = str(values.get("summary") or "")
    clarification = None
    if asked is not None:
        status = "clarification"
        clarification = {
            k: v for k, v in asked.items() if k in {"field", "question", "candidates", "source"}
        }
        summary = str(asked.get("question") or "")
    first = (retrieval.get("results") or [{}])[0] if retrieval.get("results") else {}
    return CoordinatorAnswer(
        status=status,
        request_id=str(values.get("conversation_id") or values.get("request_id") or ""),
        conversation_id=str(values.get("conversation_id") or ""),
        backend=str(values.get("backend") or "nsa"),
        answer=str(values.get("model_text") or summary),
        summary=summary,
        understood_as=retrieval.get("understood_as"),
        columns=retrieval.get("columns"),
        rows=retrieval.get("rows"),
        row_count=retrieval.get("row_count"),
        csv=retrieval.get("csv"),
        csv_handle=retrieval.get("csv_handle"),
        sparql=retrieval.get("sparql") or first.get("sparql"),
        plan=retrieval.get("plan"),
        results=list(retrieval.get("results") or []),
        artifacts=[Artifact(**a) for a in values.get("artifacts") or []] + _files(retrieval),
        clarification=clarification,
        error=values.get("error") or (retrieval.get("error") if status != "completed" else None),
        warnings=list(retrieval.get("warnings") or []) + list(values.get("warnings") or []),
        tasks=list(values.get("tasks") or []),
        dispatches=dict(counters),
        retrieval_request_id=retrieval.get("request_id"),
        trace=retrieval.get("trace"),
        provenance=_provenance(retrieval.get("provenance"), values.get("artifacts") or []),
        tokens=dict(retrieval.get("tokens") or {}),
        timings=dict(retrieval.get("timings") or {}),
    )
