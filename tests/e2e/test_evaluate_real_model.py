"""bench/evaluate.py with a real model (llama.cpp serving SmolLM2-135M, the session's server):
tokens per component are read from each request's trace and billed where the calls were made.

One question, through ``oda-analyst ask`` for ours and for SoTA#1 (the model is slow on shared
CPU cores). ODA_LLM_FORCE makes our retriever ask the model at one stage even where its rules
would not need it, so the retrieval component has calls to bill; SoTA#1 is rule-based and
makes none. Every model call in a trace file is counted exactly once, in one component.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from baseline_lake import write_baseline_lake
from llama_server import ModelEndpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import evaluate
from evalkit.sets import load_set

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]  # two shared cores: slow

SET = """\
version: 1
default_as_of: "2022-06-15T00:00:00Z"
questions:
  - id: T1
    category: power
    text: total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]
    expect: {kind: readings, metrics: [ipmi/total_power], nodes: [900],
             window: ["2022-06-01T00:00", "2022-06-01T00:10"]}
"""


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


def _calls_in(trace: Path) -> tuple[int, int, int]:
    """(model calls, input tokens, output tokens) of every model span in the trace file."""
    spans = json.loads(trace.read_text())["spans"]
    used = [s["attributes"] for s in spans if "gen_ai.usage.input_tokens" in s["attributes"]]
    return (len(used), sum(int(a["gen_ai.usage.input_tokens"]) for a in used),
            sum(int(a["gen_ai.usage.output_tokens"]) for a in used))  # fmt: skip


def _sum(tokens: dict[str, dict[str, int]], key: str) -> int:
    return sum(t[key] for t in tokens.values())


def test_tokens_per_component_come_from_the_trace(
    llama: ModelEndpoint, lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_LLM_BASE_URL", llama.base_url)
    monkeypatch.setenv("ODA_LLM_MODEL", llama.model)
    monkeypatch.setenv("ODA_LLM_FORCE", "intent")
    path = tmp_path / "set.yaml"
    path.write_text(SET)
    rows, _ = evaluate.evaluate("e2e", load_set(path), ["nsa", "sota1"], lake, tmp_path / "d")
    by: dict[str, Any] = {r.backend: r for r in rows}
    calls: dict[str, int] = {}
    for backend, row in by.items():
        assert row.run.token_source == "trace", backend
        calls[backend], tokens_in, tokens_out = _calls_in(Path(row.run.answer["trace"]))
        # each call of the trace in exactly one component: none lost, none counted twice
        assert (_sum(row.run.tokens, "input"), _sum(row.run.tokens, "output")) == (
            tokens_in, tokens_out), backend  # fmt: skip
        assert row.run.tokens["code"] == {"input": 0, "output": 0}  # the sandbox asks no model
    ours, baseline = by["nsa"].run.tokens, by["sota1"].run.tokens
    assert calls["nsa"] >= 1  # the forced stage asked the model
    assert ours["retrieval"]["input"] > 0 and ours["retrieval"]["output"] > 0
    assert baseline["retrieval"] == {"input": 0, "output": 0}  # SoTA#1 has no model
    for backend, row in by.items():
        # the coordinator's own ledger (its LLM client, not the trace) agrees on its share
        own = row.run.answer.get("tokens", {}).get("coordinator", {})
        assert row.run.tokens["coordinator"]["input"] == int(own.get("prompt_tokens", 0)), backend
        assert row.run.tokens["coordinator"]["output"] == int(
            own.get("completion_tokens", 0)), backend  # fmt: skip
