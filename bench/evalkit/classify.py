"""How an answer is classed, as the paper's Table II does, against an independent oracle.

Classes (``CLASSES``):

- ``correct``: the answer is what the question asked — every expected result equals the oracle
  (``bench/devset/oracle.py``'s comparison rules), or the expected refusal / clarification / "no
  data" was given.
- ``hallucinated``: an answer that is wrong — it completed with rows the oracle refutes (a wrong
  value, a row that should not be there, another entity or window), or it completed with numbers
  where the right answer is a refusal or no data. The one class our analyst must never produce.
- ``incomplete``: it completed with part of the answer and nothing false — fewer results than
  asked, rows cut short (no CSV export), rows or value columns missing while every row given is
  right. Rows lacking a key column (which node, metric, day ...) are not a part of the answer:
  one unlabelled count for "jobs each day" is hallucinated, not incomplete.
- ``failed``: it stopped without an answer (rejected, failed, an error), or asked nothing when
  a clarification was expected.
- ``clarification``: it asked a question back where an answer was expected (its own class: not
  a wrong answer, not an answer either).

A result may also match in one of the product's documented equivalent forms, which the oracle's
expectations carry (hourly means as a series, per GPU instead of per GPU metric, a job's nodes
one per row): the same numbers, correct.

Answers are plain dicts in the ``ask --json`` shape (any backend); rows beyond the row limit are
read in full from the CSV file the answer names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from devset import oracle

CLASSES = ("correct", "hallucinated", "incomplete", "failed", "clarification")
# Columns that say which entity, metric or time a row is about (the rest are values).
KEY_COLS = frozenset(
    {"node", "metric", "ts", "hour", "day", "job", "user", "rack", "gpu", "start", "end"}
)
LETTER = {
    "correct": "C",
    "hallucinated": "H",
    "incomplete": "I",
    "failed": "F",
    "clarification": "Q",
}


@dataclass(frozen=True)
class Verdict:
    cls: str
    reason: str = ""


def result_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """All rows of one answer result: inline, or read in full from its CSV file."""
    columns = list(result["columns"])
    if result.get("rows") is not None:
        return columns, [list(r) for r in result["rows"]]
    frame = pl.read_csv(result["csv"], infer_schema_length=None)
    return list(frame.columns), [list(r) for r in frame.rows()]


def _has_value(v: Any) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return False
    return v is not None and v != ""


def _non_empty(answer: dict[str, Any]) -> int:
    """How many result rows hold a value (all-null rows count as empty)."""
    n = 0
    for res in answer.get("results") or []:
        _, rows = result_rows(res)
        n += sum(1 for r in rows if any(_has_value(v) for v in r))
    return n


def _subset(exp: oracle.Expectation, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> bool:
    """Every answer row is an oracle row (on the columns both hold), and something is missing."""
    cols = [c for c in exp.frame.columns if exp.mapping.get(c, c) in columns]
    keys = [c for c in exp.frame.columns if c in KEY_COLS]
    if not cols or any(c not in cols for c in keys):
        return False  # rows that do not say whose or when they are cannot be a part of it
    idx = [list(columns).index(exp.mapping.get(c, c)) for c in cols]
    try:
        got = oracle.normalise(cols, ([r[i] for i in idx] for r in rows))
    except (TypeError, ValueError):
        return False
    want = Counter(oracle.normalise(cols, exp.frame.select(cols).rows()))
    if not got:
        return False  # no rows say nothing true about the question: not a part of it
    for row in got:
        match = next(
            (
                w
                for w in want
                if want[w] > 0 and all(oracle._close(a, b) for a, b in zip(row, w, strict=True))
            ),
            None,
        )
        if match is None:
            return False
        want[match] -= 1
    return len(cols) < len(exp.frame.columns) or sum(want.values()) > 0


def _part(i: int, exp: oracle.Expectation, columns: Sequence[str], rows: Sequence[Any],
          truncated: bool) -> str:  # fmt: skip
    """What result ``i`` (right as far as it goes) lacks, in a few words."""
    lacking = [c for c in exp.frame.columns if exp.mapping.get(c, c) not in columns]
    what = f"{len(rows)} of {exp.frame.height} rows"
    if truncated:
        what += " (cut short inline, no CSV)"
    if lacking:
        what += f", no {', '.join(lacking)}"
    return f"result {i + 1}: {what}"


def _check_status(answer: dict[str, Any], exp: dict[str, Any]) -> Verdict:
    """An expected refusal or clarification (the dev set's ``status`` expectations)."""
    want, got = exp["status"], answer.get("status")
    if got == want:
        if want == "clarification":
            clar = answer.get("clarification") or {}
            if exp.get("field") and clar.get("field") != exp["field"]:
                return Verdict("failed", f"asked about {clar.get('field')}, not {exp['field']}")
            names = {str(c.get("metric")) for c in clar.get("candidates", [])}
            names |= {str(m) for c in clar.get("candidates", []) for m in c.get("members", [])}
            lacking = [c for c in exp.get("candidates_include", []) if c not in names]
            if lacking:
                return Verdict("failed", f"candidates lack {lacking}")
        text = (answer.get("answer") or "").lower()
        lacking = [m for m in exp.get("message_includes", []) if m.lower() not in text]
        if lacking:
            return Verdict("failed", f"message lacks {lacking}")
        return Verdict("correct")
    if got == "completed" and _non_empty(answer):
        return Verdict("hallucinated", f"answered with rows where {want} was right")
    if got == "clarification":
        return Verdict("clarification", "asked back where a refusal was right")
    return Verdict("failed", f"status {got}, expected {want}: {(answer.get('answer') or '')[:120]}")


def classify(
    answer: dict[str, Any], exp: dict[str, Any], lake: Path, table: pl.DataFrame
) -> Verdict:
    """The class of one final answer (after any clarification the harness answered)."""
    status = answer.get("status")
    if exp.get("no_data"):
        if status != "completed":
            return Verdict("failed", f"status {status}, expected completed with no data")
        n = _non_empty(answer)
        return (
            Verdict("correct")
            if n == 0
            else Verdict("hallucinated", f"{n} row(s) with values where the lake holds no data")
        )
    if "status" in exp:
        return _check_status(answer, exp)
    if status == "clarification":
        return Verdict("clarification", (answer.get("answer") or "")[:160])
    if status != "completed":
        return Verdict("failed", f"{status}: {(answer.get('answer') or '')[:200]}")
    specs = exp.get("results", [exp])
    results = answer.get("results") or []
    partial = len(results) < len(specs)
    parts = [f"{len(results)} of {len(specs)} results"] if partial else []
    if len(results) > len(specs):
        return Verdict("hallucinated", f"{len(results)} results, expected {len(specs)}")
    for i, (raw, res) in enumerate(zip(specs, results, strict=False)):
        spec = dict(raw)
        if spec.get("jobs") == "from_result_0":  # the jobs another result chose (Q9)
            cols0, rows0 = result_rows(results[0])
            if "job_id" not in cols0:
                return Verdict("hallucinated", "result 1 names no jobs")
            spec["jobs"] = sorted({int(r[cols0.index("job_id")]) for r in rows0})
        cols, rows = result_rows(res)
        exp_i = oracle.expected(spec, lake, table)
        verdict = exp_i.check(cols, rows)
        if verdict.ok:
            continue
        if res.get("truncated") and res.get("rows") is not None and _subset(exp_i, cols, rows):
            partial = True
            parts.append(_part(i, exp_i, cols, rows, truncated=True))
            continue
        if exp_i.top_k is None and _subset(exp_i, cols, rows):
            partial = True
            parts.append(_part(i, exp_i, cols, rows, truncated=False))
            continue
        return Verdict("hallucinated", f"result {i + 1}: {verdict.reason}"[:300])
    if partial:
        return Verdict("incomplete", "; ".join(parts)[:300])
    return Verdict("correct")
