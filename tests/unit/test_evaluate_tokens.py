"""Tokens per component from a request's trace file, as bench/evaluate.py reads them.

The trace is written by the product's own tracing (``request_trace``, ``start_generation``),
with the span layout the coordinator produces: its request span, its own model calls, a
dispatch to the retriever whose request span holds the retrieval's model calls."""

from __future__ import annotations

import sys
from pathlib import Path

from oda_analyst.config import load_settings
from oda_analyst.observability.genai import start_generation
from oda_analyst.observability.tracing import request_trace, span

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from evalkit.runners import accounted
from evalkit.tracetokens import read_trace


def _call(stage: str, tokens_in: int, tokens_out: int, ok: bool = True) -> None:
    gen = start_generation(model="m", stage=stage, server="127.0.0.1", messages=[],
                           max_tokens=64, temperature=0.0, structured=True)  # fmt: skip
    gen.finish(input_tokens=tokens_in, output_tokens=tokens_out, latency_s=0.01, ok=ok)


def test_calls_are_billed_to_the_component_they_sit_under(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    with request_trace("coordinator request", settings=settings) as handle:
        _call("coordinator", 100, 10)
        with (
            span("dispatch retriever.query"),
            request_trace("retriever.query", settings=settings, observation="retriever"),
        ):
            _call("intent", 40, 4)
            _call("sparql", 30, 3, ok=False)  # a failed call: billed, and counted
        with span("task chart line"), span("dispatch codeagent.execute"):
            _call("code", 7, 1)
    found = read_trace(handle.path)
    assert found is not None
    assert found.tokens == {
        "coordinator": {"input": 100, "output": 10},
        "retrieval": {"input": 70, "output": 7},
        "code": {"input": 7, "output": 1},
    }
    assert found.calls == {"coordinator": 1, "retrieval": 2, "code": 1}
    assert found.failed_calls == 1
    tokens, failed, source = accounted({"trace": str(handle.path), "tokens": {}})
    assert (tokens, failed, source) == (found.tokens, 1, "trace")


def test_without_a_trace_file_the_answer_s_own_accounting_is_used(tmp_path: Path) -> None:
    answer = {
        "trace": str(tmp_path / "missing.json"),
        "tokens": {"coordinator": {"prompt_tokens": 5, "completion_tokens": 1},
                   "intent": {"prompt_tokens": 9, "completion_tokens": 2, "failed_calls": 1}},
    }  # fmt: skip
    tokens, failed, source = accounted(answer)
    assert source == "answer" and failed == 1
    assert tokens["coordinator"] == {"input": 5, "output": 1}
    assert tokens["retrieval"] == {"input": 9, "output": 2}
