"""The model-path benchmark's bookkeeping: its JSON lines read back into the per-set tables, and
the prompt-cache arithmetic of bench/prompt_prefix.py (no server, no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import model_paths  # noqa: E402
import prompt_prefix  # noqa: E402


def run_line(qid: str, outcome: str, tokens: int, *, set_name: str = "heldout",
             force: str = "sparql", reason: str = "") -> str:  # fmt: skip
    return json.dumps({
        "id": qid, "outcome": outcome, "reason": reason, "seconds": 1.0,
        "tokens": {"sparql": {"calls": 1, "prompt_tokens": tokens - 10, "completion_tokens": 10,
                              "total_tokens": tokens}},
        "warnings": [], "set": set_name, "force": force,
    })  # fmt: skip


def test_the_last_line_of_a_question_wins(tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    out.write_text("\n".join([
        run_line("H1", "wrong-completed", 100, reason="max where avg was asked"),
        run_line("H2", "failed", 300),
        run_line("H1", "failed", 200),  # H1 again, after the fix
        run_line("H1", "correct", 50, force="default"),
    ]) + "\n")  # fmt: skip
    runs = model_paths.read_runs(out)
    assert sorted((r.id, r.force, r.outcome) for r in runs) == [
        ("H1", "default", "correct"), ("H1", "sparql", "failed"), ("H2", "sparql", "failed"),
    ]  # fmt: skip
    assert model_paths.last_line(runs).startswith("model: questions=3 wrong_completed=0 ")


def test_the_runs_table_counts_outcomes_and_tokens_per_set_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.jsonl"
    out.write_text("\n".join([
        run_line("H1", "correct", 100), run_line("H2", "failed", 300),
        run_line("H3", "wrong-completed", 500, reason="max where avg was asked"),
    ]) + "\n")  # fmt: skip
    assert model_paths.report(out) == 0
    printed = capsys.readouterr().out.splitlines()
    row = next(line for line in printed if line.split()[:3] == ["heldout", "sparql", "3"])
    # n, correct, repaired, clarified, rejected, failed, wrong, expected, by model, unasked,
    # tok med, p90
    assert row.split()[2:] == ["3", "1", "0", "0", "0", "1", "1", "1", "1", "0", "300", "500"]
    assert any("H3" in line and "max where avg" in line for line in printed)
    assert printed[-1].startswith("model: questions=3 wrong_completed=1 tokens_median=300 ")


def test_an_expected_clarification_or_refusal_counts_as_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.jsonl"
    lines = [
        run_line("H1", "clarified", 100),  # an old line: no verdict kept, no reason
        run_line("H2", "clarified", 100, reason="asked about the metric, expected time"),
        run_line("H3", "rejected", 100, reason="status rejected, expected completed"),
        json.dumps({**json.loads(run_line("H4", "rejected", 100)), "ok": True}),
        json.dumps({**json.loads(run_line("H5", "correct", 100)), "ok": False}),
    ]
    out.write_text("\n".join(lines) + "\n")
    assert model_paths.report(out) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.split()[:3] == ["heldout", "sparql", "5"])  # fmt: skip
    assert row.split()[9] == "2"  # H1 and H4


def test_every_set_the_issue_names_can_be_run() -> None:
    assert {"paper", "dev", "heldout", "heldout2", "heldout3", "blind4", "retrieval",
            "blind6"} <= set(model_paths.SETS)  # fmt: skip
    assert all(path is None or path.is_file() for path in model_paths.SETS.values())


def test_a_kept_prompt_saves_its_shared_prefix() -> None:
    rules = list(range(100))
    a, b, c = [*rules, 1000, 1001], [*rules, 2000], [*rules[:50], 3000]
    # Only the previous prompt: b shares 100 with a, c 50 with b; a is evaluated whole.
    # Kept prompts: the same here, since every prompt's best partner is its predecessor.
    assert prompt_prefix.evaluated([a, b, c], states=4) == (102 + 1 + 1, 102 + 1 + 1)
    # A prompt that returns after another stage's: only the kept states still know it.
    other = [7] * 30
    last, ram = prompt_prefix.evaluated([a, other, b], states=4)
    assert (last, ram) == (102 + 30 + 101, 102 + 30 + 1)
    # With room for one state only, the kept cache is the previous prompt's.
    assert prompt_prefix.evaluated([a, other, b], states=1) == (last, last)


def test_server_figures_read_llama_cpp_log_lines(tmp_path: Path) -> None:
    # The lines llama-cpp-python 0.3's server writes per call (verbose), two calls.
    log = tmp_path / "llama.log"
    log.write_text(
        "Llama._create_completion: cache miss\n"
        "llama_perf_context_print: prompt eval time =    2000.00 ms /   200 tokens (x)\n"
        "llama_perf_context_print:        eval time =    1000.00 ms /    30 runs   (x)\n"
        "llama_perf_context_print:       total time =    3500.00 ms /   230 tokens\n"
        "Llama.generate: 180 prefix-match hit, remaining 20 prompt tokens to eval\n"
        "llama_perf_context_print: prompt eval time =     500.00 ms /    20 tokens (x)\n"
        "llama_perf_context_print:        eval time =    1000.00 ms /    30 runs   (x)\n"
        "llama_perf_context_print:       total time =    1600.00 ms /    50 tokens\n"
    )
    assert model_paths.server_figures(log) == (
        "server: calls=2 prompt_reused=180 prompt_evaluated=220 prompt_tok_s=88.0 "
        "generated=60 gen_tok_s=30.0 seconds=5"
    )
