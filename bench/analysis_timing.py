"""How much an analysis costs on top of its retrieval: each question answered warm in full
(retrieval, recipe in the sandbox, chart) and as its retrieval alone (the question's own
retrieval words, which the reader keeps apart from the analysis words), through the same rule
coordinator with no model, in one run.

Usage: python bench/analysis_timing.py [--lake DIR] [--repeat 3]
Prints one line per question (median seconds of each, and their ratio), then
``analysis_timing: median ratio=<r> worst=<r> (goal <= 2)``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import retrieval_eval  # noqa: E402
from coordinator_eval import rule_coordinator  # noqa: E402

AS_OF = datetime(2022, 7, 1, tzinfo=UTC)
QUESTIONS = (
    "line graph of node 230's node power from 8 till noon jun 1, min avg max pls",
    "p90 pcie temp over every node 8 to half 8 jun 1, plus a histogram",
    "node 77 inlet between 10 and 12 jun 1: any readings more than 2 sigma off its own mean? "
    "line chart with them marked",
    "energy used by the nodes of rack 7 on jun 1 in kWh, hourly bar chart",
    "hour of day profile of outdoor temp across june, line chart",
    "scatter gpu 2 util vs gpu 2 power on node 231, 9-12 jun 1, how correlated are they",
)


def _timed(coordinator: Any, question: str, out: Path) -> tuple[float, str]:
    began = time.perf_counter()
    answer = asyncio.run(coordinator.ask(question, user="bench", as_of=AS_OF, out_dir=out))
    return time.perf_counter() - began, str(answer.status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="oda-timing-"))
    coordinator = rule_coordinator(args.lake or retrieval_eval.sample_lake(), data)
    from oda_analyst.reading.read import read  # noqa: PLC0415  (after the settings are set)

    ratios = []
    print(f"{'full s':>7} {'retrieval s':>11} {'ratio':>6}  question")
    for n, question in enumerate(QUESTIONS):
        said = read(question, AS_OF).retrieval
        assert said is not None
        alone = said.text
        full_times, alone_times = [], []
        for k in range(args.repeat + 1):  # the first of each is the warm-up
            t_full, status = _timed(coordinator, question, data / f"q{n}-{k}")
            t_alone, status_alone = _timed(coordinator, alone, data / f"r{n}-{k}")
            if status != "completed" or status_alone != "completed":
                print(f"  skipped ({status}, retrieval alone {status_alone}): {question}")
                break
            if k:
                full_times.append(t_full)
                alone_times.append(t_alone)
        if not full_times:
            continue
        full, part = statistics.median(full_times), statistics.median(alone_times)
        ratios.append(full / part)
        print(f"{full:7.2f} {part:11.2f} {full / part:6.2f}  {question}")
    if not ratios:
        print("analysis_timing: no question completed")
        return 1
    print(f"analysis_timing: median ratio={statistics.median(ratios):.2f} "
          f"worst={max(ratios):.2f} (goal <= 2)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
