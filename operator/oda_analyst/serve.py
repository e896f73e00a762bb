"""``oda-analyst serve``: both MCP servers and the Prometheus endpoint in one process.

The servers speak streamable HTTP at ``/mcp`` (the retriever's also answers ``/healthz``; with
``--backend sota1|sota2`` the retriever port serves that baseline's tools instead of ours) and
take only calls that carry the release's token (ODA_MCP_TOKEN, oda_analyst.service_auth);
``/metrics`` exposes prometheus_client's default registry, where the product's metrics are
registered. One event loop runs both MCP servers (and, with ``--pipeline-port``, the operator's
pipeline port: ``oda_analyst.pipeline.server``); the metrics server is prometheus_client's own
thread. In a cluster (``--pipeline-port``, or ODA_CODEAGENT_SANDBOX=pod) the code agent runs
every script, a query's and a web UI user's alike, in the user's network-less gVisor pod; on a
laptop (the default) in the local gVisor or bubblewrap sandbox.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import start_http_server
from starlette.middleware import Middleware

from oda_analyst.backends import mcp_server
from oda_analyst.codeagent.mcp_server import mcp as codeagent
from oda_analyst.mcptools import http_middleware


async def _both(retriever: Any, host: str, retriever_port: int, codeagent_port: int,
                guard: list[Middleware], pipeline_port: int | None = None) -> None:  # fmt: skip
    servers = [
        retriever.run_http_async(show_banner=False, host=host, port=retriever_port,
                                 middleware=guard),
        codeagent.run_http_async(show_banner=False, host=host, port=codeagent_port,
                                 middleware=guard),
    ]  # fmt: skip
    from oda_analyst.config import get_settings  # noqa: PLC0415

    settings = get_settings()
    if pipeline_port is not None:
        # the operator's port: its coordinator uses the servers above in process, and the
        # code agent's scripts run in the users' sandbox pods
        from oda_analyst.pipeline.server import serve_pipeline  # noqa: PLC0415

        servers.append(serve_pipeline(settings, host, pipeline_port, middleware=guard))
    elif settings.codeagent_sandbox == "pod":
        # no pipeline, but the code agent (the web UI's) runs scripts in the users' pods
        from oda_analyst.pipeline.server import serve_sandbox  # noqa: PLC0415

        servers.append(serve_sandbox(settings))
    await asyncio.gather(*servers)


def serve_all(host: str, retriever_port: int, codeagent_port: int, metrics_port: int,
              backend: str = "nsa", pipeline_port: int | None = None) -> None:  # fmt: skip
    """Serve until interrupted; ``backend`` says whose retrieval tools the retriever port
    serves (ours, or a paper baseline's with the same interface); ``pipeline_port`` serves
    the operator's pipeline port as well (``oda_analyst.pipeline``)."""
    guard = http_middleware(host)  # the release's token on both servers (not on /metrics)
    retriever = mcp_server(backend)
    start_http_server(metrics_port, addr=host)
    asyncio.run(_both(retriever, host, retriever_port, codeagent_port, guard, pipeline_port))
