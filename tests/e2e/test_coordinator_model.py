"""The model-backed coordinator: a scripted chat model (tool calls included) driving the real
MCP servers (retriever on the `sample` lake, code agent in a real sandbox) in one test.

The chat model is scripted: it replays tool calls and a final text, and records what the
coordinator sent it, so the tests hold the control flow and the prompt to their contract (the
MetricsExpert skill and the runtime layer in the system prompt, bounded results fed back, every
call bounded by max_tokens). Figures still come from the tools: the rows are checked against the
Polars oracle.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import retrieval_eval
from codeagent_helpers import png_size
from oda_analyst import analyst
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.llm.client import LLMClient
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.reading.read import read_now
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.e2e


def _coordinator(wiring: dict[str, Any], llm: LLMClient) -> Coordinator:
    return Coordinator(wiring["settings"], retriever=wiring["retriever"],
                       codeagent=wiring["codeagent"], glossary=analyst.glossary(),
                       reader=read_now, llm=llm,
                       skill=analyst.metrics_expert())  # fmt: skip


def test_scripted_model_retrieves_then_charts_through_the_mcp_servers(
    coordinator_wiring: dict[str, Any],
    items: dict[str, retrieval_eval.Item],
    sample_lake: Path,
    job_table: pl.DataFrame,
    tmp_path: Path,
) -> None:
    q2 = items["Q2"]
    steps = [
        ScriptStep.tool_call("retrieve", {"request": q2.text}),
        ScriptStep.tool_call("make_chart", {"kind": "line"}),
        ScriptStep.reply("Node 900's power from 20:00 to 24:00 is in the line chart."),
    ]
    with ScriptedOpenAIServer(steps) as server:
        llm = LLMClient(server.base_url, server.model, structured_mode="json_object")
        coordinator = _coordinator(coordinator_wiring, llm)
        answer = asyncio.run(coordinator.ask(q2.text, user="analyst", as_of=q2.as_of,
                                             out_dir=tmp_path))  # fmt: skip
        bodies = server.chat_bodies
    assert answer.status == "completed", (answer.summary, answer.error)
    verdict = retrieval_eval.check_answer(answer, q2.expect, sample_lake, job_table)
    assert verdict.ok, verdict.reason
    charts = [a for a in answer.artifacts if a.media_type == "image/png"]
    assert [Path(a.path).name for a in charts] == ["chart1-line.png"]
    assert png_size(Path(charts[0].path)) == (1200, 660)
    assert answer.answer.startswith("Node 900's power")  # the model's words, kept apart
    assert "Chart:" in answer.summary and "720 rows" in answer.summary  # the facts
    # What the model was sent: three turns, each bounded, the tools and the layered prompt.
    assert len(bodies) == 3 and all(b["max_tokens"] > 0 for b in bodies)
    names = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert names == {"retrieve", "answer_clarification", "make_chart", "run_analysis"}
    system = bodies[0]["messages"][0]["content"]
    assert "MetricsExpert" in system and "`total_power`" in system
    assert "Runtime: user analyst; conversation" in system
    fed_back = json.loads(bodies[1]["messages"][-1]["content"])
    assert fed_back["status"] == "completed"
    assert fed_back["results"][0]["file"] == "r1.csv"
    assert len(fed_back["results"][0]["first_rows"]) == 5  # a preview, never all 720 rows
    assert json.loads(bodies[2]["messages"][-1]["content"])["files"] == [charts[0].path]
    assert answer.dispatches["model.turn"] == 3
    assert answer.dispatches["retriever.query"] == 1
    assert answer.tokens["coordinator"]["calls"] == 3


def test_an_invalid_tool_call_is_shown_to_the_model_and_counted(
    coordinator_wiring: dict[str, Any], tmp_path: Path
) -> None:
    steps = [
        ScriptStep.tool_call("make_chart", {"kind": "spiral"}),
        ScriptStep.tool_call("make_chart", {"kind": "line"}),
        ScriptStep.reply("Nothing was retrieved, so there is nothing to draw."),
    ]
    with ScriptedOpenAIServer(steps) as server:
        llm = LLMClient(server.base_url, server.model, structured_mode="json_object")
        answer = asyncio.run(_coordinator(coordinator_wiring, llm).ask(
            "draw me something", user="analyst", out_dir=tmp_path))  # fmt: skip
        bodies = server.chat_bodies
    assert "invalid" in bodies[1]["messages"][-1]["content"]
    assert "retrieve the data first" in bodies[2]["messages"][-1]["content"]
    assert answer.dispatches["failed.model.tool_call"] == 1
    assert not [a for a in answer.artifacts if a.media_type == "image/png"]
    assert answer.status == "failed"


def test_an_unusable_model_falls_back_to_the_rules(
    coordinator_wiring: dict[str, Any], items: dict[str, retrieval_eval.Item], tmp_path: Path
) -> None:
    q1 = items["Q1"]
    with ScriptedOpenAIServer([], default=ScriptStep.error(503, "overloaded")) as server:
        llm = LLMClient(server.base_url, server.model, structured_mode="json_object",
                        retry=RetryPolicy(max_retries=0))  # fmt: skip
        answer = asyncio.run(_coordinator(coordinator_wiring, llm).ask(
            q1.text, user="analyst", as_of=q1.as_of, out_dir=tmp_path))  # fmt: skip
    assert answer.status == "completed"
    assert answer.rows == [[980]]
    assert any("answered by the rules alone" in w for w in answer.warnings)


def test_a_model_whose_window_cannot_hold_the_prompt_falls_back_to_the_rules(
    coordinator_wiring: dict[str, Any], items: dict[str, retrieval_eval.Item], tmp_path: Path
) -> None:
    """llama.cpp's answer when the coordinator's prompt (the skill is ~18k tokens) exceeds an
    8k window, as SmolLM2 at n_ctx 8192 gave it: the request is answered by the rules."""
    q1 = items["Q1"]
    overflow = "Requested tokens (18497) exceed context window of 8192"
    with ScriptedOpenAIServer([], default=ScriptStep.error(400, overflow)) as server:
        llm = LLMClient(server.base_url, server.model, structured_mode="json_object",
                        retry=RetryPolicy(max_retries=0))  # fmt: skip
        answer = asyncio.run(_coordinator(coordinator_wiring, llm).ask(
            q1.text, user="analyst", as_of=q1.as_of, out_dir=tmp_path))  # fmt: skip
    assert answer.status == "completed", (answer.summary, answer.error)
    assert answer.rows == [[980]]
    assert any("does not fit the model's context window" in w for w in answer.warnings)


def test_a_prompt_that_outgrows_the_context_after_a_tool_ran_fails_without_redoing_it(
    coordinator_wiring: dict[str, Any], items: dict[str, retrieval_eval.Item], tmp_path: Path
) -> None:
    # On the first turn the rules would answer instead; after a retrieval ran, they would run it
    # again, so the request fails and says why.
    q1 = items["Q1"]
    steps = [
        ScriptStep.tool_call("retrieve", {"request": q1.text}),
        ScriptStep.error(400, "Requested tokens (9120) exceed context window of 8192"),
    ]
    with ScriptedOpenAIServer(steps) as server:
        llm = LLMClient(server.base_url, server.model, structured_mode="json_object")
        answer = asyncio.run(_coordinator(coordinator_wiring, llm).ask(
            q1.text, user="analyst", as_of=q1.as_of, out_dir=tmp_path))  # fmt: skip
    assert answer.status == "failed"
    assert answer.error is not None and answer.error["code"] == "llm_context_exceeded"
    assert "9,120 tokens" in answer.error["message"]
    assert answer.dispatches["retriever.query"] == 1  # not run again by the rules
    assert not any("answered by the rules alone" in w for w in answer.warnings)
