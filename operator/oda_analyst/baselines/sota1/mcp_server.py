"""SoTA#1's MCP server: the retriever's four tools, served by the EXASAGE Query Tool."""

from __future__ import annotations

import threading

from fastmcp import FastMCP

from oda_analyst.baselines.mcp import add_retriever_tools
from oda_analyst.baselines.sota1.tool import ExasageQueryTool
from oda_analyst.config import get_settings

INSTRUCTIONS = """\
The EXASAGE Query Tool (single shot, no clarification). Call `query` with one question that
names one exact metric (e.g. total_power, Gpu0_gpu_utilization), the nodes, rack or job, and the
window as two [YYYY-MM-DD HH:MM:SS] timestamps, e.g. "average total_power of node 900 from
[2022-06-01 08:00:00] to [2022-06-01 09:00:00]". Anything else fails at once: rephrase and ask
again. `download_csv` pages through a large result.
"""

mcp = FastMCP("oda-sota1-exasage", instructions=INSTRUCTIONS, mask_error_details=True)
_lock = threading.Lock()
_tool: list[ExasageQueryTool] = []


def get_tool() -> ExasageQueryTool:
    """The process's tool, built from the settings on first use."""
    with _lock:
        if not _tool:
            _tool.append(ExasageQueryTool(get_settings()))
        return _tool[0]


def set_tool(tool: ExasageQueryTool | None) -> None:
    """Serve with this tool (tests); None builds a fresh one on the next call."""
    with _lock:
        _tool.clear()
        if tool is not None:
            _tool.append(tool)


add_retriever_tools(mcp, get_tool)
