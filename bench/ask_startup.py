"""A one-shot `oda-analyst ask`: its wall time against the work its answer reports (goal: <= 2x).

Runs `oda-analyst ask QUESTION --json --quiet` as a new process for the first N retrieval
questions of the dev set (the `sample` lake, no model) and compares each wall time with the sum
of the answer's own `timings` (understanding, graph and query, the coordinator). What is left is
the process's start-up: imports, the catalogue, spaCy, the embedding model. `oda-analyst --help`
is timed apart (goal: < 0.5 s).

Usage: python bench/ask_startup.py [--lake DIR] [-n N]
The last line is ``ask_startup: questions=<n> median_ratio=<x> worst_ratio=<x> median_wall_s=<x>
median_work_s=<x> help_s=<x>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from retrieval_eval import sample_lake  # noqa: E402


def _questions(n: int) -> list[tuple[str, str | None]]:
    data = yaml.safe_load((REPO / "bench/devset/questions.yaml").read_text(encoding="utf-8"))
    out = []
    for q in data.get("questions") or []:
        expect = q.get("expect") or {}
        if isinstance(expect, dict) and expect.get("status", "completed") == "completed":
            out.append((str(q["text"]), q.get("as_of")))
        if len(out) == n:
            break
    return out


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lake", type=Path, default=None)
    parser.add_argument("-n", type=int, default=8)
    args = parser.parse_args()
    lake = args.lake or sample_lake()
    env = {**os.environ, "ODA_LAKE": str(lake), "HF_HUB_OFFLINE": "1"}
    exe = [sys.executable, "-m", "oda_analyst.cli"]
    help_s, _ = _timed([*exe, "--help"], env)
    ratios, walls, works = [], [], []
    for text, as_of in _questions(args.n):
        extra = ["--as-of", str(as_of)] if as_of else []
        wall, out = _timed([*exe, "ask", text, "--json", "--quiet", *extra], env)
        try:
            timings = json.loads(out).get("timings") or {}
        except json.JSONDecodeError:
            print(f"not an answer: {text!r}", file=sys.stderr)
            continue
        work = sum(float(v) for v in timings.values())
        ratios.append(wall / work if work else float("inf"))
        walls.append(wall)
        works.append(work)
        print(f"{wall:6.2f} s wall {work:6.2f} s work  x{wall / max(work, 1e-9):5.1f}  {text[:60]}")
    if not ratios:
        print("ask_startup: questions=0")
        return 1
    print(
        f"ask_startup: questions={len(ratios)} median_ratio={statistics.median(ratios):.1f} "
        f"worst_ratio={max(ratios):.1f} median_wall_s={statistics.median(walls):.2f} "
        f"median_work_s={statistics.median(works):.2f} help_s={help_s:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
