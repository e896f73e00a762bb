"""Check a question set against the lake with the oracle alone (no product code runs).

For every question whose expectation is a result, the oracle computes it on the lake and the
check says whether it is meaningful: not empty, no null aggregate, a top-k with at least k
candidates, a threshold that some but not all entities cross. For a no-data question the
``empty_spec`` beside it (the same question as a result spec) must give no rows. Prints one line
per question, then counts by expected status and by kind; the last line is
``check_set: questions=<n> ok=<n> problems=<n>``.

Usage: python bench/sets/check_set.py [--lake DIR] [--questions FILE]
Without --lake the cached `sample` lake of the current generator is used (generated if absent).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from devset import oracle  # noqa: E402
from retrieval_eval import sample_lake  # noqa: E402

DEFAULT = REPO / "bench" / "sets" / "retrieval.yaml"
THRESHOLD_KINDS = frozenset({"where_list", "where_count", "nodes_where"})


def _expected_status(exp: dict[str, Any]) -> str:
    if exp.get("no_data"):
        return "completed (no data)"
    return str(exp.get("status", "completed"))


def _entities(spec: dict[str, Any], root: Path) -> tuple[int, int]:
    """(entities crossing the threshold, entities with readings in the window)."""
    start, end = oracle.utc(str(spec["window"][0])), oracle.utc(str(spec["window"][1]))
    nodes = None if spec.get("nodes", "all") == "all" else [int(n) for n in spec["nodes"]]
    df = oracle.readings(root, spec["metrics"], start, end, nodes)
    entity = spec.get("entity", "node")
    if entity == "rack":
        df = df.with_columns((pl.col("node") // oracle.RACK_SIZE).alias("rack"))
    total = df[entity].n_unique()
    crossing = oracle.expected({**spec, "kind": "where_list", "fns": []}, root, pl.DataFrame())
    return crossing.frame.height, total


def check_result(spec: dict[str, Any], root: Path, table: pl.DataFrame) -> tuple[bool, str]:
    """Is the oracle's answer to ``spec`` a meaningful expectation? (ok, what it holds)."""
    exp = oracle.expected(spec, root, table)
    frame = exp.frame
    if frame.height == 0:
        return False, "oracle gives no rows"
    nulls = [c for c in frame.columns if frame[c].null_count() == frame.height]
    if nulls:
        return False, f"column(s) {nulls} all null"
    note = f"{frame.height} row(s): {frame.row(0)}"[:110]
    if exp.top_k is not None and frame.height < exp.top_k:
        return False, f"top-{exp.top_k} has only {frame.height} candidates"
    if spec["kind"] in THRESHOLD_KINDS:
        crossing, total = _entities(spec, root)
        if not 0 < crossing < total:
            return False, f"threshold crossed by {crossing} of {total} entities"
        note = f"{crossing} of {total} cross; " + note
    counted = spec["kind"] in ("job_count", "job_distinct") or (
        spec["kind"] == "job_events" and spec.get("form") == "count"
    )
    if counted and int(frame.row(0)[0]) == 0:
        return False, "count is 0"
    return True, note


def check_item(q: dict[str, Any], root: Path, table: pl.DataFrame) -> tuple[bool, str]:
    exp = q["expect"]
    if exp.get("no_data"):
        spec = exp.get("empty_spec")
        if spec is None:
            return False, "no-data question without empty_spec"
        n = oracle.expected(spec, root, table).frame.height
        return n == 0, f"empty_spec gives {n} rows"
    if "status" in exp:
        return True, f"expects {exp['status']}" + (f" ({exp['field']})" if "field" in exp else "")
    results = exp.get("results", [exp])
    notes = []
    for spec in results:
        ok, note = check_result(spec, root, table)
        notes.append(note)
        if not ok:
            return False, note
    return True, " | ".join(notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=None)
    parser.add_argument("--questions", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    root = args.lake or sample_lake()
    data = yaml.safe_load(args.questions.read_text())
    table = oracle.jobs(root)
    questions = data["questions"]
    ids = [q["id"] for q in questions]
    dupes = sorted(i for i, n in Counter(ids).items() if n > 1)
    problems = [f"duplicate ids {dupes}"] if dupes else []
    for q in questions:
        ok, note = check_item(q, root, table)
        print(f"{q['id']:<5} {'ok' if ok else 'PROBLEM':<8} {q['category']:<18} {note}")
        if not ok:
            problems.append(q["id"])
    print()
    statuses = Counter(_expected_status(q["expect"]) for q in questions)
    kinds = Counter(
        spec["kind"]
        for q in questions
        if "kind" in q["expect"] or "results" in q["expect"]
        for spec in q["expect"].get("results", [q["expect"]])
    )
    cats = Counter(q["category"] for q in questions)
    print("by expected status:", dict(sorted(statuses.items())))
    print("by kind:", dict(sorted(kinds.items())))
    print("by category:", dict(cats))
    print(f"check_set: questions={len(questions)} ok={len(questions) - len(problems)} "
          f"problems={len(problems)}")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
