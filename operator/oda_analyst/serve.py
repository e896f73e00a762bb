"""``oda-analyst serve``: both MCP servers and the Prometheus endpoint in one process.

The servers speak streamable HTTP at ``/mcp`` (the retriever's also answers ``/healthz``);
``/metrics`` exposes prometheus_client's default registry, where the product's metrics are
registered. One event loop runs both MCP servers; the metrics server is prometheus_client's own
thread.
"""

from __future__ import annotations

import asyncio

from prometheus_client import start_http_server

from oda_analyst.codeagent.mcp_server import mcp as codeagent
from oda_analyst.retriever.mcp_server import mcp as retriever


async def _both(host: str, retriever_port: int, codeagent_port: int) -> None:
    await asyncio.gather(
        retriever.run_http_async(show_banner=False, host=host, port=retriever_port),
        codeagent.run_http_async(show_banner=False, host=host, port=codeagent_port),
    )


def serve_all(host: str, retriever_port: int, codeagent_port: int, metrics_port: int) -> None:
    """Serve until interrupted."""
    start_http_server(metrics_port, addr=host)
    asyncio.run(_both(host, retriever_port, codeagent_port))
