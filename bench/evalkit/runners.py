"""Running one question through one configuration, the way a host would.

Retrieval set: each backend behind its own MCP server (``query``, then ``clarify`` when it asks
and the item says what the user answers), called in memory through a real MCP client — the
interface the paper's coordinator uses. End-to-end set: the analyst's own entry point,
``oda-analyst ask --json --backend B --out DIR`` (the coordinator), one process per question;
while the coordinator is not on this branch (``ask`` has no ``--out``), the e2e run measures the
retrieval part alone and says so.
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

COMPONENTS = ("coordinator", "retrieval", "code")


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
    tokens = answer.get("tokens") or {}
    return Run(
        answer,
        time.perf_counter() - began,
        dispatches,
        failed_calls(tokens),
        component_tokens(tokens),
    )


# --- end to end: the analyst's entry point -----------------------------------------------------


def coordinator_present() -> bool:
    """Whether ``oda-analyst ask`` is the coordinator's (it writes artefacts under ``--out``)."""
    probe = subprocess.run(
        [str(Path(sys.executable).with_name("oda-analyst")), "ask", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "--out" in probe.stdout and "--backend" in probe.stdout


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
    dispatches = 1
    if answer.get("status") == "clarification" and item.clarify:
        again = [*base, "clarify", str(answer["request_id"]), item.clarify, "--json", "--quiet"]
        answer = _json_of(
            subprocess.run(again, capture_output=True, text=True, env=full_env, check=False)
        )
        dispatches += 1
    arts = _artifact_paths(answer)
    plot = str(item.analysis.get("plot", "none"))
    images = [a for a in arts if a.lower().endswith((".png", ".svg")) and Path(a).is_file()]
    code_ok = answer.get("status") == "completed" and (bool(images) if plot != "none" else True)
    tokens = answer.get("tokens") or {}
    retries = int(answer.get("retries", 0) or 0) + failed_calls(tokens)
    return Run(
        answer,
        time.perf_counter() - began,
        dispatches,
        retries,
        component_tokens(tokens),
        code_ok,
        arts,
    )


def _json_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": "failed", "answer": f"exit {proc.returncode}: {tail[0]}", "results": []}
    return data if isinstance(data, dict) else {"status": "failed", "answer": "not an object"}
