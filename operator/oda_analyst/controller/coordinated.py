"""An AnalystQuery answered by the coordinator, in the operator's process (an adapter).

The coordinator plans the request, asks the retriever through its MCP tools and draws what the
question asks for through the code agent's MCP tools, as ``oda-analyst ask`` does. The in-process
retriever server is handed the operator's own ``Retriever`` (the one whose graph keys the
VKGCaches carry, or the query's model override), so retrieval reads the graphs the builder Jobs
made; ``ODA_RETRIEVER_MCP_URL`` / ``ODA_CODEAGENT_MCP_URL`` point at servers elsewhere instead
(``oda-analyst serve``), e.g. a code agent whose sandbox runs under gVisor on its own node.

The in-process code agent runs no code in the operator: ``use_remote_sandbox`` (called at
start-up) gives it the operator's ``RemoteSandbox``, the user's sandbox pods
(``sandbox_pod``), and each answer runs in its query's ``SandboxScope``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from oda_analyst.analyst import build_coordinator
from oda_analyst.codeagent import mcp_server as codeagent_server
from oda_analyst.codeagent.backends.remote import RemoteSandbox
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.config import Settings
from oda_analyst.controller.port import SandboxScope
from oda_analyst.controller.sandbox_pod import scoped
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.service import Retriever


async def _answer(settings: Settings, question: str, *, user: str, as_of: datetime,
                  answers: Sequence[str], out_dir: Path) -> dict[str, Any]:  # fmt: skip
    coordinator = build_coordinator(settings)
    answer = await coordinator.ask(question, user=user, as_of=as_of, out_dir=out_dir)
    for text in answers:
        if answer.status != "clarification":
            break
        answer = await coordinator.clarify(answer.conversation_id, text, user=user)
    return answer.model_dump(mode="json")


def use_remote_sandbox(settings: Settings, remote: RemoteSandbox) -> SessionManager:
    """The in-process code agent's sessions run their code in ``remote`` from now on (the
    operator's, for the whole process: it never runs user code itself)."""
    manager = SessionManager(settings.data_dir / "codeagent" / "sessions", remote=remote)
    manager.start_reaper()
    codeagent_server.set_manager(manager)
    return manager


def release_remote_sandbox(manager: SessionManager) -> None:
    """At shut-down: end the sessions and leave the process's code agent as it was."""
    manager.stop_reaper()
    for user in manager.users():
        manager.stop(user)
    codeagent_server.set_manager(None)


def coordinated_answer(settings: Settings, retriever: Retriever, question: str, *, user: str,
                       as_of: datetime, answers: Sequence[str], out_dir: Path,
                       sandbox: SandboxScope | None = None) -> dict[str, Any]:  # fmt: skip
    """The coordinator's answer with the clarification answers replayed in order. Runs its own
    event loop: the operator calls it in a worker thread, one pipeline call at a time (so the
    process-wide retriever slot and MCP user are this query's for the whole call). The code
    agent's scripts run in ``sandbox``'s pods (the tasks of that loop inherit the scope)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    mcp_server.set_retriever(retriever)
    try:
        with scoped(sandbox) if sandbox is not None else contextlib.nullcontext():
            return asyncio.run(_answer(settings, question, user=user, as_of=as_of,
                                       answers=answers, out_dir=out_dir))  # fmt: skip
    finally:
        mcp_server.set_retriever(None)
