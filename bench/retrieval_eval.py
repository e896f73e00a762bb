"""Retrieval evaluation: the dev set and the paper's 14 questions through the Retriever (no model).

Every answer is compared with an independent Polars computation (``bench/devset/oracle.py``,
whose docstring states the comparison rules). Prints one line per question (id, category,
status, pass/fail, reason, seconds), the pass rate per category and overall; the last line is
``retrieval: passed=<n>/<total> rate=<fraction> paper=<n>/14``.

Usage: python bench/retrieval_eval.py [--lake DIR] [--data-dir DIR] [--only ID,ID] [--no-paper]
       [--questions FILE]
Without --lake the `sample` profile is generated once into a cache folder keyed by the hash of
the generator's sources (``sample_lake()``), and reused while they are unchanged.
With ODA_LLM_BASE_URL and ODA_LLM_MODEL set, every question runs through the model-backed paths;
``wrong_completed`` on the last line counts answers completed with a result the oracle refutes
(the one outcome a bad model must never cause).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from oda_analyst.config import load_settings
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.retriever.service import Retriever

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from devset import oracle  # noqa: E402

if TYPE_CHECKING:
    from oda_analyst.lake.synth.generate import ProgressEvent

DEVSET = REPO / "bench" / "devset" / "questions.yaml"
PAPER = REPO / "ontology" / "examples" / "paper_plans.yaml"
GENERATOR = REPO / "operator" / "oda_analyst" / "lake" / "synth"


# --- the cached sample lake -------------------------------------------------------------------


def generator_hash() -> str:
    """Hash of the generator's sources: the lake is regenerated when any of them changes."""
    h = hashlib.sha256()
    for f in sorted(GENERATOR.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get("ODA_E2E_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "oda-analyst" / "e2e"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # one generator at a time (parallel test sessions)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sample_lake(root: Path | None = None) -> Path:
    """The `sample` lake for the current generator: reused when present, else generated."""
    return profile_lake("sample", root)


def profile_lake(
    profile: str, root: Path | None = None, progress: Callable[[ProgressEvent], None] | None = None
) -> Path:
    """The lake of a generator profile for the current generator: reused, else generated."""
    base = root or cache_root()
    final = base / f"{profile}-{generator_hash()}"
    if final.is_dir():
        return final
    with _locked(base / f".{profile}.lock"):
        if final.is_dir():
            return final

        tmp = Path(tempfile.mkdtemp(prefix=f".{profile}-", dir=base))
        try:
            generate(build_spec(profile), tmp, progress)
            tmp.rename(final)  # atomic: a killed run never leaves a half lake behind
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# --- the questions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    text: str
    as_of: datetime
    expect: dict[str, Any]
    clarify: str | None = None


def load_items(*, paper: bool = True, devset: bool = True, questions: Path = DEVSET) -> list[Item]:
    data = yaml.safe_load(questions.read_text())
    default = oracle.utc(data["default_as_of"])
    items: list[Item] = []
    if paper:
        texts = {q["id"]: q["question"] for q in yaml.safe_load(PAPER.read_text())["questions"]}
        for qid, raw in yaml.safe_load(DEVSET.read_text())["paper"].items():
            spec = dict(raw)
            clarify = spec.pop("clarify", None)
            items.append(Item(qid, "paper", texts[qid], default, spec, clarify))
    if devset:
        for q in data["questions"]:
            as_of = oracle.utc(q["as_of"]) if "as_of" in q else default
            items.append(Item(q["id"], q["category"], q["text"], as_of, q["expect"],
                              q.get("clarify")))  # fmt: skip
    return items


# --- running and checking ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    id: str
    category: str
    status: str
    ok: bool
    reason: str
    seconds: float


def result_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """All rows of one answer result: inline, or read in full from its CSV file."""
    columns = list(result["columns"])
    if result.get("rows") is not None:
        return columns, [list(r) for r in result["rows"]]
    frame = pl.read_csv(result["csv"], infer_schema_length=None)
    return list(frame.columns), [list(r) for r in frame.rows()]


def _check_status(answer: Any, exp: dict[str, Any]) -> oracle.Verdict:
    want = exp["status"]
    if answer.status != want:
        return oracle.Verdict(False, f"status {answer.status} ({answer.answer[:120]}), "
                              f"expected {want}")  # fmt: skip
    if want == "clarification":
        clar = answer.clarification
        if exp.get("field") and clar.field != exp["field"]:
            return oracle.Verdict(False, f"asked about the {clar.field}, expected {exp['field']}")
        names = {str(c.get("metric")) for c in clar.candidates}
        names |= {str(m) for c in clar.candidates for m in c.get("members", [])}
        lacking = [c for c in exp.get("candidates_include", []) if c not in names]
        if lacking:
            return oracle.Verdict(False, f"candidates {sorted(names)[:8]} lack {lacking}")
    text = (answer.answer or "").lower()
    lacking = [m for m in exp.get("message_includes", []) if m.lower() not in text]
    if lacking:
        return oracle.Verdict(False, f"message {answer.answer[:160]!r} lacks {lacking}")
    return oracle.Verdict(True)


def _has_value(v: Any) -> bool:
    """A cell holds a value: not null, not NaN, not an empty string."""
    if isinstance(v, float) and math.isnan(v):
        return False
    return v is not None and v != ""


def _check_no_data(answer: Any) -> oracle.Verdict:
    """``{status: completed, no_data: true}``: completed, and no result row holds a value."""
    if answer.status != "completed":
        return oracle.Verdict(False, f"status {answer.status} ({answer.answer[:120]}), "
                              "expected completed with no data")  # fmt: skip
    for i, res in enumerate(answer.results):
        _, rows = result_rows(res)
        full = [r for r in rows if any(_has_value(v) for v in r)]
        if full:
            return oracle.Verdict(False, f"result {i + 1}: {len(full)} non-empty row(s), "
                                  f"expected none: {full[0][:6]}")  # fmt: skip
    return oracle.Verdict(True)


def check_answer(answer: Any, exp: dict[str, Any], lake: Path, table: pl.DataFrame
                 ) -> oracle.Verdict:  # fmt: skip
    """Compare an AnswerPayload with its expectation (status, no data, or each result's rows)."""
    if exp.get("no_data"):
        return _check_no_data(answer)
    if "status" in exp:
        return _check_status(answer, exp)
    if answer.status != "completed":
        return oracle.Verdict(False, f"status {answer.status}: {answer.answer[:200]}")
    specs = exp.get("results", [exp])
    if len(answer.results) != len(specs):
        return oracle.Verdict(False, f"{len(answer.results)} results, expected {len(specs)}")
    verdict = oracle.Verdict(True)
    for i, (raw, res) in enumerate(zip(specs, answer.results, strict=True)):
        spec = dict(raw)
        if spec.get("jobs") == "from_result_0":  # the jobs another result chose (Q9)
            cols, rows = result_rows(answer.results[0])
            spec["jobs"] = sorted({int(r[cols.index("job_id")]) for r in rows})
        cols, rows = result_rows(res)
        verdict = oracle.expected(spec, lake, table).check(cols, rows)
        if not verdict.ok:
            return oracle.Verdict(False, f"result {i + 1}: {verdict.reason}")
    return verdict


def run_item(retriever: Any, item: Item, lake: Path, table: pl.DataFrame) -> Outcome:
    began = time.perf_counter()
    try:
        answer = retriever.query(item.text, as_of=item.as_of)
        if item.clarify and answer.status == "clarification":
            answer = retriever.clarify(answer.request_id, item.clarify)
        verdict = check_answer(answer, item.expect, lake, table)
        status = answer.status
    except Exception as exc:  # an evaluation reports every failure, it does not stop
        verdict, status = oracle.Verdict(False, f"{type(exc).__name__}: {exc}"), "error"
    secs = time.perf_counter() - began
    return Outcome(item.id, item.category, status, verdict.ok, verdict.reason, secs)


def make_retriever(lake: Path, data_dir: Path) -> Any:
    return Retriever(load_settings(lake=str(lake), data_dir=data_dir))


# --- report -----------------------------------------------------------------------------------


def report(outcomes: Sequence[Outcome]) -> str:
    lines = [f"{'id':<5} {'category':<18} {'status':<13} {'ok':<4} {'s':>6}  reason"]
    for o in outcomes:
        lines.append(f"{o.id:<5} {o.category:<18} {o.status:<13} {'pass' if o.ok else 'FAIL':<4} "
                     f"{o.seconds:6.2f}  {o.reason[:160]}")  # fmt: skip
    lines.append("")
    cats: dict[str, list[Outcome]] = {}
    for o in outcomes:
        cats.setdefault(o.category, []).append(o)
    for cat, group in cats.items():
        n = sum(o.ok for o in group)
        secs = sum(o.seconds for o in group)
        lines.append(f"{cat:<18} {n:>3}/{len(group):<3} {n / len(group):.3f}  {secs:7.1f} s")
    dev = [o for o in outcomes if o.category != "paper"]
    paper = [o for o in outcomes if o.category == "paper"]
    passed = sum(o.ok for o in dev)
    rate = passed / len(dev) if dev else 0.0
    lines.append(f"total {sum(o.seconds for o in outcomes):.1f} s")
    wrong = sum(o.status == "completed" and not o.ok for o in outcomes)
    lines.append(f"retrieval: passed={passed}/{len(dev)} rate={rate:.3f} "
                 f"paper={sum(o.ok for o in paper)}/{len(paper) or 14} "
                 f"wrong_completed={wrong}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=None, help="a `sample` lake folder")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--only", default=None, help="comma-separated question ids")
    parser.add_argument("--no-paper", action="store_true", help="skip the 14 paper questions")
    parser.add_argument(
        "--questions",
        type=Path,
        default=DEVSET,
        help="a question file in the dev set's format (default: bench/devset/questions.yaml)",
    )
    args = parser.parse_args(argv)
    lake = args.lake or sample_lake()
    tmp = None if args.data_dir else Path(tempfile.mkdtemp(prefix="oda-eval-"))
    data_dir = args.data_dir or tmp
    assert data_dir is not None
    try:
        items = load_items(paper=not args.no_paper, questions=args.questions)
        if args.only:
            wanted = set(args.only.split(","))
            items = [i for i in items if i.id in wanted]
        table = oracle.jobs(lake)
        retriever = make_retriever(lake, data_dir)
        outcomes = []
        for item in items:
            outcome = run_item(retriever, item, lake, table)
            print(f"{outcome.id:<5} {'pass' if outcome.ok else 'FAIL'} {outcome.status:<13} "
                  f"{outcome.seconds:6.2f} s {outcome.reason[:100]}", file=sys.stderr,
                  flush=True)  # fmt: skip
            outcomes.append(outcome)
        print(report(outcomes))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
