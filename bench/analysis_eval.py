"""A blind analysis set through the coordinator, with no model: every answer judged as an
operator would judge it.

An item of the set (``bench/sets/analysis*.yaml``) names the analysis kind, the question, what
the retrieval must return (``expect``: an oracle spec of ``bench/devset/oracle.py``, or the
status a question that must be refused or asked about deserves), the charts the answer must draw
(``charts``), the figures its text must state (``figures``: value and tolerance) and, for a
comparison, the words naming the winner (``winner``). Every expected value was computed with
plain Polars by the set's writer; nothing here asks the product what is right.

An answer is **correct** when its status is the expected one and, for a completed answer, the
rows pass the oracle, every asked chart was drawn as the kind asked, every figure is stated and
the winner is named. A completed answer that fails any of these is **wrong-completed** (a wrong
number, or a chart or figure asked for and silently dropped: the one outcome the product must
never give). Anything else (refused, asked, failed where an answer was due) is **not answered**.

Usage: python bench/analysis_eval.py [--set bench/sets/analysis1.yaml] [--lake DIR]
       [--data-dir DIR] [--only A01,A02] [--json FILE]
The last line is ``analysis: correct=<n>/<total> wrong_completed=<n> not_answered=<n>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import retrieval_eval  # noqa: E402
from coordinator_eval import rule_coordinator  # noqa: E402
from devset import oracle  # noqa: E402

DEFAULT = REPO / "bench" / "sets" / "analysis1.yaml"
# A chart task's name says its kind in words ("chart: a histogram (…)"): the words of each kind.
_KIND_WORDS = {
    "line": ("line",),
    "histogram": ("histogram",),
    "box": ("box",),
    "bar": ("bar",),
    "pie": ("pie",),
    "heatmap": ("heatmap",),
    "dual_axis": ("dual-axis", "dual axis"),
    "scatter": ("scatter",),
}
_NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Outcome:
    id: str
    kind: str
    status: str
    verdict: str  # correct | wrong_completed | not_answered
    reason: str
    seconds: float


def numbers_in(text: str) -> list[float]:
    """Every number a text states ('2,520', '-0.83', '1.2e3'), as floats."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group().replace("−", "-")
        if "," in raw and not re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
            out += [float(p) for p in raw.split(",") if p and p != "-"]  # a list '12,13'
            continue
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def charts_drawn(answer: Any) -> list[str]:
    """The chart kinds of the answer's completed chart tasks that made an image."""
    if not any(a.media_type == "image/png" for a in answer.artifacts):
        return []
    kinds = []
    for task in answer.tasks:
        name = str(task.get("name", "")).lower()
        if not name.startswith("chart") or task.get("status") != "completed":
            continue
        head = name.split("(", 1)[0]
        for kind, words in _KIND_WORDS.items():
            if any(w in head for w in words):
                kinds.append(kind)
                break
    return kinds


def _expected_statuses(item: dict[str, Any]) -> set[str]:
    want = (item.get("expect") or {}).get("status", "completed")
    return set(want) if isinstance(want, list) else {str(want)}


def judge(item: dict[str, Any], answer: Any, lake: Path, table: Any,
          first: str | None = None) -> tuple[str, str]:  # fmt: skip
    """(verdict, reason) of one answer against its item. ``first``: the status of the first
    answer when a clarification was answered (an item whose ``expect`` is that clarification
    and that carries ``clarify`` is judged on the completed answer after it)."""
    wanted = _expected_statuses(item)
    if wanted == {"clarification"} and item.get("clarify") and first == "clarification":
        wanted = {"completed"}
        item = {**item, "expect": None}
    if "completed" not in wanted:
        if answer.status in wanted:
            return "correct", ""
        verdict = "wrong_completed" if answer.status == "completed" else "not_answered"
        return (
            verdict,
            f"status {answer.status}, expected {'/'.join(sorted(wanted))}: {answer.answer[:140]}",
        )
    if answer.status != "completed":
        return "not_answered", f"status {answer.status}: {answer.answer[:160]}"
    problems = []
    spec = item.get("expect")
    if spec and "status" not in spec:
        got = retrieval_eval.check_answer(answer, spec, lake, table)
        if not got.ok:
            problems.append(f"rows: {got.reason[:120]}")
    drawn = charts_drawn(answer)
    for kind in item.get("charts") or []:
        if kind in drawn:
            drawn.remove(kind)
        else:
            problems.append(f"no {kind} chart (drew {charts_drawn(answer) or 'none'})")
    text = answer.answer or ""
    stated = numbers_in(text)
    for fig in item.get("figures") or []:
        value, tol = float(fig["value"]), float(fig.get("tol", 0))
        if not any(abs(x - value) <= tol + 1e-9 for x in stated):
            problems.append(f"figure {fig.get('name')} = {value} (±{tol}) not stated")
    winner = item.get("winner")
    if winner and str(winner).lower() not in text.lower():
        problems.append(f"winner {winner!r} not named")
    if problems:
        return "wrong_completed", "; ".join(problems)
    return "correct", ""


def load(path: Path) -> tuple[list[dict[str, Any]], Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data["questions"]), oracle.utc(data["default_as_of"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=DEFAULT, dest="path")
    parser.add_argument("--lake", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--only", default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every outcome here")
    args = parser.parse_args(argv)
    lake = args.lake or retrieval_eval.sample_lake()
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="oda-analysis-"))
    coordinator = rule_coordinator(lake, data)
    items, default_as_of = load(args.path)
    if args.only:
        items = [i for i in items if i["id"] in args.only.split(",")]
    table = oracle.jobs(lake)
    outcomes: list[Outcome] = []
    print(f"{'id':<4} {'kind':<16} {'status':<13} {'verdict':<15} {'s':>6}  reason")
    for item in items:
        as_of = oracle.utc(item["as_of"]) if item.get("as_of") else default_as_of
        began = time.perf_counter()
        try:
            answer = asyncio.run(
                coordinator.ask(
                    item["text"], user="bench", as_of=as_of, out_dir=data / "out" / item["id"]
                )
            )
            first = answer.status
            if answer.status == "clarification" and item.get("clarify"):
                answer = asyncio.run(coordinator.clarify(answer.request_id, item["clarify"],
                                                         user="bench"))  # fmt: skip
            verdict, reason = judge(item, answer, lake, table, first)
            status = answer.status
        except Exception as exc:  # an evaluation reports every failure, it does not stop
            verdict, reason, status = "not_answered", f"{type(exc).__name__}: {exc}", "error"
        out = Outcome(item["id"], str(item.get("kind", "?")), status, verdict, reason,
                      time.perf_counter() - began)  # fmt: skip
        outcomes.append(out)
        print(f"{out.id:<4} {out.kind:<16} {out.status:<13} {out.verdict:<15} "
              f"{out.seconds:6.1f}  {out.reason[:150]}", flush=True)  # fmt: skip
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_kind[o.kind].append(o)
    print()
    for kind, group in sorted(by_kind.items()):
        good = sum(o.verdict == "correct" for o in group)
        wrong = sum(o.verdict == "wrong_completed" for o in group)
        print(f"  {kind:<16} correct={good}/{len(group)} wrong_completed={wrong}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    n = len(outcomes)
    good = sum(o.verdict == "correct" for o in outcomes)
    wrong = sum(o.verdict == "wrong_completed" for o in outcomes)
    print(f"analysis: correct={good}/{n} wrong_completed={wrong} not_answered={n - good - wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
