"""The rule planner: a request becomes an ordered task list (retrieve, then chart/report), or a
clarification — never a guess.

The request shapes of the paper's Appendix A:

- "retrieve/get/fetch … and plot/create/compare … <chart>"   (Q2–Q6, Q10–Q14)
- "compute … and create a <chart>"                           (Q7, Q8)
- "for the top-3 … retrieve …, create a <chart>, and report min/max/avg …"   (Q9)
- a retrieval alone ("how many nodes are there in M100?", Q1)

The analysis part is found as the retriever finds it: a clause that starts with an analysis verb
right after "and", "," or "then". Each clause is a chart (the first chart kind of
``ontology/analysis.yaml`` whose phrase it holds), a report of statistics (which the retriever
computes, so it is presented, not recomputed) or, when it names neither, a clarification that
asks which chart is meant.

The retrieval task gets the whole request: the retriever reads its analysis part as such and
accounts for every other word. Should it refuse a word of the analysis part, the refined request
(``Decomposition.refined``) is the request without its chart clauses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from oda_analyst.coordinator.vocabulary import CHART_KINDS, CHART_NAMES, ChartKind, Vocabulary

_BOUNDARY = re.compile(
    r"(?:,|;|\band\b|\bthen\b)\s*(?:and\s+|then\s+|also\s+)*(?P<verb>[a-z][a-z-]*)"
)
_WORD = re.compile(r"[a-z0-9][a-z0-9/'-]*")
_LEAD_CHART_VERBS = frozenset({"plot", "chart", "graph", "draw", "visualise", "visualize"})


@dataclass(frozen=True)
class ChartTask:
    """Draw one chart of the retrieved data."""

    kind: ChartKind
    clause: str


@dataclass(frozen=True)
class Decomposition:
    """The ordered tasks of a request: one retrieval, then its charts and reports."""

    question: str
    retrieval: str
    refined: str
    charts: tuple[ChartTask, ...] = ()
    reports: tuple[str, ...] = ()

    @property
    def tasks(self) -> list[str]:
        """The task list in plain words, in order (what progress and the answer show)."""
        out = [f"retrieve: {self.retrieval}"]
        out += [f"chart: {CHART_NAMES[c.kind]} ({c.clause})" for c in self.charts]
        out += [f"report: {r}" for r in self.reports]
        return out


@dataclass(frozen=True)
class Unclear:
    """A request the planner cannot decompose: what to ask, and the choices."""

    question: str
    message: str
    clause: str
    candidates: list[dict[str, str]] = field(default_factory=list)
    field: str = "analysis"


def _has_content_before(text: str, end: int) -> bool:
    return bool(_WORD.search(text[:end]))


def _analysis_starts(lower: str, vocab: Vocabulary) -> list[tuple[int, int]]:
    """(boundary start, verb start) of every clause that opens with an analysis verb."""
    out = []
    for m in _BOUNDARY.finditer(lower):
        if m["verb"] in vocab.verbs and _has_content_before(lower, m.start()):
            out.append((m.start(), m.start("verb")))
    return out


def chart_kind(clause: str, vocab: Vocabulary) -> ChartKind | None:
    """The chart a clause names: the first kind (in the vocabulary's order) with a phrase in it."""
    text = " " + " ".join(_WORD.findall(clause.lower())) + " "
    for kind, phrases in vocab.charts:
        for phrase in phrases:
            if f" {' '.join(_WORD.findall(phrase))} " in text:
                return kind
    return None


def _is_report(clause: str, vocab: Vocabulary) -> bool:
    words = set(_WORD.findall(clause.lower()))
    words |= {part for w in words for part in w.split("/")}
    return bool(words & vocab.reports)


def _choices() -> list[dict[str, str]]:
    return [{"text": kind, "description": CHART_NAMES[kind]} for kind in CHART_KINDS]


def decompose(question: str, vocab: Vocabulary) -> Decomposition | Unclear:
    """The task list of ``question``, or what to ask when a clause names no chart we draw."""
    text = " ".join(question.split())
    lower = text.lower()
    starts = _analysis_starts(lower, vocab)
    clauses = []
    for i, (_, verb_at) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        clauses.append(text[verb_at:end].strip(" ,;.?!"))
    charts: list[ChartTask] = []
    reports: list[str] = []
    for clause in clauses:
        kind = chart_kind(clause, vocab)
        if kind is not None:
            charts.append(ChartTask(kind, clause))
        elif _is_report(clause, vocab):
            reports.append(clause)
        else:
            return Unclear(
                question=text,
                clause=clause,
                message=f"which chart do you want for '{clause}'? I can draw "
                + ", ".join(CHART_NAMES[k] for k in CHART_KINDS),
                candidates=_choices(),
            )
    first = lower.split(" ", 1)[0]
    if not starts and first in _LEAD_CHART_VERBS:
        # 'Plot the total power of node 900 …': the request is the chart itself.
        kind = chart_kind(text.split(" of ", 1)[0], vocab)
        if kind is None:
            return Unclear(
                question=text,
                clause=text.split(" of ", 1)[0],
                message="which chart do you want? I can draw "
                + ", ".join(CHART_NAMES[k] for k in CHART_KINDS),
                candidates=_choices(),
            )
        return Decomposition(text, text, text, (ChartTask(kind, text.split(" of ", 1)[0]),))
    refined = text
    for chart in charts:
        refined = refined.replace(chart.clause, "")
    refined = re.sub(r"\s*(?:,\s*)+(?:and\s*)?(?=[,.?!]|$)", "", refined)
    refined = re.sub(r"\s+(?:and|then)\s*(?=[,.?!]|$)", "", refined)
    refined = " ".join(refined.split()).strip(" ,;")
    return Decomposition(
        question=text,
        retrieval=text,
        refined=refined or text,
        charts=tuple(charts),
        reports=tuple(reports),
    )


def resolve(unclear: Unclear, answer: str, vocab: Vocabulary) -> Decomposition | Unclear:
    """The request again, with the clause that named no chart replaced by the chart the user
    chose ('histogram', 'a bar chart', '2' for the second choice); still Unclear when the answer
    names none either."""
    choice = answer.strip().lower()
    kind: ChartKind | None
    if choice.isdigit() and 1 <= int(choice) <= len(CHART_KINDS):
        kind = CHART_KINDS[int(choice) - 1]
    elif choice.replace(" ", "_") in CHART_KINDS:
        kind = choice.replace(" ", "_")  # type: ignore[assignment]
    else:
        kind = chart_kind(choice, vocab)
    if kind is None:
        return Unclear(
            question=unclear.question,
            clause=unclear.clause,
            message=f"'{answer}' names no chart I can draw; choose one of "
            + ", ".join(CHART_KINDS),
            candidates=_choices(),
        )
    phrase = vocab.charts[[k for k, _ in vocab.charts].index(kind)][1][0]
    replaced = unclear.question.replace(unclear.clause, f"{unclear.clause} as a {phrase}", 1)
    return decompose(replaced, vocab)
