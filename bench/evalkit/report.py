"""The paper's tables from the classified runs, the JSON record and the comparison plot.

- Table I: per configuration, how many questions completed data retrieval, code execution, and
  both (counted whether right or wrong, as the paper does).
- Table II: per question and configuration, the class letter (C correct, H hallucinated,
  I incomplete, F failed, Q clarification), total tokens, the share of coordinator / retrieval /
  code tokens, the share of generated tokens, retries and latency.
- Table III: correct answers per configuration (the retrieval-level study), with every class.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.classify import CLASSES, LETTER, Verdict
from evalkit.runners import COMPONENTS, Run


@dataclass(frozen=True)
class Row:
    """One question through one configuration, classed."""

    id: str
    backend: str
    verdict: Verdict
    run: Run

    @property
    def retrieval_ok(self) -> bool:
        if self.run.retrieved is not None:  # a coordinator answer: its retrieve task's status
            return self.run.retrieved
        return self.run.answer.get("status") == "completed"

    @property
    def both_ok(self) -> bool:
        return self.retrieval_ok and bool(self.run.code_ok)

    def tokens_total(self) -> int:
        return sum(v["input"] + v["output"] for v in self.run.tokens.values())

    def explanation(self) -> tuple[str, str] | None:
        """(class, one-line reason) when this answer is not counted correct; None when it is.

        The reason is the verdict's (the oracle's diff for a wrong value, the refusal's,
        clarification's or failure's own message), else the answer's text; a question whose
        rows were right but whose code step made nothing is ``code-failed``, with the task's
        message: the summary line counts it not correct too."""
        if self.verdict.cls != "correct":
            text = self.verdict.reason or str(self.run.answer.get("answer") or "") or "no message"
            return self.verdict.cls, one_line(text)
        if self.run.code_ok is False:
            return "code-failed", one_line(f"rows right; {_code_failure(self.run.answer)}")
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "backend": self.backend,
            "class": self.verdict.cls,
            "reason": self.verdict.reason,
            "status": self.run.answer.get("status"),
            "data_retrieval": self.retrieval_ok,
            "code_execution": self.run.code_ok,
            "both": self.both_ok if self.run.code_ok is not None else None,
            "tokens": self.run.tokens,
            "token_source": self.run.token_source,
            "retries": self.run.retries,
            "dispatches": self.run.dispatches,
            "seconds": round(self.run.seconds, 3),
            "artifacts": self.run.artifacts,
            "answer": (self.run.answer.get("answer") or "")[:300],
            "tasks": [
                {k: str(t.get(k) or "")[:300] for k in ("name", "status", "detail")}
                for t in self.run.answer.get("tasks") or []
            ],
        }


def one_line(text: str, limit: int = 240) -> str:
    """``text`` on one line (whitespace runs folded), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _code_failure(answer: dict[str, Any]) -> str:
    """What the code step said when it made nothing: its first task that did not complete."""
    for task in answer.get("tasks") or []:
        name, status = str(task.get("name") or ""), str(task.get("status") or "")
        if status != "completed" and not name.startswith("retrieve"):
            detail = str(task.get("detail") or "").strip()
            return f"{name} {status}" + (f": {detail}" if detail else "")
    return f"status {answer.get('status')}, and no chart file was written"


def explanations(rows: Sequence[Row], backend: str) -> list[dict[str, str]]:
    """Every answer of ``backend`` not counted correct: id, class and one-line reason."""
    out = []
    for r in rows:
        found = r.explanation() if r.backend == backend else None
        if found is not None:
            out.append({"id": r.id, "class": found[0], "reason": found[1]})
    return out


def rows_from_json(record: dict[str, Any]) -> list[Row]:
    """The rows of a JSON record ``--json`` wrote (to merge runs made in parts)."""
    out = []
    for r in record["rows"]:
        answer = {"status": r["status"], "answer": r.get("answer", ""),
                  "tasks": list(r.get("tasks") or [])}  # fmt: skip
        run = Run(
            answer,
            float(r["seconds"]),
            int(r["dispatches"]),
            int(r["retries"]),
            r["tokens"],
            r["code_execution"],
            list(r.get("artifacts") or []),
            retrieved=r.get("data_retrieval") if r.get("code_execution") is not None else None,
            token_source=str(r.get("token_source") or "answer"),
        )
        out.append(Row(r["id"], r["backend"], Verdict(r["class"], r["reason"]), run))
    return out


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}" if whole else "    -"


def table_one(rows: Sequence[Row], backends: Sequence[str], model: str) -> str:
    out = [
        "TABLE I: end-to-end success (completed, right or wrong)",
        f"{'configuration':<14} {'LLM':<16} {'data retrieval':>15} {'code exec.':>11} {'both':>5}",
    ]
    for b in backends:
        mine = [r for r in rows if r.backend == b]
        code = [r for r in mine if r.run.code_ok]
        measured = any(r.run.code_ok is not None for r in mine)
        both = sum(r.both_ok for r in mine)
        out.append(
            f"{b:<14} {model:<16} {sum(r.retrieval_ok for r in mine):>15} "
            f"{len(code) if measured else '-':>11} {both if measured else '-':>5}"
        )
    return "\n".join(out)


def table_two(rows: Sequence[Row], backends: Sequence[str]) -> str:
    head = f"{'Q':<6}" + "".join(
        f" | {b:<6} {'St':<2} {'tokens':>8} {'Co%':>5} {'Da%':>5} {'Cd%':>5} {'Out%':>5} "
        f"{'Rt':>2} {'s':>6}"
        for b in backends
    )
    out = [
        "TABLE II: per question (C correct, H hallucinated, I incomplete, F failed, "
        "Q clarification)",
        head,
    ]
    ids = list(dict.fromkeys(r.id for r in rows))
    by = {(r.id, r.backend): r for r in rows}
    for qid in ids:
        line = f"{qid:<6}"
        for b in backends:
            r = by.get((qid, b))
            if r is None:
                line += f" | {b:<6} {'-':<2}" + " " * 42
                continue
            total = r.tokens_total()
            parts = {c: r.run.tokens.get(c, {"input": 0, "output": 0}) for c in COMPONENTS}
            share = [_pct(p["input"] + p["output"], total) for p in parts.values()]
            outs = _pct(sum(p["output"] for p in parts.values()), total)
            line += (
                f" | {b:<6} {LETTER[r.verdict.cls]:<2} {total:>8} {share[0]:>5} "
                f"{share[1]:>5} {share[2]:>5} {outs:>5} {r.run.retries:>2} "
                f"{r.run.seconds:>6.1f}"
            )
        out.append(line)
    return "\n".join(out)


def token_totals(rows: Sequence[Row], backends: Sequence[str]) -> str:
    """Tokens per component summed over the questions, and where they were read."""
    out = [
        "TOKENS per component (input+output, all questions; read from the trace where the "
        "request wrote one)",
        f"{'backend':<8} {'coordinator':>12} {'retrieval':>10} {'code':>8} {'total':>9} "
        f"{'from trace':>11}",
    ]
    for b in backends:
        mine = [r for r in rows if r.backend == b]
        sums = {
            c: sum(r.run.tokens.get(c, {}).get("input", 0) + r.run.tokens.get(c, {}).get(
                "output", 0) for r in mine)
            for c in COMPONENTS
        }  # fmt: skip
        traced = sum(r.run.token_source == "trace" for r in mine)
        out.append(
            f"{b:<8} {sums['coordinator']:>12} {sums['retrieval']:>10} {sums['code']:>8} "
            f"{sum(sums.values()):>9} {traced:>5}/{len(mine):<5}"
        )
    return "\n".join(out)


def table_three(rows: Sequence[Row], backends: Sequence[str]) -> str:
    out = [
        "TABLE III: correct answers per data-retrieval backend",
        f"{'backend':<8} {'correct':>9} "
        + " ".join(f"{c:>13}" for c in CLASSES[1:])
        + f" {'median s':>9}",
    ]
    for b in backends:
        mine = [r for r in rows if r.backend == b]
        n = len(mine)
        counts = {c: sum(r.verdict.cls == c for r in mine) for c in CLASSES}
        med = statistics.median([r.run.seconds for r in mine]) if mine else 0.0
        out.append(
            f"{b:<8} {counts['correct']:>4}/{n:<4} "
            + " ".join(f"{counts[c]:>13}" for c in CLASSES[1:])
            + f" {med:>9.2f}"
        )
    return "\n".join(out)


def failures(rows: Sequence[Row], backend: str) -> str:
    """Each answer not counted correct, one line each: id, class, reason."""
    bad = explanations(rows, backend)
    out = [f"{backend}: {len(bad)} not correct"]
    out += [f"  {e['id']:<6} {e['class']:<13} {e['reason']}" for e in bad]
    return "\n".join(out)


def summary_line(set_name: str, rows: Sequence[Row], backends: Sequence[str]) -> str:
    parts = [f"evaluate: set={set_name}"]
    for b in ("nsa", "sota1", "sota2"):
        mine = [r for r in rows if r.backend == b]
        correct = sum(r.verdict.cls == "correct" and (r.run.code_ok is not False) for r in mine)
        parts.append(f"{b}={correct}/{len(mine)}")
    halluc = sum(r.backend == "nsa" and r.verdict.cls == "hallucinated" for r in rows)
    parts.append(f"nsa_hallucinated={halluc}")
    return " ".join(parts)


def plot(rows: Sequence[Row], backends: Sequence[str], path: Path, title: str) -> Path:
    """One PNG: per backend, the answers of each class (stacked bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {
        "correct": "#2e7d32",
        "clarification": "#1565c0",
        "incomplete": "#f9a825",
        "failed": "#9e9e9e",
        "hallucinated": "#c62828",
    }
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=120)
    bottom = [0] * len(backends)
    for cls in ("correct", "clarification", "incomplete", "failed", "hallucinated"):
        counts = [sum(r.backend == b and r.verdict.cls == cls for r in rows) for b in backends]
        ax.bar(backends, counts, bottom=bottom, color=colours[cls], label=cls)
        for i, c in enumerate(counts):
            if c:
                ax.text(
                    i,
                    bottom[i] + c / 2,
                    str(c),
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="white",
                )
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.set_ylabel("questions")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
