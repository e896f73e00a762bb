"""How long the reader takes per question, over every question set (goal: median <= 20 ms).

Loads spaCy and the vocabularies once (that start-up is printed apart), then reads every
question of ``bench/sets/*.yaml`` and ``bench/devset/*.yaml`` once, timing each call.

Usage: python bench/reading_speed.py
The last line is ``reading: questions=<n> median_ms=<x> p90_ms=<x> max_ms=<x> startup_s=<x>``.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def questions() -> list[str]:
    out = []
    for path in sorted([*REPO.glob("bench/sets/*.yaml"), *REPO.glob("bench/devset/*.yaml")]):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for q in data.get("questions") or []:
            text = q.get("text") or q.get("question") if isinstance(q, dict) else None
            if isinstance(text, str):
                out.append(text)
    return out


def main() -> int:
    as_of = datetime(2022, 6, 15, 12, tzinfo=UTC)
    began = time.perf_counter()
    from oda_analyst.reading.read import read  # noqa: PLC0415

    read("warm up: power of node 1 on 1 June 2022", as_of)
    startup = time.perf_counter() - began
    times = []
    texts = questions()
    for text in texts:
        t0 = time.perf_counter()
        read(text, as_of)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p90 = times[int(0.9 * (len(times) - 1))]
    print(f"reading: questions={len(texts)} median_ms={statistics.median(times):.2f} "
          f"p90_ms={p90:.2f} max_ms={times[-1]:.2f} startup_s={startup:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
