"""The analyst as one process: the coordinator wired to its subagents' MCP servers.

The composition root, kept outside the coordinator package on purpose: it imports the retriever's
and the code agent's MCP server modules (for the in-process transport) and the metric catalogue
(for the MetricsExpert skill), which the coordinator may not. The coordinator then sees only MCP
clients and plain data. ``ODA_RETRIEVER_MCP_URL`` / ``ODA_CODEAGENT_MCP_URL`` point it at servers
running elsewhere (``oda-analyst serve``) instead. A baseline backend (``sota1``, ``sota2``: the
paper's comparison systems, with our retriever's tool interface) takes the retriever's place:
in process, or at ``ODA_SOTA1_MCP_URL`` / ``ODA_SOTA2_MCP_URL`` (``oda-analyst mcp --backend
sota1 --transport http``). The coordinator checks the server's name, so a URL that reaches
another backend's server is an error, never an answer under the wrong name.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from oda_analyst.config import Settings
from oda_analyst.coordinator.charts import Glossary
from oda_analyst.coordinator.service import Coordinator


@lru_cache(maxsize=1)
def glossary() -> Glossary:
    """The MetricsExpert skill's data: each metric's label and unit."""
    from oda_analyst.ontology.skill import metric_glossary

    return {name: (e.label, e.unit) for name, e in metric_glossary().items()}


@lru_cache(maxsize=1)
def metrics_expert() -> str:
    """The MetricsExpert skill's markdown (for a model's system prompt)."""
    from oda_analyst.ontology.skill import metrics_expert_markdown

    return metrics_expert_markdown()


def retriever_target(settings: Settings, backend: str = "nsa") -> Any:
    """The MCP server (or URL) the coordinator retrieves through for ``backend``."""
    from oda_analyst.backends import in_process_server, server_url

    url = server_url(backend, settings)
    if url:
        return url
    if backend != "nsa":
        return in_process_server(backend, settings)
    from oda_analyst.retriever.mcp_server import mcp

    return mcp


def codeagent_target(settings: Settings) -> Any:
    if settings.codeagent_mcp_url:
        return settings.codeagent_mcp_url
    from oda_analyst.codeagent.mcp_server import mcp

    return mcp


def build_coordinator(settings: Settings, backend: str = "nsa") -> Coordinator:
    """The coordinator for these settings (in-process subagents unless URLs are configured;
    the model-backed loop when ODA_LLM_BASE_URL is set, with the MetricsExpert skill), its
    retrieval done by ``backend``: ours (nsa) or a paper baseline (sota1, sota2)."""
    from oda_analyst.backends import SERVER_NAMES
    from oda_analyst.llm.client import LLMClient
    from oda_analyst.reading.read import read_now

    llm = LLMClient.from_settings(settings)
    return Coordinator(
        settings,
        retriever=retriever_target(settings, backend),
        codeagent=codeagent_target(settings),
        glossary=glossary(),
        reader=read_now,
        max_dispatches=settings.coordinator_max_dispatches,
        max_retries=settings.coordinator_max_retries,
        llm=llm,
        skill=metrics_expert() if llm is not None else "",
        backend=backend,
        retriever_server=SERVER_NAMES[backend],
    )
