"""Stage 1 of the Reflect Agent: input validation, with no model needed.

Entities by rules, the time window by the deterministic parser (or a model when one is
configured), metrics by F = M∘P∘D∘I, then the rule-based planner. The outcome is one of:
``Ready`` (typed plans to compile), ``Clarify`` (what to ask, with candidates) or ``Reject``
(why the request cannot be answered). Answers to earlier clarifications are replayed in order,
so resuming after a restart needs nothing but the question and the answers: every step here is
deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, TypeVar

from oda_analyst.lake import topology
from oda_analyst.lake.layout import months_between
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import AggregateFilter, JobFilter, QueryPlan, ValueFilter
from oda_analyst.reading.answers import entities_of_reply, hours_on_day, time_of_reply
from oda_analyst.reading.model import Problem, Reading, RetrievalReading
from oda_analyst.reading.read import completed, rules_of
from oda_analyst.reading.rules import accounting
from oda_analyst.reading.rules.vague import threshold_question
from oda_analyst.reading.types import Cardinality, Entities, Intent, ParsedWindow, TimeParse
from oda_analyst.retriever.grounding.ground import (
    GroundingResult,
    Holdings,
    MetricModelHooks,
    Reflection,
    Thresholds,
    apply_clarification,
    ground_metrics,
)
from oda_analyst.retriever.grounding.plugin import PluginGuess
from oda_analyst.retriever.model_paths.grounding_model import LLMGroundingHooks
from oda_analyst.retriever.planning import shape
from oda_analyst.retriever.planning.instant import at_instants
from oda_analyst.retriever.planning.planner import PlannerInput, plan_question

Field = Literal["entity", "time", "metric", "threshold"]
T = TypeVar("T")

# The grounding's non-metric routes, as the planner names them.
_PLANNER_KIND = {
    "count_entities": "count_entities",
    "list_entities": "count_entities",
    "list_jobs": "jobs",
    "job_stats": "jobs",
}


@dataclass(frozen=True)
class Answer:
    """One answered clarification: which field it was about, and the user's words."""

    field: Field
    text: str


@dataclass(frozen=True)
class Clarify:
    """Ask the user; ``candidates`` are JSON-ready choices (metrics or windows)."""

    field: Field
    question: str
    candidates: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Reject:
    """The request cannot be answered as asked; ``message`` says why and what to do.

    ``unplanned``: metrics and a window were grounded but the rule planner built no plan — the
    one rejection a model can still answer, by writing the SPARQL itself (the paper's path).
    """

    message: str
    hint: str | None = None
    unplanned: bool = False


@dataclass(frozen=True)
class Ready:
    """Stage 1 succeeded: plans to compile, and what was understood."""

    plans: tuple[QueryPlan, ...]
    notes: tuple[str, ...] = ()
    # per plan: the instant whose nearest readings it asks for (None: a window), see instant.py
    instants: tuple[datetime | None, ...] = ()


@dataclass(frozen=True)
class Stage1Result:
    """The outcome plus the artifacts every outcome records (entities, time, metrics)."""

    outcome: Ready | Clarify | Reject
    entities: Entities | None = None
    time: TimeParse | None = None
    grounding: GroundingResult | None = None
    warnings: tuple[str, ...] = field(default=())

    def artifacts(self) -> dict[str, Any]:
        """The state machine's artifacts of stage 1 (JSON-ready)."""
        out: dict[str, Any] = {}
        if self.entities is not None:
            out["entities"] = self.entities.to_dict()
        if self.time is not None:
            out["time"] = self.time.to_dict()
        if self.grounding is not None:
            out["metrics"] = tuple(
                {"subquery": g.subquery, "plugin": g.plugin, "metric": g.metric,
                 "score": round(g.score, 4), "rule": g.rule}
                for g in self.grounding.grounded
            )  # fmt: skip
        return out


class ModelOutageError(Exception):
    """The model failed during stage 1: run it again by the rules alone."""


class GuardedHooks:
    """Model hooks that abandon stage 1 (``ModelOutageError``) at the model's first failed call:
    ``LLMGroundingHooks`` would go on with the rules' priors as weak answers, and that is not
    what the rules alone decide. ``failed(notes)`` says whether a call has failed so far."""

    def __init__(self, inner: LLMGroundingHooks, failed: Callable[[Sequence[str]], bool]) -> None:
        self.inner = inner
        self.failed = failed

    def _checked(self, value: T) -> T:
        if self.failed(self.inner.notes):
            raise ModelOutageError(self.inner.notes[-1] if self.inner.notes else "model failed")
        return value

    def classify_intent(
        self, question: str, *, prior: Intent, reflection: Reflection | None
    ) -> tuple[Intent, float]:
        got = self.inner.classify_intent(question, prior=prior, reflection=reflection)
        return self._checked(got)

    def decompose(
        self, question: str, *, cardinality: Cardinality, prior: Sequence[str]
    ) -> tuple[list[str], float]:
        return self._checked(self.inner.decompose(question, cardinality=cardinality, prior=prior))

    def classify_plugin(
        self, subquery: str, *, prior: PluginGuess, reflection: Reflection | None
    ) -> tuple[str, float]:
        got = self.inner.classify_plugin(subquery, prior=prior, reflection=reflection)
        return self._checked(got)


def _window_dict(w: ParsedWindow) -> dict[str, Any]:
    return {"start": w.start.isoformat(), "end": w.end.isoformat(), "text": w.text}


def _merge_entities(base: Entities, extra: Entities) -> Entities:
    def union(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(sorted(set(a) | set(b)))

    return replace(
        base,
        nodes=union(base.nodes, extra.nodes),
        all_nodes=base.all_nodes or extra.all_nodes,
        racks=union(base.racks, extra.racks),
        jobs=union(base.jobs, extra.jobs),
        users=union(base.users, extra.users),
        gpus=union(base.gpus, extra.gpus),
        cpus=union(base.cpus, extra.cpus),
        devices=union(base.devices, extra.devices),
        system=base.system or extra.system,
        weather=base.weather or extra.weather,
    )


def _time(reading: RetrievalReading, as_of: datetime, answers: Sequence[Answer],
          decided: TimeParse | None) -> TimeParse:  # fmt: skip
    parsed = decided if decided is not None else reading.time
    for ans in answers:
        if ans.field == "time":
            # 'between 2 and 3pm' asked 'which day?': '1 June' gives the day of those hours
            joined = hours_on_day(reading, ans.text, as_of) if _no_day_said(parsed) else None
            if joined is not None and not _no_day_said(joined):
                parsed = joined
                continue
            parsed = time_of_reply(ans.text, as_of, parsed.candidates)
        elif ans.field == "entity":
            # 'node 5 on 1 June 8-9' answers 'which nodes?' and the window too: one round
            given = time_of_reply(ans.text, as_of, ())
            parsed = given if given.status == "ok" else parsed
    return parsed


def _bounded_by(parsed: TimeParse, as_of: datetime) -> tuple[TimeParse, Reject | tuple[str, ...]]:
    """Windows end at the reference time: a window that starts at or after it has no readings
    yet (rejected), one that reaches past it is cut there, with a warning saying so."""
    fmt = "%Y-%m-%d %H:%M"
    kept, notes = [], []
    for w in parsed.windows:
        if w.start >= as_of:
            return parsed, Reject(
                f"the window '{w.text or w.start.isoformat()}' ({w.start:{fmt}}–{w.end:{fmt}} "
                f"UTC) starts after the reference time {as_of:{fmt}} UTC: there is no data yet",
                "ask about a past window, or give the reference time with --as-of",
            )
        if w.end > as_of:
            notes.append(
                f"the window '{w.text or w.start.isoformat()}' ({w.start:{fmt}}–{w.end:{fmt}} "
                f"UTC) reaches past the reference time: cut at {as_of:{fmt}} UTC"
            )
            kept.append(replace(w, end=as_of))
        else:
            kept.append(w)
    if not notes:
        return parsed, ()
    return replace(parsed, windows=tuple(kept)), tuple(notes)


def _clarify_time(parsed: TimeParse) -> Clarify:
    if parsed.status == "ambiguous":
        return Clarify(
            "time",
            f"{parsed.message} Which one do you mean? Answer with its number or a date.",
            tuple(_window_dict(w) for w in parsed.candidates),
        )
    if parsed.status == "unparseable":
        return Clarify(
            "time",
            f"{parsed.message} Please give the time window again, e.g. 'on 1 June 2022 from "
            "08:00 to 09:00'.",
        )
    return Clarify(
        "time",
        "Which time window do you mean? e.g. 'on 1 June 2022 from 08:00 to 09:00' or 'last 10 "
        "hours'.",
    )


def _clarify_metric(grounding: GroundingResult) -> Clarify:
    asked = grounding.clarification
    assert asked is not None
    return Clarify(
        "metric",
        asked.question,
        tuple(
            {"metric": c.metric, "plugin": c.plugin, "score": round(c.score, 3),
             "description": c.description, "members": list(c.members)}
            for c in asked.candidates
        ),
    )  # fmt: skip


def _clarify_threshold(phrase: str, grounding: GroundingResult, given: str) -> Clarify:
    cat = load_catalogue()
    units = [cat.get(metric).unit for _, metric in grounding.metrics() if metric in cat]
    asked = threshold_question(phrase, units[0] if units else None)
    if given:
        asked = f"I could not read a threshold in '{given}'. {asked}"
    return Clarify("threshold", asked)


def _asks_about_nothing(grounding: GroundingResult, entities: Entities) -> bool:
    """'show me the data', 'how's node 301 doing?', 'give me the numbers for yesterday': no
    metric phrase and no job — nothing to refuse, only something to ask (the hint names what the
    analyst can give; a time said stays part of the question the answer completes)."""
    return (grounding.status == "failed" and not grounding.metrics()
            and (grounding.message or "").startswith("the question names no metric")
            and not (entities.jobs or entities.users))  # fmt: skip


def _ask_what(entities: Entities) -> Clarify:
    """'What would you like to know about rack 12?': a question that names no quantity to
    retrieve, asked back with what the analyst can give."""
    parts = []
    for kind, ids in (("rack", entities.racks), ("node", entities.nodes)):
        if ids:
            shown = ", ".join(str(i) for i in ids)
            parts.append(f"{kind}{'s' if len(ids) > 1 else ''} {shown}")
    if not parts:
        return Clarify(
            "metric",
            "What would you like to know? e.g. the power, inlet temperature or GPU utilisation "
            "of some nodes, or the jobs of a day — and when.",
        )
    return Clarify(
        "metric",
        f"What would you like to know about {' and '.join(parts)}? e.g. its power, inlet "
        "temperature, GPU utilisation, or the jobs on it, and when.",
    )


def _months_asked(time: TimeParse) -> set[str]:
    """The lake months ('22-06') the question's windows touch (none while the time is unread)."""
    if time.status != "ok":
        return set()
    return {m for w in time.windows for m in months_between(w.start, w.end)}


def _holdings(
    lake_months: Mapping[tuple[str, str], Sequence[str]] | None, time: TimeParse
) -> Holdings | None:
    """Whether the lake holds a metric in some month the question's windows touch."""
    wanted = _months_asked(time)
    if lake_months is None or not wanted:
        return None
    if not any(wanted & set(months) for months in lake_months.values()):
        return None  # a window the lake does not reach at all: its answer is 'no data'

    def held(plugin: str, metric: str) -> bool:
        return bool(wanted & set(lake_months.get((plugin, metric), ())))

    return held


def _outside_lake(
    said: RetrievalReading,
    entities: Entities,
    time: TimeParse,
    lake_months: Mapping[tuple[str, str], Sequence[str]] | None,
) -> Reject | None:
    """Why a window in no month the lake holds has no data, or None. Jobs are kept out: a job
    running in a window may sit in an earlier month's polls."""
    wanted = _months_asked(time)
    if lake_months is None or not wanted or entities.jobs or said.intent.kind != "metric":
        return None
    held = sorted({m for months in lake_months.values() for m in months})
    if not held or wanted & set(held):
        return None
    span = ", ".join(f"{w.start:%Y-%m-%d %H:%M}–{w.end:%Y-%m-%d %H:%M} UTC" for w in time.windows)
    first, last = (datetime.strptime(m, "%y-%m").strftime("%B %Y") for m in (held[0], held[-1]))
    holds = first if first == last else f"{first} to {last}"
    return Reject(
        f"no data in {span}: the lake holds {holds}",
        f"ask about a time in {holds} (or set the reference time, --as-of, inside it)",
    )


# Groupings only a jobs plan makes: a readings plan without them pools every group into one figure.
_UNGROUPABLE = {
    "partition": ("partition", "how many jobs started on 6 June in each partition"),
    "state": ("state", "how the jobs that ended on 4 June finished, per final state"),
    "qos": ("QoS", "jobs per QoS that ran on 4 June"),
}


def _grouping_pooled(reading: Reading, plans: Sequence[QueryPlan]) -> Reject | None:
    """Why 'average node power per partition' is refused: jobs are grouped by partition, state
    or QoS, readings are not, and one figure over them all would answer another question."""
    analysis = {(s.start, s.end) for s in reading.analysis_spans()}
    for g in reading.groupings:
        known = _UNGROUPABLE.get(g.by)
        if known is None or (g.start, g.end) in analysis:
            continue
        what, example = known
        if any(g.by in p.group_by for p in plans):
            continue
        return Reject(
            f"the question asks for each {what} ('{g.text}'), and I cannot group by {what} "
            f"here: jobs have a {what}, readings do not, and one figure over every {what} would "
            "answer another question",
            f"ask about the jobs per {what} (e.g. '{example}'), or leave the grouping out",
        )
    return None


# 'on the 1st', 'between 2 and 3am on the 1st': a day of the month with no month or year said
_MONTH_DAY = re.compile(r"\bthe\s+\d{1,2}(?:st|nd|rd|th)\b", re.IGNORECASE)
_MONTH_SAID = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\d{4}",
                         re.IGNORECASE)  # fmt: skip


# words that say which day a window is on ('yesterday', 'june', 'wed', '2022-06-01', 'the 5th')
_DAY_SAID = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun|yesterday"
    r"|yday|yest|today|tonight|tomorrow|last|past|previous|this|ago|week|month|year|day|days)"
    r"|\d{4}|\d(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)


def _no_day_said(time: TimeParse) -> bool:
    """Whether the windows are hours of no day said ('between 2 and 3pm': today's)."""
    return bool(time.windows) and not any(_DAY_SAID.search(w.text) for w in time.windows)


def _ask_day(w: ParsedWindow, why: str, hint: str = "") -> Clarify:
    return Clarify("time", f"'{w.text.strip()}' names no day, so it is today's "
                           f"({w.start:%-d %B %Y}), which {why}. Which day do you mean? "
                           f"e.g. '1 June 2022'{hint}")  # fmt: skip


def _month_unsaid(time: TimeParse, lake_months: Mapping[tuple[str, str], Sequence[str]] | None
                  ) -> Reject | Clarify | None:  # fmt: skip
    """Why 'the 1st' (a day with no month) is not answered when its month is outside the lake
    but an earlier month with that day is in it, naming that day; and which day '6 till 9 in
    the morning' (hours of no day said: today's) is on, when today is outside the lake."""
    if lake_months is None or not time.windows:
        return None
    held = {m for months in lake_months.values() for m in months}
    last = max(held, default=None)
    for w in time.windows:
        if not _DAY_SAID.search(w.text) and f"{w.start:%y-%m}" not in held and last:
            newest = datetime.strptime(last, "%y-%m").strftime("%B %Y")
            return _ask_day(w, "the lake does not hold", f" (the lake's newest month is {newest})")
    for w in time.windows:
        if (not _MONTH_DAY.search(w.text) or _MONTH_SAID.search(w.text)
                or f"{w.start:%y-%m}" in held):  # fmt: skip
            continue
        year, month = w.start.year, w.start.month
        for _ in range(12):
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
            try:
                day = w.start.replace(year=year, month=month)
            except ValueError:
                continue  # no 31st in that month
            if f"{day:%y-%m}" in held:
                return Reject(
                    f"'{w.text.strip()}' reads as {w.start:%-d %B %Y}, which the lake does not "
                    f"hold (the month was not said)",
                    f"say the month: '{day:%-d %B %Y}' is in the lake",
                )
    return None


def _completed(reading: Reading, reply: str) -> RetrievalReading:
    """The rules' part of the question completed by a reply ('above 80 %'), read as one."""
    return rules_of(completed(reading, reply))


def run_stage1(
    reading: Reading,
    *,
    answers: Sequence[Answer] = (),
    hooks: MetricModelHooks | None = None,
    time: TimeParse | None = None,
    thresholds: Thresholds | None = None,
    lake_months: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> Stage1Result:
    """Validate a request: entities, time, metrics, plans — or what to ask, or why not.

    A question about a window the lake does not reach, or one after the reference time, is never
    asked about (which metric, what threshold): no answer could bring data, so it is told at
    once. One that needs no question goes on to its answer with no rows, as every no-data
    question does."""
    found = _validated(reading, answers=answers, hooks=hooks, time=time,
                       thresholds=thresholds, lake_months=lake_months)  # fmt: skip
    if isinstance(found.outcome, Ready):
        pooled = _grouping_pooled(reading, found.outcome.plans)
        if pooled is not None:
            return replace(found, outcome=pooled)
    if found.time is not None and not isinstance(found.outcome, Reject):
        # 'on the 1st' asked on 5 July of a lake that ends in June: the month was left out, so
        # 1 July's 'no data' would answer a question the operator may not have meant
        unsaid = _month_unsaid(found.time, lake_months)
        if unsaid is not None:
            return replace(found, outcome=unsaid)
    if (isinstance(found.outcome, Clarify) and found.outcome.field != "time"
            and found.time is not None):  # fmt: skip
        outside = _outside_lake(rules_of(reading), found.entities or Entities(), found.time,
                                lake_months)  # fmt: skip
        if outside is not None:
            return replace(found, outcome=outside)
        # 'humidity on june 25' asked on 20 June: no metric chosen could bring data yet
        _, future = _bounded_by(found.time, reading.as_of)
        if isinstance(future, Reject):
            return replace(found, outcome=future)
    return found


def _validated(
    reading: Reading,
    *,
    answers: Sequence[Answer] = (),
    hooks: MetricModelHooks | None = None,
    time: TimeParse | None = None,
    thresholds: Thresholds | None = None,
    lake_months: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> Stage1Result:
    """``run_stage1`` before the lake's months are checked.

    ``reading``: the question as the reader read it (stage 1 reads no text of its own).
    ``time``: the window a model decided (``model_paths.time_model.decide_time``), else the
    reading's. ``lake_months``: ``(plugin, metric)`` -> the months the lake holds it
    (``Lake.metric_months``); with it, grounding knows what the lake can answer for the question's
    window."""
    if reading.out_of_scope is not None:
        return Stage1Result(Reject(reading.out_of_scope.message, reading.out_of_scope.hint))
    said = rules_of(reading)
    as_of = reading.as_of
    if said.entity_problem is not None:
        return Stage1Result(Reject(said.entity_problem.message, said.entity_problem.hint))
    entities = said.entities
    for ans in answers:
        # a reply names every detail it holds: entities given with a window count too
        if ans.field in ("entity", "time"):
            extra = entities_of_reply(ans.text)
            if isinstance(extra, Problem):
                return Stage1Result(Reject(extra.message, extra.hint))
            entities = _merge_entities(entities, extra)
    decided = time  # the model's window, of the question as asked
    time = _time(said, as_of, answers, decided)
    grounding = ground_metrics(said, entities=entities, model=hooks, thresholds=thresholds,
                               held=_holdings(lake_months, time))  # fmt: skip
    told = [a for a in answers if a.field == "metric"]
    if told and grounding.status != "clarification":
        # 'show me node 12' -> 'inlet temperature yesterday': the answer completes the question
        # itself (no metric candidates were offered to pick from)
        rest = [a for a in answers if a.field != "metric"]
        return run_stage1(completed(reading, " ".join(a.text for a in told)), answers=rest,
                          hooks=hooks, time=decided if decided and decided.status == "ok" else None,
                          thresholds=thresholds,
                          lake_months=lake_months)  # fmt: skip
    for ans in answers:
        if ans.field == "metric" and grounding.status == "clarification":
            grounding = apply_clarification(grounding, ans.text, entities=entities,
                                            thresholds=thresholds)  # fmt: skip
    seen = Stage1Result(Reject(""), entities, time, grounding, tuple(grounding.warnings))
    if grounding.status == "clarification":
        return replace(seen, outcome=_clarify_metric(grounding))
    if _asks_about_nothing(grounding, entities):
        return replace(seen, outcome=_ask_what(entities))
    if said.vague and not grounding.metrics() and not told:
        # 'which nodes were running really hot': a level of no named metric (the jobs on a list
        # of nodes would answer another question)
        return replace(seen, outcome=Clarify(
            "metric", f"Which metric is '{said.vague}' about, and from what level? e.g. 'inlet "
            "temperature above 30 °C' or 'node power above 1500 W'."))  # fmt: skip
    if grounding.status == "failed":
        return replace(seen, outcome=Reject(
            grounding.message or "no metric in the catalogue matches the question",
            "name a metric the catalogue knows (e.g. 'inlet temperature', 'node power', "
            "'GPU-0 utilisation'); `oda-analyst metrics` lists them",
        ))  # fmt: skip
    if time.status in ("ambiguous", "unparseable"):
        return replace(seen, outcome=_clarify_time(time))
    later_today = [w for w in time.windows if w.start >= as_of]
    if later_today and _no_day_said(time):
        # 'between 2 and 3pm' asked at 9 am: today's hours have no data yet; another day meant
        return replace(seen, outcome=_ask_day(later_today[0], "has no data yet"))
    time, cut = _bounded_by(time, as_of)
    if isinstance(cut, Reject):
        return replace(seen, time=time, outcome=cut)
    seen = replace(seen, time=time, warnings=(*seen.warnings, *cut))
    # An answered threshold ("above 80 %") is read by the planner as if the question said it.
    given = " ".join(a.text for a in answers if a.field == "threshold")
    later = _completed(reading, given) if given else said
    vague = later.vague if grounding.metrics() else None
    if vague is not None:
        return replace(seen, outcome=_clarify_threshold(vague, grounding, given))
    kind = None
    if grounding.status == "non_metric" and grounding.intent is not None:
        kind = _PLANNER_KIND.get(grounding.intent.sub_kind or "")
    asked = later.form
    # 'where gpu 0 power never dropped below 90 W' over a rack holds of each node's readings, so
    # it names the nodes that kept it (a pooled statistic of the readings past it answers another
    # question)
    every = asked.level.every and later.value_filter and asked.names_nodes
    listing = asked.lists_nodes or (asked.asks_rack and later.value_filter) or every
    if listing and grounding.metrics() and not _selects_nodes(entities):
        entities = replace(entities, all_nodes=True)  # 'which nodes drew more than 1600 W'
    planned = plan_question(PlannerInput(
        later, entities, time.windows, tuple(grounding.metrics()), kind,
    ))  # fmt: skip
    if "window" in planned.missing:
        return replace(seen, outcome=_clarify_time(time))
    if "entity" in planned.missing:
        return replace(seen, outcome=Clarify(
            "entity",
            "Which nodes, racks or jobs do you mean? e.g. 'node 900', 'rack 45', 'all nodes' or "
            "'job 3423336'.",
        ))  # fmt: skip
    if "metric" in planned.missing or not planned.plans:
        return replace(seen, outcome=Reject(
            "the question names nothing I can retrieve: "
            + "; ".join(planned.notes or ("no plan",)),
            "ask for a metric (e.g. 'node power of node 900 on 1 June 2022') or about jobs",
            unplanned=bool(grounding.metrics() and time.windows),
        ))  # fmt: skip
    if shape.asks_nothing(asked, planned.plans):
        return replace(seen, outcome=_ask_what(entities))
    plans, conflict = shape.shape(asked, _in_metric_units(later, planned.plans))
    conflict = conflict or _unit_conflict(later, plans)
    if conflict is not None:
        return replace(seen, outcome=Reject(
            f"the question {conflict}: answering it with that plan would answer another question",
            "ask for what the analyst can give (readings, statistics, counts of jobs or nodes, "
            "lists of nodes over a threshold), or rephrase",
        ))  # fmt: skip
    plans = tuple(_per_named_job(p) for p in plans)
    plans, instants, at_once = at_instants(plans, time.windows)
    if at_once is not None:
        return replace(seen, outcome=Clarify("time", at_once))
    dropped = _dropped_entities(entities, plans)
    if dropped:
        return replace(seen, outcome=Reject(
            f"the plan does not select {' and '.join(dropped)}, which the question names: "
            "answering it would answer another question",
            "ask for the entity's readings or jobs in a form the analyst gives (readings, "
            "statistics, counts or lists of its jobs), or rephrase",
        ))  # fmt: skip
    left = _unclaimed(later, entities, grounding, plans)
    if left:
        return replace(seen, outcome=Reject(
            f"I could not use {left.quoted(_known_words())} in the question, and leaving "
            f"{'them' if len(left.words) + len(left.numbers) > 1 else 'it'} out could answer "
            "another question",
            "rephrase with words the analyst knows (a metric, entities, a time window, a "
            "statistic); check the spelling; `oda-analyst metrics` lists the metrics",
        ))  # fmt: skip
    return replace(seen, outcome=Ready(plans, planned.notes, instants))


def _dropped_entities(entities: Entities, plans: Sequence[QueryPlan]) -> list[str]:
    """The nodes, racks, jobs and users the question names that no plan selects. An entity
    span claims its words whatever the plan does, so a plan that drops one ('how many jobs ran
    on rack 10' counted every job) must be caught here, not by the accounting."""
    chosen: dict[str, set[int]] = {"node": set(), "rack": set(), "job": set(), "user": set()}
    for plan in plans:
        for sel in plan.entities:
            kind = "node" if sel.kind in ("gpu", "cpu") else sel.kind
            every = set(range(topology.N_RACKS))
            if kind in ("node", "rack") and sel.all and set(entities.racks) == every:
                # 'for every rack' names every rack, which all nodes (or racks) select
                chosen["rack"] |= every
            if kind in chosen:
                chosen[kind] |= {int(i) for i in sel.ids if str(i).isdigit()}
        for f in plan.filters:
            if isinstance(f, JobFilter) and f.field == "user":
                values = f.value if isinstance(f.value, list) else [f.value]
                chosen["user"] |= {int(v) for v in values if str(v).isdigit()}
    out = [
        f"node {n}"
        for n in entities.nodes
        if n not in chosen["node"] and topology.rack_of(n) not in chosen["rack"]
    ]
    out += [
        f"rack {r}"
        for r in entities.racks
        if r not in chosen["rack"] and not set(topology.nodes_of_rack(r)) <= chosen["node"]
    ]
    out += [f"job {j}" for j in entities.jobs if j not in chosen["job"]]
    out += [f"user {u}" for u in entities.users if u not in chosen["user"]]
    return out  # fmt: skip


def _selects_nodes(entities: Entities) -> bool:
    """Whether the question names which nodes; 'GPU 1' alone names a part of every node
    ('which nodes kept GPU 1 below 5 %' asks over all of them)."""
    return bool(entities.all_nodes or entities.nodes or entities.racks or entities.jobs
                or entities.users)  # fmt: skip


def _known_words() -> frozenset[str]:
    """Words a typo may be close to: the lexicon's and the catalogue's."""
    return accounting.load_lexicon().words | load_catalogue().vocabulary


def _in_metric_units(said: RetrievalReading, plans: Sequence[QueryPlan]) -> tuple[QueryPlan, ...]:
    """'more than 1.6 kW' on node power (in W) is more than 1600 W. Only when every threshold
    is in kW: a question mixing W and kW levels is left as stated, and the unit guard refuses
    it."""
    if set(said.threshold_units) != {"kW"}:
        return tuple(plans)
    cat = load_catalogue()
    out = []
    for plan in plans:
        if not plan.metrics or any(cat.get(m.metric).unit != "W" for m in plan.metrics):
            out.append(plan)
            continue
        filters = [f.model_copy(update={"value": f.value * 1000})
                   if isinstance(f, ValueFilter | AggregateFilter) else f
                   for f in plan.filters]  # fmt: skip
        out.append(plan.model_copy(update={"filters": filters}))
    return tuple(out)


def _unit_conflict(said: RetrievalReading, plans: Sequence[QueryPlan]) -> str | None:
    """A threshold in one unit on a metric measured in another ('nodes above 1000 W' grounded
    to a count of nodes) compares numbers that mean different things: never run it."""
    units = frozenset(said.threshold_units)
    if not units:
        return None
    if {"W", "kW"} <= units:
        return "states thresholds in both W and kW; give them in one unit"
    cat = load_catalogue()
    for plan in plans:
        if not any(f.about in ("value", "aggregate") for f in plan.filters):
            continue
        for ref in plan.metrics:
            info = cat.get(ref.metric)
            # a kW level on a metric in W was scaled to watts (_in_metric_units)
            if not units <= {info.unit, *(("kW",) if info.unit == "W" else ())}:
                return (
                    f"states a threshold in {', '.join(sorted(units))}, and {info.name} is "
                    f"measured in {info.unit or 'no unit'}"
                )
    return None


def _per_named_job(plan: QueryPlan) -> QueryPlan:
    """A statistic over one named job's readings is reported with the job's id."""
    sel = plan.selector("job")
    if (sel is not None and len(sel.ids) == 1 and plan.job_window and plan.aggregations
            and not plan.group_by):  # fmt: skip
        return plan.model_copy(update={"group_by": ["job"]})
    return plan


def _unclaimed(said: RetrievalReading, entities: Entities, grounding: GroundingResult,
               plans: Sequence[QueryPlan]) -> accounting.Unclaimed:  # fmt: skip
    """Words and numbers of the question nothing in stage 1 used (see ``accounting``)."""
    cat = load_catalogue()
    # a time phrase is claimed only by a plan that reads a window (or the jobs' own runs)
    timed = any(p.window is not None or p.job_window for p in plans)
    # a job state ('NODE_FAIL jobs') is claimed only by a plan that filters jobs by state: a
    # plan of readings would otherwise answer 'nodes hit by node_fail jobs' with a metric
    stated = any(isinstance(f, JobFilter) and f.field == "state" for p in plans for f in p.filters)
    # ... or that groups them by it ('how the jobs finished (completed, timed out …)')
    stated = stated or any("state" in p.group_by for p in plans)
    # a threshold ('at most 10 %') is claimed by a plan that filters readings by a level
    levelled = any(f.about in ("value", "aggregate") for p in plans for f in p.filters)
    spans = [*entities.spans, *(said.time_spans if timed else ()),
             *(said.job_state_spans if stated else ()),
             *(said.threshold_spans if levelled else ()),
             *(said.vague_spans if levelled else ()),
             *said.unit_note_spans, *((a, b) for a, b, _ in said.psu)]  # fmt: skip
    spans.append((said.chunking.core_end, len(said.text)))  # the analysis tail
    # a grounded phrase claims the words the catalogue knows, not any word glued to it:
    # 'total power bbbbbb' grounds to total_power, and 'bbbbbb' still means nothing
    known = cat.vocabulary
    phrases = [" ".join(accounting.known_words(g.phrase, known)) for g in grounding.grounded]
    names: list[str] = []
    for _, metric in grounding.metrics():
        if metric in cat:
            info = cat.get(metric)
            names += [info.name.replace("_", " "), *info.synonyms]
    return accounting.unclaimed(said.text, spans=spans, phrases=phrases, plans=plans,
                                lexicon=accounting.load_lexicon(), names=names)  # fmt: skip
