"""Running one question through one configuration, the way a host would.

Retrieval set: each backend behind its own MCP server (``query``, then ``clarify`` when it asks
and the item says what the user answers), called in memory through a real MCP client — the
interface the paper's coordinator uses. End-to-end set: the analyst's own entry point,
``oda-analyst ask --json --backend B --out DIR`` (the coordinator retrieving through backend B's
MCP server, then the code step in the sandbox), one process per question.

Tokens per component come from the request's trace file when it has one
(``evalkit.tracetokens``), else from the answer's own per-stage accounting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.exceptions import ToolError

from evalkit.sets import Item
from evalkit.tracetokens import COMPONENTS, read_trace


@dataclass
class Run:
    """What one question produced through one configuration."""

    answer: dict[str, Any]
    seconds: float
    dispatches: int = 1
    retries: int = 0
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)  # component -> in/out
    code_ok: bool | None = None  # None: code execution not measured
    artifacts: list[str] = field(default_factory=list)
    retrieved: bool | None = None  # None: the answer's status says it (retrieval alone)
    token_source: str = "answer"  # "trace": read from the request's trace file


def component_tokens(
    tokens: dict[str, Any], default: str = "retrieval"
) -> dict[str, dict[str, int]]:
    """A trace's per-stage (or per-component) token totals folded into the three components."""
    out = {c: {"input": 0, "output": 0} for c in COMPONENTS}
    for stage, totals in (tokens or {}).items():
        if not isinstance(totals, dict):
            continue
        comp = next((c for c in COMPONENTS if stage.startswith(c)), default)
        if stage.startswith(("codeagent", "code_")):
            comp = "code"
        out[comp]["input"] += int(totals.get("prompt_tokens", totals.get("input", 0)) or 0)
        out[comp]["output"] += int(totals.get("completion_tokens", totals.get("output", 0)) or 0)
    return out


def failed_calls(tokens: dict[str, Any]) -> int:
    return sum(
        int(t.get("failed_calls", 0) or 0) for t in (tokens or {}).values() if isinstance(t, dict)
    )


def accounted(answer: dict[str, Any]) -> tuple[dict[str, dict[str, int]], int, str]:
    """Tokens per component, failed model calls, and where they were read: the trace file
    when the answer names a readable one, else the answer's per-stage totals."""
    found = read_trace(answer["trace"]) if answer.get("trace") else None
    if found is not None:
        return found.tokens, found.failed_calls, "trace"
    tokens = answer.get("tokens") or {}
    return component_tokens(tokens), failed_calls(tokens), "answer"


def dispatch_counts(counters: dict[str, Any]) -> tuple[int, int]:
    """(subagent dispatches, retries) from the coordinator's named counters."""
    total = sum(int(v) for k, v in counters.items() if not k.startswith(("failed.", "retry.")))
    retries = sum(int(v) for k, v in counters.items() if k.startswith("retry."))
    return total, retries


def retrieval_view(answer: dict[str, Any]) -> dict[str, Any]:
    """The retrieval part of a coordinator answer, for classing its rows: its status is the
    retrieve task's (a chart the code step could not draw does not unmake right rows)."""
    tasks = answer.get("tasks") or []
    first = tasks[0] if tasks and str(tasks[0].get("name", "")).startswith("retrieve") else None
    if first is None or answer.get("status") == "clarification":
        return answer
    return {**answer, "status": first.get("status") or answer.get("status")}


# --- retrieval: the backends' MCP servers ------------------------------------------------------


@contextmanager
def served(backend: str, settings: Any) -> Iterator[Any]:
    """The backend's MCP server module, serving a backend built from ``settings``."""
    if backend == "nsa":
        from oda_analyst.retriever import mcp_server as nsa
        from oda_analyst.retriever.admission import Gate
        from oda_analyst.retriever.service import Retriever

        nsa.set_retriever(Retriever(settings))
        nsa.set_gate(Gate(1, 16, 3600.0))  # one at a time, and long questions may finish
        try:
            yield nsa.mcp
        finally:
            nsa.set_retriever(None)
            nsa.set_gate(None)
        return
    if backend == "sota1":
        from oda_analyst.baselines.sota1 import mcp_server as s1
        from oda_analyst.baselines.sota1.tool import ExasageQueryTool

        s1.set_tool(ExasageQueryTool(settings))
        try:
            yield s1.mcp
        finally:
            s1.set_tool(None)
        return
    from oda_analyst.baselines.sota2 import mcp_server as s2
    from oda_analyst.baselines.sota2.tool import DatalakeQueryTool

    s2.set_tool(DatalakeQueryTool(settings))
    try:
        yield s2.mcp
    finally:
        s2.set_tool(None)


async def _call(client: Client[Any], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await client.call_tool(tool, args)
    except ToolError as exc:  # the backend's typed error, as a model would read it
        return {"status": "failed", "answer": str(exc), "results": []}
    data = result.structured_content or {}
    return dict(data)


async def run_mcp(client: Client[Any], item: Item) -> Run:
    """``query``, then ``clarify`` with the item's answer if the backend asks (once)."""
    began = time.perf_counter()
    answer = await _call(client, "query", {"question": item.text, "as_of": item.as_of.isoformat()})
    dispatches = 1
    if answer.get("status") == "clarification" and item.clarify:
        answer = await _call(
            client, "clarify", {"request_id": answer["request_id"], "answer": item.clarify}
        )
        dispatches += 1
    tokens, failed, source = accounted(answer)
    return Run(answer, time.perf_counter() - began, dispatches, failed, tokens,
               token_source=source)  # fmt: skip


# --- end to end: the analyst's entry point -----------------------------------------------------


def _artifact_paths(answer: dict[str, Any]) -> list[str]:
    out = []
    for art in answer.get("artifacts") or []:
        path = art.get("path") if isinstance(art, dict) else art
        if path:
            out.append(str(path))
    return out


def run_cli(item: Item, backend: str, env: dict[str, str], out_dir: Path) -> Run:
    """One end-to-end question through ``oda-analyst ask`` (and ``clarify`` when it asks)."""
    began = time.perf_counter()
    base = [str(Path(sys.executable).with_name("oda-analyst"))]
    cmd = [
        *base,
        "ask",
        item.text,
        "--json",
        "--quiet",
        "--backend",
        backend,
        "--as-of",
        item.as_of.isoformat(),
        "--out",
        str(out_dir),
    ]
    full_env = {**os.environ, **env}
    answer = _json_of(
        subprocess.run(cmd, capture_output=True, text=True, env=full_env, check=False)
    )
    clarified = False
    if answer.get("status") == "clarification" and item.clarify:
        clarified = True
        again = [*base, "clarify", str(answer["request_id"]), item.clarify, "--json", "--quiet"]
        answer = _json_of(
            subprocess.run(again, capture_output=True, text=True, env=full_env, check=False)
        )
    arts = _artifact_paths(answer)
    plot = str(item.analysis.get("plot", "none"))
    images = [a for a in arts if a.lower().endswith((".png", ".svg")) and Path(a).is_file()]
    code_ok = answer.get("status") == "completed" and (bool(images) if plot != "none" else True)
    tokens, failed, source = accounted(answer)
    # The resumed run's counters include the first run's (one checkpointed request).
    dispatches, retried = dispatch_counts(dict(answer.get("dispatches") or {}))
    view = retrieval_view(answer)
    return Run(
        answer,
        time.perf_counter() - began,
        dispatches or (2 if clarified else 1),
        retried + failed,
        tokens,
        code_ok,
        arts,
        retrieved=view.get("status") == "completed",
        token_source=source,
    )


def _json_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": "failed", "answer": f"exit {proc.returncode}: {tail[0]}", "results": []}
    return data if isinstance(data, dict) else {"status": "failed", "answer": "not an object"}
