"""The coordinator's layered system prompt (paper §III-B a) and the tools a model may call.

Layers, in order: the base (an orchestrator, not an executor: decompose, dispatch within a
bound, present), the routing rules for the two subagents, the tool descriptions, the
MetricsExpert skill (the catalogue as markdown), and the runtime layer rebuilt before every
turn: the user and conversation ids and a sliding window of the recent turns (never the whole
history).
"""

from __future__ import annotations

from collections.abc import Sequence

from oda_analyst.coordinator.state import Turn
from oda_analyst.llm.types import ToolSpec, function_tool
from oda_analyst.reading.model import CHART_KINDS, CHART_NAMES

BASE = """\
You are the coordinator of an HPC telemetry analyst. You plan and delegate; you never compute
figures yourself and never state a number that a tool did not return.
1. Decompose the request into an ordered task list: first the retrieval, then each analysis.
2. Dispatch the retrieval as one plain-language request to `retrieve` (name the metric, the
   entities and the time window). If it asks a clarification you can settle from the
   MetricsExpert reference, answer it with `answer_clarification`; otherwise stop and ask the
   user in your final message.
3. For each chart asked for, call `make_chart` with its kind; for any other analysis write
   Python for `run_analysis` (the results are /in/r1.csv, /in/r2.csv … ; write files to /out).
4. You have a bounded number of tool calls. A failed call returns its error: refine the request
   from it once or twice, then report the failure.
5. End with a short summary of what was retrieved and produced (no new numbers)."""

ROUTING = """\
Routing: data questions go to the retriever (`retrieve`, `answer_clarification`) only; analysis
and plots go to the code agent (`make_chart`, `run_analysis`) only, on data already retrieved."""


def tools() -> list[ToolSpec]:
    """The four tools the model may call (each is one or more MCP dispatches)."""
    return [
        function_tool(
            "retrieve",
            "Ask the retriever for telemetry in plain language; returns status, what it "
            "understood, and per result its columns, row count and first rows.",
            {
                "type": "object",
                "properties": {"request": {"type": "string", "minLength": 3}},
                "required": ["request"],
                "additionalProperties": False,
            },
        ),
        function_tool(
            "answer_clarification",
            "Answer the clarification the retriever asked (its request_id and the answer, e.g. "
            "one candidate metric name).",
            {
                "type": "object",
                "properties": {"request_id": {"type": "string"}, "answer": {"type": "string"}},
                "required": ["request_id", "answer"],
                "additionalProperties": False,
            },
        ),
        function_tool(
            "make_chart",
            "Draw a chart of the retrieved results with a built-in recipe: "
            + ", ".join(f"{k} ({CHART_NAMES[k]})" for k in CHART_KINDS),
            {
                "type": "object",
                "properties": {"kind": {"type": "string", "enum": list(CHART_KINDS)}},
                "required": ["kind"],
                "additionalProperties": False,
            },
        ),
        function_tool(
            "run_analysis",
            "Run Python in the sandbox on the retrieved results (/in/r1.csv …); files written "
            "to /out are returned. pandas, numpy, matplotlib, scipy and `odaplot` are there.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "minLength": 1}},
                "required": ["code"],
                "additionalProperties": False,
            },
        ),
    ]


def runtime_layer(user: str, conversation: str, turns: Sequence[Turn]) -> str:
    """Who asks, in which conversation, and the recent turns (the window the state keeps)."""
    lines = [f"Runtime: user {user}; conversation {conversation}."]
    if turns:
        lines.append("Recent turns (oldest first):")
        lines += [f"- [{t['status']}] {t['question']} -> {t['summary'][:200]}" for t in turns]
    return "\n".join(lines)


def system_prompt(skill: str, user: str, conversation: str, turns: Sequence[Turn]) -> str:
    names = ", ".join(t["function"]["name"] for t in tools())
    return "\n\n".join(
        [BASE, ROUTING, f"Tools: {names}.", skill.strip(), runtime_layer(user, conversation, turns)]
    )
