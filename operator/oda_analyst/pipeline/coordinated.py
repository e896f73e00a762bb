"""An AnalystQuery answered by the coordinator, in the analyst's process (an adapter).

The coordinator plans the request, asks the retriever through its MCP tools and draws what the
question asks for through the code agent's MCP tools, as ``oda-analyst ask`` does. The in-process
retriever server is handed the analyst's own ``Retriever`` (the one whose graph keys the
VKGCaches carry, or the query's model override), so retrieval reads the graphs the builder Jobs
made; ``ODA_RETRIEVER_MCP_URL`` / ``ODA_CODEAGENT_MCP_URL`` point at servers elsewhere instead.

The in-process code agent runs no code in the analyst: ``use_remote_sandbox`` (called at
start-up) gives it the ``RemoteSandbox`` of the user's sandbox pods (``sandbox_pod``), and each
answer runs in its query's ``SandboxScope``. Answers run side by side, each in a worker thread
with its own event loop; the retriever server's one slot is shared by the answers that use the
same Retriever, and one with a model override of its own waits until the slot is free
(``RetrieverSlot``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from oda_analyst.analyst import build_coordinator
from oda_analyst.codeagent import mcp_server as codeagent_server
from oda_analyst.codeagent.backends.remote import RemoteSandbox
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.config import Settings
from oda_analyst.controller.port import SandboxScope
from oda_analyst.pipeline.sandbox_pod import scoped
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.service import Retriever


class RetrieverSlot:
    """The in-process retriever server serves one Retriever for the whole process: answers
    that use the same one share it; one that needs another waits until nobody uses it."""

    def __init__(self) -> None:
        self._free = threading.Condition()
        self._current: Retriever | None = None
        self._users = 0

    @contextlib.contextmanager
    def using(self, retriever: Retriever) -> Iterator[None]:
        with self._free:
            self._free.wait_for(lambda: self._users == 0 or self._current is retriever)
            if self._current is not retriever:
                mcp_server.set_retriever(retriever)
                self._current = retriever
            self._users += 1
        try:
            yield
        finally:
            with self._free:
                self._users -= 1
                self._free.notify_all()


_SLOT = RetrieverSlot()


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
    """The in-process code agent's sessions run their code in ``remote`` from now on (for the
    whole process: the analyst never runs user code itself)."""
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
    event loop (call it in a worker thread); the retriever server serves ``retriever`` for the
    whole call. The code agent's scripts run in ``sandbox``'s pods (the tasks of that loop
    inherit the scope)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scope = scoped(sandbox) if sandbox is not None else contextlib.nullcontext()
    with _SLOT.using(retriever), scope:
        return asyncio.run(_answer(settings, question, user=user, as_of=as_of,
                                   answers=answers, out_dir=out_dir))  # fmt: skip
