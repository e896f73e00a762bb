"""SoTA#2's MCP server: the retriever's four tools, plus the Datalake Query API itself.

``list_plugins``, ``list_metrics``, ``describe_metric`` and ``run_query`` are what a model
driving this backend uses to discover schemas and query the raw lake on its own (the paper's
non-symbolic ablation); ``query`` runs the no-model planner over the same API.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastmcp import FastMCP
from pydantic import Field

from oda_analyst.baselines.mcp import add_retriever_tools
from oda_analyst.baselines.sota2.tool import MAX_INLINE_ROWS, DatalakeQueryTool, _json_rows
from oda_analyst.config import get_settings
from oda_analyst.errors import UsageError
from oda_analyst.mcptools import parse_as_of, tool_errors

INSTRUCTIONS = """\
The Datalake Query Tool: the raw M100 lake, no ontology. `list_plugins`, `list_metrics`,
`describe_metric` show what exists; `run_query` reads one plugin/metric for some nodes in a
window [start, end) (ISO 8601), inline JSON only (no CSV, at most 50,000 rows). Joining sources
(e.g. a job's nodes and run from the job table with a metric) is yours to do. `query` answers a
plain question with a simple name-matching planner; there is no clarification.
"""

mcp = FastMCP("oda-sota2-datalake", instructions=INSTRUCTIONS, mask_error_details=True)
_lock = threading.Lock()
_tool: list[DatalakeQueryTool] = []


def get_tool() -> DatalakeQueryTool:
    with _lock:
        if not _tool:
            _tool.append(DatalakeQueryTool(get_settings()))
        return _tool[0]


def set_tool(tool: DatalakeQueryTool | None) -> None:
    with _lock:
        _tool.clear()
        if tool is not None:
            _tool.append(tool)


add_retriever_tools(mcp, get_tool)


@mcp.tool
async def list_plugins() -> list[str]:
    """The plugins the lake holds (ipmi, ganglia, job_table, ...)."""
    with tool_errors():
        return await anyio.to_thread.run_sync(get_tool().datalake.list_plugins)


@mcp.tool
async def list_metrics(plugin: Annotated[str, Field(min_length=1, max_length=64)]) -> list[str]:
    """The metric names of one plugin, as the lake spells them."""
    with tool_errors():
        return await anyio.to_thread.run_sync(lambda: get_tool().datalake.list_metrics(plugin))


@mcp.tool
async def describe_metric(
    plugin: Annotated[str, Field(min_length=1, max_length=64)],
    metric: Annotated[str, Field(min_length=1, max_length=128)],
) -> list[dict[str, str]]:
    """The columns (name, type) a query of this plugin/metric returns."""
    with tool_errors():
        cols = await anyio.to_thread.run_sync(lambda: get_tool().datalake.describe(plugin, metric))
        return [{"name": c.name, "type": c.dtype} for c in cols]


@mcp.tool
async def run_query(
    plugin: Annotated[str, Field(min_length=1, max_length=64)],
    metric: Annotated[str, Field(min_length=1, max_length=128)],
    start: Annotated[str, Field(description="ISO 8601, inclusive")],
    end: Annotated[str, Field(description="ISO 8601, exclusive")],
    nodes: list[int] | None = None,
    op: Literal["gt", "ge", "lt", "le"] | None = None,
    value: float | None = None,
) -> dict[str, Any]:
    """Rows of one metric in [start, end) (optionally of some nodes, with a value condition)."""
    with tool_errors():
        lo, hi = parse_as_of(start), parse_as_of(end)
        if lo is None or hi is None:
            raise UsageError("start and end are required", hint="ISO 8601, e.g. 2022-06-01T08:00Z")
        frame = await anyio.to_thread.run_sync(
            lambda: get_tool().datalake.query(
                plugin, metric, start=lo, end=hi, nodes=nodes, op=op, value=value
            )
        )
        shown = frame.head(MAX_INLINE_ROWS)
        return {
            "columns": frame.columns,
            "rows": _json_rows(shown),
            "row_count": frame.height,
            "truncated": frame.height > MAX_INLINE_ROWS,
        }
