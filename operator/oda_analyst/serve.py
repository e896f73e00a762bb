"""``oda-analyst serve``: both MCP servers and the Prometheus endpoint in one process.

The servers speak streamable HTTP at ``/mcp`` (the retriever's also answers ``/healthz``; with
``--backend sota1|sota2`` the retriever port serves that baseline's tools instead of ours);
``/metrics`` exposes prometheus_client's default registry, where the product's metrics are
registered. One event loop runs both MCP servers; the metrics server is prometheus_client's own
thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import start_http_server

from oda_analyst.backends import mcp_server
from oda_analyst.codeagent.mcp_server import mcp as codeagent


async def _both(retriever: Any, host: str, retriever_port: int, codeagent_port: int) -> None:
    await asyncio.gather(
        retriever.run_http_async(show_banner=False, host=host, port=retriever_port),
        codeagent.run_http_async(show_banner=False, host=host, port=codeagent_port),
    )


def serve_all(host: str, retriever_port: int, codeagent_port: int, metrics_port: int,
              backend: str = "nsa") -> None:  # fmt: skip
    """Serve until interrupted; ``backend`` says whose retrieval tools the retriever port
    serves (ours, or a paper baseline's with the same interface)."""
    retriever = mcp_server(backend)
    start_http_server(metrics_port, addr=host)
    asyncio.run(_both(retriever, host, retriever_port, codeagent_port))
