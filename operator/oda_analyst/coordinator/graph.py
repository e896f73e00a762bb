"""The coordinator as a compiled LangGraph graph (the rule path: no model needed).

    plan ──▶ retrieve ──▶ analyse ──▶ present
     │  ▲       │  ▲
     ▼  │       ▼  │
    ask_analysis  ask_retriever        (LangGraph interrupts: the user answers, the graph resumes)

``plan`` decomposes the request (``planner``); a clause that names no chart is asked about.
``retrieve`` dispatches the request to the retriever's MCP ``query``; a clarification the
retriever asks is passed to the user unchanged and its answer sent back with ``clarify``; a
rejection is reported (the retriever had the Reading, so it never read a chart as a metric).
``analyse`` binds each chart to the results
(``charts.bind``), uploads the results the script reads, runs it in the code agent's sandbox and
fetches the files it wrote. ``present`` writes the summary and the conversation's turn.

Runtime objects (the MCP clients behind ``Deps``) come as LangGraph's run context, never into a
checkpoint: a request that stopped for a clarification resumes in another process, with new
clients, from the checkpoint alone.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from opentelemetry import trace

from oda_analyst.coordinator.charts import (
    ChartError,
    ChartJob,
    Glossary,
    Output,
    bind,
    input_name,
)
from oda_analyst.coordinator.dispatch import Dispatcher, DispatchError, DispatchLimitError
from oda_analyst.coordinator.planner import (
    ChartTask,
    Decomposition,
    Unclear,
    decompose,
    resolve,
)
from oda_analyst.coordinator.state import CoordinatorState, TaskRecord, Turn
from oda_analyst.coordinator.subagents import CodeAgent, RetrieverAgent
from oda_analyst.coordinator.summary import summary_text
from oda_analyst.errors import OdaError
from oda_analyst.reading.model import ChartKind, Reading

tracer = trace.get_tracer(__name__)

MAX_CLARIFICATIONS = 4
"""Questions one request may ask the user before it stops (each answer is a new attempt)."""


@dataclass
class Deps:
    """What the nodes use and no checkpoint holds: subagent clients, vocabulary, skill data."""

    dispatcher: Dispatcher
    retriever: RetrieverAgent
    codeagent: CodeAgent
    reader: Callable[[str, datetime | None], Reading]
    """The one reader (wired in by ``oda_analyst.analyst``): the question read once."""
    glossary: Glossary
    max_retries: int
    progress: Callable[[str], None]
    send_reading: bool = True
    """Whether the retriever takes the Reading (ours does; a paper baseline reads the text)."""


def _plan_of(state: CoordinatorState) -> Decomposition:
    raw = state.get("plan") or {}
    return Decomposition(
        question=raw["question"],
        retrieval=raw["retrieval"],
        charts=tuple(ChartTask(**c) for c in raw.get("charts", [])),
        reports=tuple(raw.get("reports", [])),
        compare=bool(raw.get("compare")),
        figures=tuple(raw.get("figures") or ()),
    )


def _task(name: str, status: str, detail: str = "") -> TaskRecord:
    return {"name": name, "status": status, "detail": detail}


def _failed(err: OdaError, status: str = "failed") -> dict[str, Any]:
    return {"status": status, "error": err.to_dict(), "next": "present"}


# --- nodes ----------------------------------------------------------------------------------------


async def plan(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    as_of = state.get("as_of")
    with tracer.start_as_current_span("task plan", attributes={"oda.task": "plan"}):
        reading = runtime.context.reader(
            state["question"], datetime.fromisoformat(as_of) if as_of else None
        )
        found = decompose(reading)
    return {**_planned(found, runtime.context), "reading": reading.model_dump(mode="json")}


def _kind_of(deps: Deps) -> Callable[[str], ChartKind | None]:
    def kind_of(reply: str) -> ChartKind | None:
        charts = deps.reader(reply, None).analysis.charts
        return charts[0].kind if charts else None

    return kind_of


def _planned(found: Decomposition | Unclear, deps: Deps) -> dict[str, Any]:
    if isinstance(found, Unclear):
        deps.progress(f"asking: {found.message}")
        return {"unclear": asdict(found), "plan": None, "next": "ask_analysis"}
    for line in found.tasks:
        deps.progress(f"task: {line}")
    return {
        "plan": asdict(found),
        "unclear": None,
        "tasks": [_task(t, "planned") for t in found.tasks],
        "sent": found.retrieval,
        "next": "retrieve",
    }


async def ask_analysis(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    raw = state["unclear"] or {}
    count = state.get("clarifications", 0)
    if count >= MAX_CLARIFICATIONS:
        return _failed(
            OdaError(
                "too many clarifications for one request",
                hint="ask again, naming the chart you want",
            ),
            "rejected",
        )
    answer = interrupt(
        {
            "source": "coordinator",
            "field": raw.get("field", "analysis"),
            "question": raw["message"],
            "candidates": raw.get("candidates", []),
        }
    )
    unclear = Unclear(**raw)
    out = _planned(resolve(unclear, str(answer), _kind_of(runtime.context)), runtime.context)
    out["clarifications"] = count + 1
    return out


def _after_retrieval(answer: dict[str, Any], state: CoordinatorState, deps: Deps) -> dict[str, Any]:
    status = answer.get("status")
    deps.progress(f"retriever: {status}: {str(answer.get('answer', ''))[:100]}")
    tasks = list(state.get("tasks") or [])
    if tasks:
        tasks[0] = _task(tasks[0]["name"], str(status), str(answer.get("understood_as") or ""))
    out: dict[str, Any] = {"retrieval": answer, "tasks": tasks}
    if status == "completed":
        out["next"] = "analyse" if (state.get("plan") or {}).get("charts") else "present"
    elif status == "clarification":
        out["next"] = "ask_retriever"
    else:
        out.update(status=str(status), next="present")
    return out


async def retrieve(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    sent = state.get("sent") or state["question"]
    with tracer.start_as_current_span(
        "task retrieve", attributes={"oda.task": "retrieve", "oda.request": sent[:200]}
    ):
        deps.progress(f"retrieving: {sent}")
        try:
            reading = state.get("reading") if deps.send_reading else None
            answer = await deps.retriever.query(sent, state.get("as_of"), reading)
        except (DispatchError, DispatchLimitError) as err:
            return _failed(err)
    return _after_retrieval(answer, state, deps)


async def ask_retriever(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    asked = state["retrieval"] or {}
    count = state.get("clarifications", 0)
    if count >= MAX_CLARIFICATIONS:
        return _failed(
            OdaError(
                "too many clarifications for one request",
                hint="ask again with the metric and the window named",
            ),
            "rejected",
        )
    clar = asked.get("clarification") or {}
    answer = interrupt({"source": "retriever", "request_id": asked.get("request_id"), **clar})
    with tracer.start_as_current_span("task clarify", attributes={"oda.task": "clarify"}):
        try:
            resumed = await deps.retriever.clarify(str(asked["request_id"]), str(answer))
        except (DispatchError, DispatchLimitError) as err:
            return _failed(err)
    out = _after_retrieval(resumed, state, deps)
    out["clarifications"] = count + 1
    return out


async def _run_chart(
    index: int,
    chart: ChartTask,
    results: list[dict[str, Any]],
    stats: bool,
    figures: Sequence[str],
    out_dir: Path,
    deps: Deps,
    uploaded: set[int],
) -> list[dict[str, Any]]:
    job = bind(chart.kind, results, deps.glossary, stats=stats, figures=figures)
    if not deps.codeagent.started:
        deps.progress("code agent: starting the sandbox")
        await deps.codeagent.start()
    for i in job.inputs:
        if i not in uploaded:
            text = await deps.retriever.csv_text(results[i])
            deps.progress(f"code agent: uploading {input_name(i)} ({len(text):,} bytes)")
            await deps.codeagent.upload(input_name(i), text.encode("utf-8"))
            uploaded.add(i)
    deps.progress(f"code agent: drawing {chart.kind}")
    run = await deps.codeagent.execute(job.script)
    if run.get("status") != "ok":
        detail = (run.get("note") or run.get("stderr") or "")[-600:]
        raise DispatchError("codeagent", "codeagent_execute", f"{run.get('status')}: {detail}")
    files = await deps.codeagent.artifacts([o.name for o in job.outputs])
    out = []
    for output in job.outputs:
        if output.name not in files:
            raise DispatchError(
                "codeagent", "codeagent_get_artifacts", f"the script wrote no {output.name}"
            )
        art = _save(out_dir, index, output, files[output.name], job.script)
        if "figures" in art:
            art["provenance"] = figure_provenance(job, results)
        out.append(art)
    return out


def figure_provenance(job: ChartJob, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where the figures of a chart's script come from: each retrieval it read (as the answer
    names it, with its rows and query) and each recipe call with its parameters."""
    sources = []
    for i in job.inputs:
        res = results[i]
        sources.append({"input": input_name(i), "understood_as": res.get("understood_as"),
                        "row_count": res.get("row_count"), "sparql": res.get("sparql"),
                        "csv_handle": res.get("csv_handle")})  # fmt: skip
    calls = [line for line in job.script.splitlines() if line.startswith("odaplot.")]
    return {"retrievals": sources, "recipes": calls}


def _save(out_dir: Path, index: int, output: Output, data: bytes, script: str) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"chart{index + 1}-{output.name}"
    path.write_bytes(data)
    # The code that made it, beside it: an operator can rerun or audit it.
    code = out_dir / f"chart{index + 1}-{Path(output.name).stem}.py"
    code.write_text(script)
    art: dict[str, Any] = {
        "path": str(path), "media_type": output.media_type, "title": output.title,
        "script": str(code),
    }  # fmt: skip
    if output.media_type == "application/json":
        with contextlib.suppress(ValueError):
            got = json.loads(data)
            if isinstance(got, dict):
                art["figures"] = got  # stated in words by the summary
    return art


async def analyse(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    plan_ = _plan_of(state)
    results = list((state.get("retrieval") or {}).get("results") or [])
    tasks = list(state.get("tasks") or [])
    artifacts: list[dict[str, Any]] = []
    uploaded: set[int] = set()
    error: OdaError | None = None
    status = "completed"
    try:
        for i, chart in enumerate(plan_.charts):
            with tracer.start_as_current_span(
                f"task chart {chart.kind}",
                attributes={"oda.task": "chart", "oda.chart": chart.kind},
            ) as span:
                try:
                    made = await _run_chart(
                        i,
                        chart,
                        results,
                        bool(plan_.reports),
                        plan_.figures,
                        Path(state["out_dir"]),
                        deps,
                        uploaded,
                    )
                except ChartError as err:
                    span.set_attribute("oda.status", "rejected")
                    error, status = err, "rejected"
                    tasks[1 + i] = _task(tasks[1 + i]["name"], "rejected", err.message)
                    break
                except (DispatchError, DispatchLimitError) as err:
                    span.set_attribute("oda.status", "failed")
                    error, status = err, "failed"
                    tasks[1 + i] = _task(tasks[1 + i]["name"], "failed", err.message)
                    break
                span.set_attribute("oda.status", "ok")
                artifacts += made
                tasks[1 + i] = _task(
                    tasks[1 + i]["name"], "completed", ", ".join(a["path"] for a in made)
                )
                deps.progress(f"chart: {made[0]['path']}")
    finally:
        # Idle sandboxes are reaped anyway: the answer does not depend on this call.
        with contextlib.suppress(DispatchError, DispatchLimitError):
            await deps.codeagent.stop()
    for j in range(len(plan_.reports)):
        k = 1 + len(plan_.charts) + j
        if k < len(tasks) and status == "completed":
            tasks[k] = _task(tasks[k]["name"], "completed", "statistics in the results")
    out: dict[str, Any] = {
        "artifacts": artifacts,
        "tasks": tasks,
        "status": status,
        "next": "present",
    }
    if error is not None:
        out["error"] = error.to_dict()
    return out


async def present(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    retrieval = state.get("retrieval") or {}
    status = state.get("status") or str(retrieval.get("status") or "failed")
    text = summary_text(state, status)
    turn: Turn = {
        "request_id": state["request_id"],
        "question": state["question"],
        "summary": text[:500],
        "status": status,
    }
    return {
        "status": status,
        "summary": text,
        "turns": [turn],
        "counters": dict(deps.dispatcher.counters),
        "next": END,
    }


def _counted(
    node: Callable[[CoordinatorState, Runtime[Deps]], Awaitable[dict[str, Any]]],
) -> Callable[[CoordinatorState, Runtime[Deps]], Awaitable[dict[str, Any]]]:
    """The node, its update carrying the request's dispatch counters: they reach the
    checkpoint before an interrupt, so a resumed request keeps counting against its bound."""

    @functools.wraps(node)
    async def wrapped(state: CoordinatorState, runtime: Runtime[Deps]) -> dict[str, Any]:
        out = await node(state, runtime)
        out["counters"] = dict(runtime.context.dispatcher.counters)
        return out

    return wrapped


def _route(state: CoordinatorState) -> str:
    return state.get("next") or END


def _add(
    g: StateGraph[CoordinatorState, Deps, CoordinatorState, CoordinatorState],
    name: str,
    node: Callable[[CoordinatorState, Runtime[Deps]], Awaitable[dict[str, Any]]],
) -> None:
    # LangGraph's overloads type `runtime` as keyword-only; it passes it by name, which this
    # signature accepts too.
    g.add_node(name, _counted(node))  # type: ignore[call-overload]


def build() -> StateGraph[CoordinatorState, Deps, CoordinatorState, CoordinatorState]:
    """The uncompiled graph (compile it with a checkpointer: interrupts need one)."""
    g: StateGraph[CoordinatorState, Deps, CoordinatorState, CoordinatorState] = StateGraph(
        CoordinatorState, context_schema=Deps
    )
    _add(g, "plan", plan)
    _add(g, "ask_analysis", ask_analysis)
    _add(g, "retrieve", retrieve)
    _add(g, "ask_retriever", ask_retriever)
    _add(g, "analyse", analyse)
    _add(g, "present", present)
    g.add_edge(START, "plan")
    targets = ["ask_analysis", "retrieve", "ask_retriever", "analyse", "present", END]
    for node in ("plan", "ask_analysis", "retrieve", "ask_retriever", "analyse"):
        g.add_conditional_edges(node, _route, targets)
    g.add_edge("present", END)
    return g


builder = build()
"""The module-level graph definition (STYLE: LangGraph agents expose their graph)."""
