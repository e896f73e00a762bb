"""The coordinator's agent/tools loop against a real model server: llama.cpp serving SmolLM2-135M
(the session's server, tests/conftest.py), the retriever and the code agent as in-process MCP
servers on the `sample` lake.

Not answer quality but the loop's contract under a real, sloppy model: a request ends within its
turn, token and dispatch bounds whatever the model does; a garbage tool call is refused with a
message naming what was wrong; a prompt that does not fit the model's context hands the request
to the rules (it is not a failed request); and no answer is completed with a figure the oracle
does not give. Bounds are small: the model serves one request at a time on two shared cores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import retrieval_eval
from llama_server import ModelEndpoint
from oda_analyst import analyst
from oda_analyst.coordinator.agent import invalid_call_feedback
from oda_analyst.coordinator.prompt import system_prompt, tools
from oda_analyst.coordinator.service import Coordinator, CoordinatorAnswer
from oda_analyst.llm import LLMClient, LLMToolCallError, RetryPolicy
from oda_analyst.llm.types import ChatResult, Message
from oda_analyst.reading.read import read_now

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # two shared cores: slow


class RecordingClient(LLMClient):
    """The real client, keeping what each turn sent and how it ended (a result or an error)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[list[Message], int | None]] = []
        self.ended: list[ChatResult | Exception] = []

    def chat(self, messages: Sequence[Message], **kwargs: Any) -> ChatResult:
        self.sent.append(([dict(m) for m in messages], kwargs.get("max_tokens")))
        try:
            result = super().chat(messages, **kwargs)
        except Exception as exc:
            self.ended.append(exc)
            raise
        self.ended.append(result)
        return result


def _client(llama: ModelEndpoint) -> RecordingClient:
    return RecordingClient(
        llama.base_url, llama.model, structured_mode="auto", read_timeout_s=1200.0,
        retry=RetryPolicy(max_retries=0),
    )  # fmt: skip


def _ask(wiring: dict[str, Any], llm: LLMClient, item: retrieval_eval.Item, out: Path,
         **bounds: Any) -> CoordinatorAnswer:  # fmt: skip
    coordinator = Coordinator(wiring["settings"], retriever=wiring["retriever"],
                              codeagent=wiring["codeagent"], glossary=analyst.glossary(),
                              reader=read_now, llm=llm,
                              **bounds)  # fmt: skip
    return asyncio.run(coordinator.ask(item.text, user="analyst", as_of=item.as_of, out_dir=out))


def _never_wrong(answer: CoordinatorAnswer, item: retrieval_eval.Item, lake: Path,
                 table: pl.DataFrame) -> None:  # fmt: skip
    if answer.status == "completed":
        verdict = retrieval_eval.check_answer(answer, item.expect, lake, table)
        assert verdict.ok, f"{item.id} completed wrong: {verdict.reason}"


def test_the_skill_that_does_not_fit_the_context_hands_the_request_to_the_rules(
    coordinator_wiring: dict[str, Any], llama: ModelEndpoint, items: dict[str, Any],
    sample_lake: Path, job_table: pl.DataFrame, tmp_path: Path,
) -> None:  # fmt: skip
    # The MetricsExpert skill (the whole catalogue) is larger than an 8k context: the server
    # refuses the first turn without generating, and the rules answer with a warning.
    q1, llm = items["Q1"], _client(llama)
    answer = _ask(coordinator_wiring, llm, q1, tmp_path, skill=analyst.metrics_expert())
    assert answer.status == "completed", (answer.summary, answer.error)
    _never_wrong(answer, q1, sample_lake, job_table)
    assert answer.rows == [[980]]
    [warning] = [w for w in answer.warnings if "does not fit" in w]
    assert "stage 'coordinator'" in warning and "8,192 tokens" in warning
    assert warning.endswith("answered by the rules alone")
    assert answer.dispatches["model.turn"] == 1 and len(llm.sent) == 1
    assert "Traceback" not in warning


def test_the_real_model_ends_within_its_turn_token_and_dispatch_bounds(
    coordinator_wiring: dict[str, Any], llama: ModelEndpoint, items: dict[str, Any],
    sample_lake: Path, job_table: pl.DataFrame, tmp_path: Path,
) -> None:  # fmt: skip
    q2, llm = items["Q2"], _client(llama)
    turns, tokens, dispatches = 2, 48, 3
    answer = _ask(coordinator_wiring, llm, q2, tmp_path, skill="MetricsExpert: total_power (W).",
                  max_turns=turns, max_tokens=tokens, max_dispatches=dispatches)  # fmt: skip
    assert answer.status in {"completed", "clarification", "rejected", "failed"}
    _never_wrong(answer, q2, sample_lake, job_table)
    # Every turn was one bounded call to the server, and the server billed it.
    asked = answer.dispatches["model.turn"]
    assert 1 <= asked <= turns and len(llm.sent) == asked
    assert all(bound == tokens for _, bound in llm.sent)
    used = answer.tokens["coordinator"]
    assert used["calls"] == asked and used["prompt_tokens"] > 0
    assert used["completion_tokens"] <= tokens * asked
    tools_run = sum(n for k, n in answer.dispatches.items()
                    if not k.startswith(("model.", "failed.", "retry.")))  # fmt: skip
    assert tools_run <= dispatches
    # A garbage call is never run: the next turn is told what was wrong with it.
    for i, ended in enumerate(llm.ended[:-1]):
        if isinstance(ended, LLMToolCallError):
            assert llm.sent[i + 1][0][-1]["content"] == invalid_call_feedback(ended)
    if answer.status == "completed":  # figures only from a retrieval the tools ran
        assert answer.dispatches["retriever.query"] >= 1 and answer.rows


def test_a_garbage_tool_call_is_refused_with_what_to_fix(llama: ModelEndpoint) -> None:
    # The coordinator's own prompt and tools; the retrieve call forced and cut after four
    # tokens, so the arguments the model writes cannot be whole JSON.
    system = system_prompt("MetricsExpert: total_power (W).", "analyst", "conv-1", [])
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Power of node 900 on 1 June 2022 from 20:00 to 24:00"},
    ]
    with _client(llama) as llm:
        with pytest.raises(LLMToolCallError) as caught:
            llm.chat(messages, stage="coordinator", tools=tools(), tool_choice="retrieve",
                     max_tokens=4)  # fmt: skip
        feedback = invalid_call_feedback(caught.value)
        assert caught.value.errors[0].startswith("arguments of retrieve:")
        assert caught.value.errors[0] in feedback and "valid arguments" in feedback
        # The refusal goes back as a turn the server takes, and the model answers it.
        again = llm.chat([*messages, {"role": "user", "content": feedback}], stage="coordinator",
                         tools=tools(), max_tokens=8)  # fmt: skip
    assert again.usage.reported and again.usage.completion_tokens <= 8
