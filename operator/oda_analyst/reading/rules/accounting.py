"""Full accounting of a question: every content word and every number is claimed, or we ask.

After stage 1 has grounded the metrics and built its plans, each token of the question must be
claimed by something that was used: an entity, a time phrase, a job state or a unit note (their
character spans), a grounded metric phrase, a number the plans carry (a threshold, a limit, a
count filter), or a word of the lexicon (``ontology/lexicon.yaml``: the cue words the rules read
and the filler they may skip). A word or number left over means part of the question would be
silently dropped, so the request does not complete: it asks, quoting the words it could not use.

Cue words of the answer's form are checked against the plans too (``form_conflicts``): "which
nodes" must give nodes, "how many users" a count of users, "who" the users — a plan that answers
another form is refused, never run.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.ontology.plan import JobFilter, QueryPlan
from oda_analyst.reading.rules.cues import PARTITION_ALIASES
from oda_analyst.reading.rules.decompose import DROP_AFTER

_TOKEN = re.compile(r"\d+(?:[.,]\d+)?(?=st\b|nd\b|rd\b|th\b)|\d+(?:[.,]\d+)?|[^\W\d_][\w'’]*")
LEXICON_FILE = "lexicon.yaml"


@dataclass(frozen=True)
class Lexicon:
    """Words by role (filler, statistic, grouping, ranking, form, job, cue, unit)."""

    roles: dict[str, frozenset[str]]
    claims: dict[str, frozenset[str]] = field(default_factory=dict)
    """Words a plan claims when it derives a quantity ('job_duration': 'run times') or selects
    jobs by an event ('event:submitted': 'submissions'); lexicon.yaml's ``claims``."""

    @functools.cached_property
    def words(self) -> frozenset[str]:
        return frozenset().union(*self.roles.values())

    def role(self, word: str) -> str | None:
        return next((r for r, ws in self.roles.items() if word in ws), None)


def load_lexicon(path: Path | None = None) -> Lexicon:
    """The lexicon beside the metric catalogue (``ODA_ONTOLOGY_DIR``)."""
    where = path or get_settings().ontology_dir / LEXICON_FILE
    return _load(where)


@functools.cache
def _load(path: Path) -> Lexicon:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise OntologyError(f"cannot read the lexicon {path}: {exc}",
                            hint="restore ontology/lexicon.yaml") from None  # fmt: skip
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict):
        raise OntologyError(f"{path}: expected a mapping 'roles: {{role: [words]}}'",
                            hint="see the header of ontology/lexicon.yaml")  # fmt: skip
    claims = data.get("claims") or {}
    if not isinstance(claims, dict):
        raise OntologyError(f"{path}: expected a mapping 'claims: {{quantity: [words]}}'",
                            hint="see the header of ontology/lexicon.yaml")  # fmt: skip
    return Lexicon(
        {str(r): frozenset(str(w).lower() for w in ws or ()) for r, ws in roles.items()},
        {str(k): frozenset(str(w).lower() for w in ws or ()) for k, ws in claims.items()},
    )


@dataclass(frozen=True)
class Unclaimed:
    """What the question holds that nothing used: words and numbers, in question order."""

    words: tuple[str, ...]
    numbers: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.words or self.numbers)

    def quoted(self, known: Iterable[str] = ()) -> str:
        """ "'failled' (did you mean 'failed'?), '1600'": with a close known word for a typo."""
        words = sorted(set(known))
        out = []
        for t in self.words:
            close = difflib.get_close_matches(t.lower(), words, n=1, cutoff=0.8) if words else []
            hint = close and close[0] != t.lower()
            out.append(f"'{t}' (did you mean '{close[0]}'?)" if hint else f"'{t}'")
        out += [f"'{n}'" for n in self.numbers]
        return ", ".join(out)


def known_words(phrase: str, vocabulary: frozenset[str]) -> list[str]:
    """The words of ``phrase`` whose every part ('gpu_utilization': gpu, utilization) is in
    ``vocabulary`` or the lexicon: what a grounded phrase may claim."""
    lexicon = load_lexicon().words
    out = []
    for tok in _TOKEN.findall(phrase.lower()):
        parts = [p for p in re.split(r"[_'’]", tok) if p and p != "s"]
        if parts and all(p in vocabulary or p in lexicon or p.isdigit() for p in parts):
            out.append(tok)
    return out


def masked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        for i in range(max(a, 0), min(b, len(chars))):
            chars[i] = " "
    return "".join(chars)


def _plan_numbers(plans: Sequence[QueryPlan]) -> set[float]:
    """Every number a plan carries that a question may state: thresholds, limits, job-filter
    values, ids and part indices."""
    out: set[float] = set()

    def add(value: Any) -> None:
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.add(float(v))

    for plan in plans:
        if plan.limit is not None:
            add(plan.limit)
        add([int(a.fn[1:]) for a in plan.aggregations if re.fullmatch(r"p\d+", a.fn)])
        for f in plan.filters:
            add(f.value)  # every filter's level or values (job, reading, group aggregate)
            if isinstance(f, JobFilter) and isinstance(f.value, int) and f.op in ("gt", "ge"):
                add(f.value + (1 if f.op == "gt" else 0))  # 'more than 1' = 'gt 1'
        for sel in plan.entities:
            add(list(sel.ids))
            add(list(sel.index or []))
        for m in plan.metrics:
            add([int(d) for d in re.findall(r"\d+", m.metric)])
    return out


# A statistic word outside the metric phrases asks for that statistic; a plan without it drops it.
_STATISTIC_FN = {
    "average": {"avg"}, "avg": {"avg"}, "mean": {"avg"}, "max": {"max"}, "maximum": {"max"},
    "peak": {"max"}, "min": {"min"}, "minimum": {"min"}, "median": {"median"},
    "total": {"sum"}, "sum": {"sum"},
}  # fmt: skip


def _dropped_statistic(word: str, plans: Sequence[QueryPlan]) -> bool:
    wanted = _STATISTIC_FN.get(word)
    if wanted is None:
        return False
    for plan in plans:
        if any(a.fn in wanted for a in plan.aggregations):
            return False
        if plan.target == "jobs" and plan.group_by and plan.aggregations:
            # 'jobs submitted per hour … the busiest hour and the day's total': the answer
            # states every group's figure, the highest and lowest, and the total of counts and
            # sums over the groups
            additive = any(a.fn in ("count", "sum") for a in plan.aggregations)
            if wanted <= {"max", "min"} or (wanted == {"sum"} and additive):
                return False
        if wanted == {"avg"} and plan.granularity != "raw":
            return False  # 'hourly average': each series' mean per bucket
    return True


def _number(token: str) -> float | None:
    try:
        return float(token.replace(",", "."))
    except ValueError:
        return None


def unclaimed(
    question: str,
    *,
    spans: Iterable[tuple[int, int]],
    phrases: Iterable[str],
    plans: Sequence[QueryPlan],
    lexicon: Lexicon,
    names: Iterable[str] = (),
) -> Unclaimed:
    """The words and numbers of ``question`` that no span, grounded phrase, plan value or
    lexicon word claims; the numbers of ``names`` (the chosen metrics' own names and synonyms,
    '15 min load') claim those numbers too."""
    text = masked(question, spans)
    named = [w for p in names for w in _TOKEN.findall(p.lower())]
    used = {w for p in phrases for w in _TOKEN.findall(p.lower())} | set(named)
    named_numbers = {w for w in named if w[:1].isdigit()}
    used |= {str(v).lower() for plan in plans for f in plan.filters if isinstance(f, JobFilter)
             for v in (f.value if isinstance(f.value, list) else [f.value])}  # fmt: skip
    used |= {alias for alias, name in PARTITION_ALIASES.items() if name in used}
    used |= {str(i).lower() for plan in plans for sel in plan.entities for i in sel.ids}
    used |= {p for plan in plans for m in plan.metrics for p in _TOKEN.findall(m.metric.lower())}
    # 'cpu_user on node 855 on june 1: p90': a percentile the plan computes claims its word
    used |= {a.fn for plan in plans for a in plan.aggregations if re.fullmatch(r"p\d+", a.fn)}
    for plan in plans:  # 'run times', 'queue wait', 'submissions': what the plan computes
        for key in [*plan.derived, f"event:{plan.job_event}"]:
            used |= lexicon.claims.get(key, frozenset())
    if any(plan.order_by and plan.limit is not None for plan in plans):
        used |= {"most", "fewest"}  # 'the user who ran the most jobs': the plan ranks
    numbers = _plan_numbers(plans)
    words: list[str] = []
    digits: list[str] = []
    prev = ""
    for tok in _TOKEN.findall(text):
        low = tok.lower().replace("’", "'")
        after, prev = prev, low
        if after in DROP_AFTER.get(low, ()):
            continue  # only filler after that word: 'in total' asks no sum, 'pull up' no state
        if low[0].isdigit():
            value = _number(low)
            if (value is None or value not in numbers) and low not in named_numbers:
                digits.append(tok)
            continue
        base = low.removesuffix("'s")
        if base in used:
            continue
        if (base in lexicon.words or low in lexicon.words) and not _dropped_statistic(base, plans):
            continue
        words.append(tok)
    return Unclaimed(tuple(dict.fromkeys(words)), tuple(dict.fromkeys(digits)))
