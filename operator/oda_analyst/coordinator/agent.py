"""The model-backed coordinator: the same graph with an ``agent`` ⇄ ``tools`` loop in front.

    agent ──(tool calls)──▶ tools ──▶ agent … ──(final text)──▶ present
      │
      └─(model unusable)──▶ plan ▶ retrieve ▶ … (the rule path, with a warning)

``agent`` sends the layered system prompt (``prompt``: base, routing, tools, the MetricsExpert
skill, the runtime layer with user, conversation and the window of recent turns) and this
request's messages to the configured OpenAI-compatible endpoint through ``oda_analyst.llm``
(every call bounded by ``max_tokens``, counted in the token ledger under ``coordinator``).
``tools`` executes the calls; each is one or more MCP dispatches, counted and bounded like the
rule path's, and a failure comes back to the model as the tool's result so it can refine the
request. The model's own turns are bounded too (``model.turn``). The figures of the answer are
the tools' results: the model's final text is kept as ``model_text``, the summary stays the
factual one.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from opentelemetry import trace

from oda_analyst.coordinator import graph as rule
from oda_analyst.coordinator.charts import ChartError, Output, input_name
from oda_analyst.coordinator.dispatch import DispatchError, DispatchLimitError
from oda_analyst.coordinator.figures import recipe_sentence
from oda_analyst.coordinator.planner import ChartTask
from oda_analyst.coordinator.prompt import system_prompt, tools
from oda_analyst.coordinator.state import CoordinatorState
from oda_analyst.llm.client import LLMClient
from oda_analyst.llm.errors import (
    LLMContextError,
    LLMError,
    LLMToolCallError,
    LLMUnavailableError,
)
from oda_analyst.llm.types import ToolCall, tool_result_message
from oda_analyst.reading.model import CHART_KINDS

tracer = trace.get_tracer(__name__)

MAX_TOKENS = 1024
"""The completion bound of one model turn (a final summary or a tool call with its code)."""
MAX_TURNS = 8
"""The model turns of one request: with the dispatch bound, what makes a request end."""
PREVIEW_ROWS = 5


@dataclass
class AgentDeps(rule.Deps):
    """The rule path's run context plus the model, the skill and the model's bounds."""

    llm: LLMClient | None = None
    skill: str = ""
    max_turns: int = MAX_TURNS
    max_tokens: int = MAX_TOKENS


def _view(answer: dict[str, Any]) -> dict[str, Any]:
    """What the model reads of a retriever answer: bounded (a preview, never every row)."""
    view: dict[str, Any] = {
        k: answer.get(k)
        for k in ("status", "request_id", "understood_as", "answer", "clarification")
    }
    view["results"] = [
        {
            "index": i + 1,
            "file": input_name(i),
            "columns": r.get("columns"),
            "row_count": r.get("row_count"),
            "unit": r.get("unit"),
            "first_rows": (r.get("rows") if r.get("rows") is not None else r.get("preview") or [])[
                :PREVIEW_ROWS
            ],
        }
        for i, r in enumerate(answer.get("results") or [])
    ]
    return view


def invalid_call_feedback(err: LLMToolCallError) -> str:
    """What the model is told of a tool call it got wrong: what was wrong, and what to do."""
    return f"Your tool call was invalid: {'; '.join(err.errors)}. Call a tool with valid arguments."


async def agent(state: CoordinatorState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    deps = runtime.context
    assert deps.llm is not None
    turns = state.get("model_turns", 0)
    if turns >= deps.max_turns:
        err = DispatchLimitError(
            f"the model used its {deps.max_turns} turns without finishing",
            hint="ask for less at once, or without a model (rules)",
        )
        return {"status": "failed", "error": err.to_dict(), "next": "present"}
    messages = list(state.get("messages") or [])
    if not messages:
        messages = [{"role": "user", "content": state["question"]}]
    system = system_prompt(
        deps.skill, state["user"], state["conversation_id"], state.get("turns") or []
    )
    deps.dispatcher.counters["model.turn"] += 1
    with tracer.start_as_current_span("model turn", attributes={"oda.turn": turns}):
        try:
            result = await asyncio.to_thread(
                deps.llm.chat,
                [{"role": "system", "content": system}, *messages],
                stage="coordinator",
                tools=tools(),
                max_tokens=deps.max_tokens,
            )
        except LLMToolCallError as err:
            # An invalid call is shown to the model with what was wrong, and counted.
            deps.dispatcher.counters["failed.model.tool_call"] += 1
            messages.append({"role": "user", "content": invalid_call_feedback(err)})
            return {"messages": messages, "model_turns": turns + 1, "next": "agent"}
        except LLMUnavailableError as err:
            deps.progress(f"model unusable ({err.message}); continuing by the rules")
            warning = f"the model was not usable ({err.message}); answered by the rules alone"
            return {"warnings": [warning], "messages": [], "next": "plan"}
        except LLMContextError as err:
            if turns:  # tools ran already: redoing the request by the rules would repeat them
                return {"status": "failed", "error": err.to_dict(), "next": "present"}
            # The first prompt (mostly the MetricsExpert skill) does not fit the model's
            # context: nothing was asked yet, so the rules answer, as for a model that is down.
            deps.progress(f"{err.message}; continuing by the rules")
            warning = f"the model could not take the request ({err.message}); "
            warning += "answered by the rules alone"
            return {"warnings": [warning], "messages": [], "next": "plan"}
        except LLMError as err:
            return {"status": "failed", "error": err.to_dict(), "next": "present"}
    messages.append(result.assistant_message())
    out: dict[str, Any] = {"messages": messages, "model_turns": turns + 1}
    if result.tool_calls:
        out["next"] = "tools"
    else:
        out.update(model_text=result.content or "", next="present")
    return out


async def _call(
    call: ToolCall, state: CoordinatorState, deps: AgentDeps, updates: dict[str, Any]
) -> Any:
    args = call.arguments
    if call.name == "retrieve":
        answer = await deps.retriever.query(str(args["request"]), state.get("as_of"))
        updates["retrieval"] = answer
        return _view(answer)
    if call.name == "answer_clarification":
        answer = await deps.retriever.clarify(str(args["request_id"]), str(args["answer"]))
        updates["retrieval"] = answer
        return _view(answer)
    retrieval = updates.get("retrieval") or state.get("retrieval") or {}
    results = list(retrieval.get("results") or [])
    if retrieval.get("status") != "completed" or not results:
        return {"error": "retrieve the data first: there is no completed retrieval"}
    artifacts = list(updates.get("artifacts") or state.get("artifacts") or [])
    out_dir = Path(state["out_dir"])
    if call.name == "make_chart":
        kind = str(args["kind"])
        if kind not in CHART_KINDS:
            return {"error": f"unknown chart kind {kind!r}; use one of {list(CHART_KINDS)}"}
        made = await rule._run_chart(
            len(artifacts),
            ChartTask(kind, kind),
            results,
            False,
            (),
            out_dir,
            deps,
            set(),
        )
    else:
        made = await _run_code(str(args["code"]), results, len(artifacts), out_dir, deps)
    updates["artifacts"] = artifacts + made
    out: dict[str, Any] = {"files": [a["path"] for a in made if "figures" not in a]}
    stated = [recipe_sentence(a["figures"], compare=False) for a in made if "figures" in a]
    if any(stated):
        out["figures"] = " ".join(s for s in stated if s)  # what the answer will state
    return out


async def _run_code(
    code: str, results: list[dict[str, Any]], index: int, out_dir: Path, deps: AgentDeps
) -> list[dict[str, Any]]:
    if not deps.codeagent.started:
        await deps.codeagent.start()
    for i, res in enumerate(results):
        await deps.codeagent.upload(input_name(i), (await deps.retriever.csv_text(res)).encode())
    run = await deps.codeagent.execute(code)
    if run.get("status") != "ok":
        raise DispatchError(
            "codeagent",
            "codeagent_execute",
            f"{run.get('status')}: {(run.get('note') or run.get('stderr') or '')[-600:]}",
        )
    pngs = [f["name"] for f in run.get("files") or [] if str(f["name"]).endswith(".png")]
    files = await deps.codeagent.artifacts(pngs) if pngs else {}
    return [
        rule._save(out_dir, index + k, Output(name, "image/png", Path(name).stem), data, code)
        for k, (name, data) in enumerate(files.items())
    ]


async def run_tools(state: CoordinatorState, runtime: Runtime[AgentDeps]) -> dict[str, Any]:
    deps = runtime.context
    messages = list(state.get("messages") or [])
    calls = messages[-1].get("tool_calls") or []
    updates: dict[str, Any] = {}
    for raw in calls:
        call = ToolCall(
            raw["id"], raw["function"]["name"], json.loads(raw["function"].get("arguments") or "{}")
        )
        with tracer.start_as_current_span(
            f"task {call.name}", attributes={"oda.task": call.name}
        ) as span:
            try:
                content = await _call(call, state, deps, updates)
                span.set_attribute("oda.status", "ok")
            except (DispatchError, ChartError) as err:
                span.set_attribute("oda.status", "error")
                content = {"error": err.message, "hint": err.hint}
            except DispatchLimitError as err:
                return {**updates, "status": "failed", "error": err.to_dict(), "next": "present"}
        messages.append(tool_result_message(call, content))
    if deps.codeagent.started:
        await deps.codeagent.stop()
    return {**updates, "messages": messages, "next": "agent"}


def build() -> StateGraph[CoordinatorState, AgentDeps, CoordinatorState, CoordinatorState]:
    """The model path's graph: the agent loop, then the rule path's nodes where it falls back."""
    g: StateGraph[CoordinatorState, AgentDeps, CoordinatorState, CoordinatorState] = StateGraph(
        CoordinatorState, context_schema=AgentDeps
    )
    rule._add(g, "agent", agent)  # type: ignore[arg-type]
    rule._add(g, "tools", run_tools)  # type: ignore[arg-type]
    for name in ("plan", "ask_analysis", "retrieve", "ask_retriever", "analyse", "present"):
        rule._add(g, name, getattr(rule, name))  # type: ignore[arg-type]
    g.add_edge(START, "agent")
    targets = [
        "agent",
        "tools",
        "plan",
        "ask_analysis",
        "retrieve",
        "ask_retriever",
        "analyse",
        "present",
        END,
    ]
    for node in ("agent", "tools", "plan", "ask_analysis", "retrieve", "ask_retriever", "analyse"):
        g.add_conditional_edges(node, rule._route, targets)
    g.add_edge("present", END)
    return g


builder = build()
