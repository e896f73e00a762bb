"""Which retrieval backend answers a request: ours (``nsa``) or one of the paper's baselines.

``ask --backend``, the benchmark and (later) the ``AnalystQuery`` spec pick one by name. Every
backend answers ``query``/``clarify``/``download_csv`` with the same answer shape, so callers do
not branch on it. Lives outside ``retriever`` and ``baselines`` because it knows both.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from oda_analyst.config import Settings
from oda_analyst.errors import UsageError

BackendName = Literal["nsa", "sota1", "sota2"]
BACKENDS: tuple[BackendName, ...] = ("nsa", "sota1", "sota2")
SERVER_NAMES: dict[str, str] = {
    "nsa": "oda-retriever",
    "sota1": "oda-sota1-exasage",
    "sota2": "oda-sota2-datalake",
}
"""Each backend's MCP server name (its ``initialize`` answer), by which a host checks that a
URL reaches the backend it was configured for (tests keep these equal to the servers')."""
DESCRIPTIONS: dict[str, str] = {
    "nsa": "the Reflect retriever (ontology, grounding, clarification, validated SPARQL)",
    "sota1": "EXASAGE Query Tool baseline (exact metric names, [YYYY-MM-DD HH:MM:SS], one shot)",
    "sota2": "Datalake Query Tool baseline (raw lake, name match, inline JSON, no ontology)",
}


class Backend(Protocol):
    def query(self, question: str, *, user: str = ..., as_of: datetime | None = ...) -> Any: ...

    def clarify(self, request_id: str, answer: str, *, user: str = ...) -> Any: ...

    def download_csv(self, handle: str, *, user: str = ...) -> Path: ...


def open_backend(name: str, settings: Settings) -> Backend:
    """The backend called ``name``, built from ``settings``."""
    if name == "nsa":
        from oda_analyst.retriever.service import Retriever

        return Retriever(settings)
    if name == "sota1":
        from oda_analyst.baselines.sota1.tool import ExasageQueryTool

        return ExasageQueryTool(settings)
    if name == "sota2":
        from oda_analyst.baselines.sota2.tool import DatalakeQueryTool

        return DatalakeQueryTool(settings)
    raise UsageError(f"unknown backend {name!r}", hint=f"choose among: {', '.join(BACKENDS)}")


def mcp_server(name: str) -> Any:
    """The FastMCP server of backend ``name`` (the coordinator's retrieval target): each serves
    ``query``/``clarify``/``download_csv``/``status``, built from the process settings."""
    if name == "nsa":
        from oda_analyst.retriever.mcp_server import mcp

        return mcp
    if name == "sota1":
        from oda_analyst.baselines.sota1.mcp_server import mcp as sota1

        return sota1
    if name == "sota2":
        from oda_analyst.baselines.sota2.mcp_server import mcp as sota2

        return sota2
    raise UsageError(f"unknown backend {name!r}", hint=f"choose among: {', '.join(BACKENDS)}")


def server_url(name: str, settings: Settings) -> str | None:
    """The URL configured for backend ``name``'s MCP server (None: serve it in process).

    One variable per backend, never one shared: a URL meant for ours must not answer a request
    made of a baseline (or the reverse) under the other's name."""
    urls = {
        "nsa": settings.retriever_mcp_url,
        "sota1": settings.sota1_mcp_url,
        "sota2": settings.sota2_mcp_url,
    }
    if name not in urls:
        raise UsageError(f"unknown backend {name!r}", hint=f"choose among: {', '.join(BACKENDS)}")
    return urls[name]


def in_process_server(name: str, settings: Settings) -> Any:
    """Backend ``name``'s MCP server for an in-process client, serving from ``settings``.

    A baseline's server is bound to a tool built from these settings (not the process-wide
    ones), so a coordinator built for one lake and data folder retrieves from exactly those.
    Ours keeps building its retriever from the process settings, as ``oda-analyst serve`` does.
    """
    if name == "sota1":
        from oda_analyst.baselines.sota1 import mcp_server as s1
        from oda_analyst.baselines.sota1.tool import ExasageQueryTool

        s1.set_tool(ExasageQueryTool(settings))
        return s1.mcp
    if name == "sota2":
        from oda_analyst.baselines.sota2 import mcp_server as s2
        from oda_analyst.baselines.sota2.tool import DatalakeQueryTool

        s2.set_tool(DatalakeQueryTool(settings))
        return s2.mcp
    return mcp_server(name)
