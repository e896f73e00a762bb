"""The 14 Appendix-A questions through the coordinator, with no model: status, oracle verdict,
charts, dispatches and seconds per question.

The coordinator talks to the in-process MCP servers (retriever on the `sample` lake, code agent
in a real sandbox); rows are compared with the independent Polars oracle
(``bench/devset/oracle.py``). The last line is ``coordinator: completed=<n>/14 oracle=<n>/14
charts=<n>/13 seconds=<total>``.

Usage: python bench/coordinator_eval.py [--lake DIR] [--data-dir DIR] [--only Q2,Q9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import retrieval_eval  # noqa: E402
from devset import oracle  # noqa: E402


def rule_coordinator(lake: Path, data: Path) -> Any:
    """The coordinator on ``lake`` with no model, its state and files under ``data``."""
    os.environ.update(ODA_LAKE=str(lake), ODA_DATA_DIR=str(data))
    os.environ.pop("ODA_LLM_BASE_URL", None)
    # imported once the environment names this lake and data dir (settings read it)
    from oda_analyst.analyst import build_coordinator  # noqa: PLC0415
    from oda_analyst.config import get_settings, load_settings  # noqa: PLC0415

    get_settings.cache_clear()
    return build_coordinator(load_settings())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--only", default=None)
    args = parser.parse_args(argv)
    lake = args.lake or retrieval_eval.sample_lake()
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="oda-coord-"))
    coordinator = rule_coordinator(lake, data)
    items = [i for i in retrieval_eval.load_items(devset=False)
             if not args.only or i.id in args.only.split(",")]  # fmt: skip
    table = oracle.jobs(lake)
    done = ok = charts = 0
    total = 0.0
    print(f"{'id':<4} {'status':<13} {'oracle':<6} {'charts':>6} {'dispatches':>10} {'s':>7}")
    for item in items:
        began = time.perf_counter()
        answer = asyncio.run(coordinator.ask(item.text, user="bench", as_of=item.as_of,
                                             out_dir=data / "out" / item.id))  # fmt: skip
        if answer.status == "clarification" and item.clarify:
            answer = asyncio.run(coordinator.clarify(answer.request_id, item.clarify, user="bench"))
        secs = time.perf_counter() - began
        verdict = retrieval_eval.check_answer(answer, item.expect, lake, table)
        pngs = [a for a in answer.artifacts if a.media_type == "image/png"]
        sent = sum(
            v for k, v in answer.dispatches.items() if not k.startswith(("failed.", "retry."))
        )
        done += answer.status == "completed"
        ok += verdict.ok
        charts += bool(pngs)
        total += secs
        mark = "pass" if verdict.ok else "FAIL"
        line = f"{item.id:<4} {answer.status:<13} {mark:<6} {len(pngs):>6} {sent:>10} {secs:7.1f}"
        print(f"{line}  {verdict.reason[:80]}", flush=True)
    n = len(items)
    drawable = n - ("Q1" in {i.id for i in items})  # Q1 asks for a number, not a chart
    print(f"coordinator: completed={done}/{n} oracle={ok}/{n} charts={charts}/{drawable} "
          f"seconds={total:.1f} out={data / 'out'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
