"""``read(question, as_of, lake_facts) -> Reading``: the one place a question's text is read.

One pass over the tokens labels them: entity and time spans first (ids and windows), then the
vocabulary's phrases and shapes (charts, statistics, report words, comparisons, percentiles,
rankings, groupings), then metric phrases (runs of the catalogue's words nothing else claimed),
and last the words nothing could use. Where two labels want the same words, the earlier kind
keeps them: an id or a window is never a chart, and a chart phrase is never a metric.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from oda_analyst.errors import UsageError
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.reading.matcher import (
    Match,
    bucket_of,
    count_word,
    matchers,
    rank_direction,
)
from oda_analyst.reading.model import (
    ANALYSIS_ONLY,
    INTEGRALS,
    OF_READINGS,
    READING_CHARTS,
    AnalysisRequest,
    ChartKind,
    ChartRequest,
    EntitySpan,
    Form,
    GroupingSpan,
    Problem,
    RankingSpan,
    Reading,
    RetrievalReading,
    ScopeSpan,
    Span,
    Statistic,
    StatisticSpan,
    TimeSpan,
    TimeUnit,
    check_quotes,
)
from oda_analyst.reading.rules import form, spelling
from oda_analyst.reading.rules.accounting import load_lexicon, masked
from oda_analyst.reading.rules.cues import (
    has_value_filter,
    job_state_spans,
    level_statistic,
    threshold_spans,
    threshold_units,
)
from oda_analyst.reading.rules.decompose import chunk, decompose, psu_refs, unit_note_spans
from oda_analyst.reading.rules.entities import (
    entities_from_dict,
    extract_entities,
    with_job_keyword,
)
from oda_analyst.reading.rules.intent import classify_intent
from oda_analyst.reading.rules.lexicon_data import (
    load_qualities,
    load_time_units,
    with_qualities,
    with_synonyms,
)
from oda_analyst.reading.rules.names import named_metrics
from oda_analyst.reading.rules.numerals import numerals
from oda_analyst.reading.rules.stray import conjoined
from oda_analyst.reading.rules.timeparse import parse_time, time_spans
from oda_analyst.reading.rules.vague import vague_level, vague_spans
from oda_analyst.reading.scope import load_scope, out_of_scope
from oda_analyst.reading.types import Entities, FormCues
from oda_analyst.reading.vocabulary import Vocabulary, load_vocabulary

if TYPE_CHECKING:
    from spacy.tokens import Doc

LakeFacts = Mapping[str, Any]
"""What the reader may know of the lake (reserved: the months it holds, for colloquial dates)."""

_WEAK_LINE = frozenset({"plot", "plots", "plotted", "plotting"})
_CLAUSE_GAP = 6  # tokens: chart phrases further apart than this are separate requests
MAX_QUESTION_CHARS = 4000  # as the MCP tool's schema allows; also bounds the parsers' work
_YES_NO = frozenset({"is", "was", "were", "are", "did", "does", "do", "has", "have", "had"})


def read(question: str, as_of: datetime, lake_facts: LakeFacts | None = None,
         *, vocab: Vocabulary | None = None) -> Reading:  # fmt: skip
    """The question, read once into typed spans (see the module docstring)."""
    del lake_facts  # not used yet: the lake's months will settle year-less dates
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(f"the question is {len(question):,} characters long, more than "
                         f"{MAX_QUESTION_CHARS:,}", hint="ask a shorter question")  # fmt: skip
    vocab = vocab or load_vocabulary()
    tools = matchers(vocab)
    doc = tools.doc(question)
    claimed = [False] * len(question)

    def take(start: int, end: int) -> None:
        for i in range(start, end):
            claimed[i] = True

    def free(start: int, end: int) -> bool:
        return not any(claimed[start:end])

    entities = _entities(question)
    for e in entities:
        take(e.start, e.end)
    times = _times(question, as_of)
    for t in times:
        take(t.start, t.end)

    phrases = [m for m in tools.phrase_matches(doc) if free(*_chars(doc, m))]
    shapes = tools.shape_matches(doc)
    stats = _statistics(doc, phrases, shapes, vocab)
    for s in stats:
        take(s.start, s.end)
    named = [m for m in phrases if m.label.startswith(("CHART:", "UNSPEC"))
             and not _names_a_line(doc, m)]  # fmt: skip
    charts = _charts(doc, vocab.clause_verbs, named)
    for c in charts:
        for p in c.parts:
            take(p.start, p.end)
    answered = _answered(doc, stats)
    if any(s.name == "anomalies" for s in stats):
        # 'more than 2 sigma off the mean - count them': the anomaly count says how many (a
        # count of the readings was stated beside it, 1,440 for 43)
        answered += [Span(start=s.start, end=s.end, text=s.text) for s in stats
                     if s.name == "count"]  # fmt: skip
        stats = [s for s in stats if s.name != "count"]
    for a in answered:
        take(a.start, a.end)
    report = [_span(doc, m) for m in phrases if m.label == "REPORT"]
    comparison = [_span(doc, m) for m in phrases if m.label == "COMPARE"]
    declined = [_span(doc, m) for m in phrases if m.label == "DECLINE"]
    for word in (*report, *comparison, *declined):
        take(word.start, word.end)
    # 'for every node' names all nodes and groups by node: a grouping may share an entity's
    # or a time's words ('each day from 1 to 5 June'), never an analysis phrase's
    found = _groupings(doc, shapes)
    one_day = _one_day(stats, times)
    if one_day is not None:
        # 'by hour of day on 1 June': over one day the profile is the hourly series itself
        stats = [s for s in stats if s is not one_day]
        found.append(GroupingSpan(by="hour", start=one_day.start, end=one_day.end,
                                  text=one_day.text))  # fmt: skip
    groupings = [g for g in found if not _inside_any(g, stats)
                 and not _inside_any(g, [o for o in found if o != g])]  # fmt: skip
    for g in groupings:
        take(g.start, g.end)
    if charts and groupings:
        # 'hourly mean … as a line, which hour was quietest', 'mean per rack as bars, which rack
        # runs warmest': the drawn groups' extremes, which the answer states, not a ranking
        nouns = frozenset(w for g in groupings for w in _GROUP_NOUNS.get(g.by, ()))
        extremes = [e for e in _answered(doc, stats, series=nouns) if free(e.start, e.end)]
        for x in extremes:
            take(x.start, x.end)
        answered = [*answered, *extremes]
    rankings = [r for r in _rankings(doc, shapes) if free(r.start, r.start + 1)]
    for r in rankings:
        take(r.start, r.end)
    asked_in = _time_unit_said(doc.text, claimed)
    if asked_in is not None:
        take(asked_in[0].start, asked_in[0].end)
    metric_phrases, unused = _leftovers(doc, claimed)
    units = _units_said(doc, claimed, metric_phrases) + [a[0] for a in [asked_in] if a]
    metric_phrases = [w for p in metric_phrases if (w := _before_units(p, units)) is not None]
    unused = [u for u in unused if not _inside_any(u, units)]
    # 'cluster cpu util 8-12 vs 14-18: which window was busier?', 'which ran warmer': beside a
    # metric named, a comparative asks which is higher (the comparison answers it); alone it
    # is all the question says of the quantity ('was it windier …') and stays a metric phrase
    comparing = _comparatives(doc, claimed, vocab, entities) if metric_phrases else []
    if comparing and any(p.text.lower() not in vocab.comparatives for p in metric_phrases):
        inside = {(c.start, c.end) for c in comparing}
        metric_phrases = [p for p in metric_phrases if (p.start, p.end) not in inside]
        unused = [u for u in unused if (u.start, u.end) not in inside]
        comparison = [*comparison, *comparing]
        answered = [*answered, *comparing]
    # 'was it windier the first week or the second': a quality's comparative compares, also
    # where it is all the question says of the quantity (the retrieval reads it as wind speed)
    said_already = {(c.start, c.end) for c in comparison}
    comparison = [*comparison, *(
        Span(start=t.idx, end=t.idx + len(t.text), text=t.text) for t in doc
        if (q := load_qualities().get(t.lower_)) is not None and q.degree == "comparative"
        and (t.idx, t.idx + len(t.text)) not in said_already
    )]  # fmt: skip
    beyond = out_of_scope(doc, load_scope())
    reported = [s for s in stats if s.name in ANALYSIS_ONLY or _after_any(s, report)]
    if any(s.name == "profile" for s in stats):
        # 'avg idle nodes by hour of day': a profile is the mean per hour of day; the mean is
        # its own, and the retrieval returns the readings it averages
        reported += [s for s in stats if s.name == "mean" and s not in reported]
    # 'p95 inlet temp across all nodes + histogram', 'which of nodes 12 and 13 drew more power on
    # average? line plot': the statistics are of the drawn readings, so one retrieval of the
    # readings serves both (a grouping or ranking keeps them the retrieval's: 'per rack')
    # (racks compared are each their nodes' readings taken together: 'rack 9 vs rack 40 … which
    # ran warmer on average? box plot' is a mean per rack, which no node's series states)
    over = (not report and not groupings and not rankings
            and any(c.kind in READING_CHARTS for c in charts)
            and any(s.name in OF_READINGS for s in stats)
            and not (comparison and any(e.kind == "rack" for e in entities)))  # fmt: skip
    if over:
        reported = [s for s in stats if s.name in OF_READINGS | ANALYSIS_ONLY]
    reading = Reading(
        text=question,
        as_of=as_of,
        entities=entities,
        times=times,
        metric_phrases=metric_phrases,
        statistics=stats,
        groupings=groupings,
        rankings=rankings,
        form="value" if _answers_itself(stats) else _form(doc, comparison, entities, vocab),
        analysis=AnalysisRequest(
            charts=charts,
            statistics=reported,
            report=report,
            comparison=comparison,
            answered=answered,
            declined=declined,
            over_readings=over,
        ),
        units=units,
        time_unit=asked_in[1] if asked_in else None,
        unused=unused,
        out_of_scope=ScopeSpan(
            kind=beyond[0].name,
            message=beyond[0].message,
            hint=beyond[0].hint,
            **_quote(question, beyond[1], beyond[2]),
        )
        if beyond
        else None,
    )
    retrieval = _retrieval(reading)
    if _compares_no_figure(reading, retrieval):
        # 'which of nodes 12 and 13 drew more power': raw readings name no winner; the mean is
        # the figure a comparison of two series states (and the answer says it was chosen)
        reading = reading.model_copy(update={"analysis": reading.analysis.model_copy(
            update={"compared_on_mean": True})})  # fmt: skip
        retrieval = _retrieval(reading, f"{reading.retrieval_text()} on average")
    return reading.model_copy(update={"retrieval": retrieval})


def _compares_no_figure(reading: Reading, said: RetrievalReading) -> bool:
    """A comparison of telemetry with nothing to compare by: no statistic, ranking, grouping
    or chart (a chart of the series is its own comparison), and a metric named."""
    return (reading.form == "compare" and not reading.statistics and not reading.rankings
            and not reading.groupings and not reading.analysis.charts
            and said.intent.kind == "metric" and said.entity_problem is None)  # fmt: skip


def check_reading(reading: Reading) -> None:
    """A Reading made elsewhere (sent over MCP, a model's) is held to what the reader
    guarantees: every span quotes the question, the rules' part names only entities the
    machine has, and its spans lie in its own words (``UsageError`` names the first fault)."""
    check_quotes(reading)
    said = reading.retrieval
    if said is None:
        return
    entities_from_dict(said.entities.to_dict())
    for start, end in (*said.entities.spans, *said.time.spans):
        if not 0 <= start <= end <= len(said.text):
            raise UsageError(f"a span of the reading's retrieval words ({start}-{end}) lies "
                             "outside them", hint="read the question again")  # fmt: skip


def with_rules(reading: Reading) -> Reading:
    """The Reading with its rules' part: a Reading made without it (by a model, or a test of the
    coordinator) is read again from its text; one that has it is returned as it is."""
    return reading if reading.retrieval is not None else read(reading.text, reading.as_of)


def rules_of(reading: Reading) -> RetrievalReading:
    """The rules' part of a Reading (``with_rules``)."""
    said = with_rules(reading).retrieval
    assert said is not None  # read() always makes it
    return said


def completed(reading: Reading, words: str) -> Reading:
    """The question with a reply that completes it ('show me node 12' -> 'inlet temperature
    yesterday', a threshold 'above 80 %'), read as one question."""
    return read(f"{reading.text} {words}", reading.as_of)


def _retrieval(reading: Reading, words: str | None = None) -> RetrievalReading:
    """The retrieval's words (analysis words out, gaps closed, typos read) and what the rules
    find in them."""
    words = reading.retrieval_text() if words is None else words
    said = with_synonyms(" ".join(words.split()))
    text, typos = spelling.corrected(with_qualities(said, named=_names_quantity(reading)))
    text = with_job_keyword(numerals(text))
    problem = None
    try:
        found = extract_entities(text)
    except UsageError as err:
        found, problem = Entities(), Problem(message=err.message, hint=err.hint)
    # 'really hot', 'way too much': a vague level names no metric (stage 1 asks its threshold)
    levels = vague_spans(text)
    chunking, named = named_metrics(chunk(masked(text, levels), found), load_catalogue())
    energy = [s for s in reading.analysis.statistics if s.name in INTEGRALS]
    if energy and not chunking.phrases:
        # 'energy used by rack 7': the energy of what draws it, the power its readings hold
        return _retrieval(reading, _naming_power(reading, energy[0]))
    core = text[: chunking.core_end]  # the analysis tail holds no form cue
    core_words = form.words_of(masked(core, [*found.spans, *time_spans(core)]))
    asked = form.read_form(core_words)
    if form.asks_which_one(core_words) and len(found.nodes) > 1 and not found.racks:
        asked = replace(asked, lists_nodes=True)  # 'node 398 or node 399 …? which one'
    asked = replace(asked, level=level_statistic(masked(text, time_spans(text))))
    if _answers_itself(reading.analysis.statistics):
        asked = replace(FormCues(), level=asked.level)
    return RetrievalReading(text=text, typos=list(typos), entities=found,
                            entity_problem=problem, time=parse_time(text, as_of=reading.as_of),
                            chunking=chunking, named=named,
                            conjoined=sorted(conjoined(text, chunking.phrases)),
                            intent=classify_intent(text, chunking),
                            subqueries=decompose(chunking),
                            psu=psu_refs(text), form=asked, vague=vague_level(text),
                            value_filter=has_value_filter(text),
                            threshold_units=sorted(threshold_units(text)),
                            charts=sorted({c.kind for c in reading.analysis.charts if c.kind}),
                            compares=reading.form == "compare",
                            time_spans=time_spans(text), job_state_spans=job_state_spans(text),
                            threshold_spans=threshold_spans(text),
                            vague_spans=levels,
                            unit_note_spans=unit_note_spans(text))  # fmt: skip


def _names_quantity(reading: Reading) -> bool:
    """Whether the question names a quantity besides its quality words ('inlet temp' beside
    'warmest'; 'was it windier' names none)."""
    qualities = load_qualities()
    if any(p.text.lower() not in qualities for p in reading.metric_phrases):
        return True
    # '5 busiest users (most jobs running)': the jobs are the quantity, not a utilisation
    return any(w.strip("(),.;:?!") in ("job", "jobs") for w in reading.text.lower().split())


def _naming_power(reading: Reading, energy: StatisticSpan) -> str:
    """The retrieval's words with the power where the energy words were: a node's power where
    nodes, racks or jobs are named ('energy used by rack 7'), else 'power', which the grounding
    asks about."""
    blanked = reading.retrieval_text()
    nodes = any(e.kind in ("node", "rack", "job", "all_nodes") for e in reading.entities)
    return f"{blanked[: energy.start]} {'node power' if nodes else 'power'} {blanked[energy.end :]}"


def read_now(question: str, as_of: datetime | None) -> Reading:
    """``read`` with the reference time defaulting to now (a ``Reader``)."""
    return read(question, as_of or datetime.now(UTC))


# --- spans from characters and tokens ---------------------------------------------------------


def _chars(doc: Doc, m: Match) -> tuple[int, int]:
    return doc[m.start].idx, doc[m.end - 1].idx + len(doc[m.end - 1].text)


def _span(doc: Doc, m: Match) -> Span:
    start, end = _chars(doc, m)
    return Span(start=start, end=end, text=doc.text[start:end])


def _quote(text: str, start: int, end: int) -> dict[str, Any]:
    return {"start": start, "end": end, "text": text[start:end]}


# --- entities and times -------------------------------------------------------------------------


def _entities(text: str) -> list[EntitySpan]:
    try:
        found = extract_entities(text)
    except UsageError:
        return []  # an impossible id is the retriever's to refuse, with its hint
    return [_entity_span(text, found, start, end) for start, end in found.spans]


def _entity_span(text: str, found: Entities, start: int, end: int) -> EntitySpan:
    words = text[start:end].lower()
    digits = {w.strip(",.;") for w in words.replace("-", " ").split()}
    for kind, ids in (("node", found.nodes), ("rack", found.racks), ("job", found.jobs),
                      ("user", found.users), ("gpu", found.gpus), ("cpu", found.cpus)):  # fmt: skip
        hit = [i for i in ids if str(i) in digits or f"{kind}{i}" in words.replace(" ", "")]
        if hit and kind in words.replace("-", ""):
            return EntitySpan(kind=kind, ids=list(hit), **_quote(text, start, end))
    if found.all_nodes and "node" in words:
        return EntitySpan(kind="all_nodes", **_quote(text, start, end))
    if found.devices and any(key.lower() in words for _, key in found.devices):
        keys: list[int | str] = [key for _, key in found.devices if key.lower() in words]
        return EntitySpan(kind="device", ids=keys, **_quote(text, start, end))
    if found.weather:
        return EntitySpan(kind="weather", **_quote(text, start, end))
    return EntitySpan(kind="system", **_quote(text, start, end))


def _times(text: str, as_of: datetime) -> list[TimeSpan]:
    spans = time_spans(text)
    if not spans:
        return []
    parsed = parse_time(text, as_of=as_of)
    windows = list(parsed.windows) if parsed.status == "ok" else []
    out = []
    for start, end in spans:
        phrase = text[start:end]
        win = next((w for w in windows if w.text and (w.text in phrase or phrase in w.text)), None)
        out.append(TimeSpan(window_start=win.start if win else None,
                            window_end=win.end if win else None,
                            **_quote(text, start, end)))  # fmt: skip
    return out


# --- statistics, charts, groupings, rankings ------------------------------------------------


def _statistics(doc: Doc, phrases: Sequence[Match], shapes: Sequence[Match],
                vocab: Vocabulary) -> list[StatisticSpan]:  # fmt: skip
    out: list[StatisticSpan] = []
    text = doc.text
    for m in shapes:
        if m.label not in ("PCT_P", "PCT_NTH"):
            continue
        head = doc[m.start].text.lower().lstrip("p")
        digits = "".join(ch for ch in head if ch.isdigit() or ch == ".")
        start, end = _chars(doc, m)
        out.append(StatisticSpan(name="percentile", p=float(digits),
                                 **_quote(text, start, end)))  # fmt: skip
    taken = {(s.start, s.end) for s in out}
    for m in phrases:
        if not m.label.startswith("STAT:"):
            continue
        start, end = _chars(doc, m)
        if any(a <= start < b for a, b in taken):
            continue  # '95th percentile': the shape already holds 'percentile'
        name = cast(Statistic, m.label.split(":", 1)[1])
        window = None
        if name == "rolling":  # its window's length ('10-min rolling') is never a time window
            start, end, window = _rolling_window(doc, m, shapes, start, end)
        if name == "std" and m.start and _number(doc[m.start - 1].text) is not None:
            name = "anomalies"  # '3 std dev above the mean': a distance, not the statistic
        if name == "anomalies":
            out.append(_anomalies(doc, m, vocab))
            continue
        if name == "profile":
            week = any("week" in t.lower_ for t in doc[m.start : m.end])
            out.append(StatisticSpan(name=name, cycle="weekday" if week else "hour_of_day",
                                     **_quote(text, start, end)))  # fmt: skip
            continue
        out.append(StatisticSpan(name=name, window_minutes=window, **_quote(text, start, end)))
    inside = [
        s for s in out if any(o is not s and o.start <= s.start and s.end <= o.end for o in out)
    ]
    kept = sorted((s for s in out if s not in inside), key=lambda s: s.start)
    said = next((s for s in kept if s.name == "anomalies" and s.k is not None), None)
    if said is not None:  # 'spikes … more than 2.5 sigma from its mean': one request, k 2.5
        kept = [s.model_copy(update={"k": said.k, "side": said.side})
                if s.name == "anomalies" else s for s in kept]  # fmt: skip
    if any(s.name == "energy" for s in kept):
        # 'how much energy did rack 12 use in total': the total is the energy's, never a sum of
        # the power readings
        kept = [s.model_copy(update={"name": "energy"}) if s.name == "sum" else s for s in kept]
    return kept


_SELF_ANSWERING = frozenset({"energy", "anomalies", "profile"})


def _one_day(stats: Sequence[StatisticSpan], times: Sequence[TimeSpan]) -> StatisticSpan | None:
    """The hour-of-day profile of a question whose every window lies within one day."""
    profile = next((s for s in stats if s.name == "profile" and s.cycle == "hour_of_day"), None)
    windows = [(t.window_start, t.window_end) for t in times if t.window_start and t.window_end]
    if profile is None or not windows:
        return None
    start, end = min(w[0] for w in windows), max(w[1] for w in windows)
    return profile if end - start <= timedelta(days=1) else None


def _answers_itself(stats: Sequence[StatisticSpan]) -> bool:
    """An energy or an anomaly count answers 'how many kWh', 'how many (readings) and which
    nodes' itself: the retrieval returns the readings, never a count or a list of its own."""
    return any(s.name in _SELF_ANSWERING for s in stats)


_CELLS = frozenset({"cell", "cells"})  # a heatmap's: a day and an hour, a rack and an hour
_ASKING = frozenset({"how", "which", "what"})
_ASKED = {"how": frozenset({"many", "much"}),
          "which": frozenset({"node", "nodes", "rack", "racks", "ones", "one", "hosts", "series",
                              "hour", "hours", "weekday", "weekdays", "day", "days",
                              *_CELLS}),
          "what": frozenset({"nodes", "racks", "hosts", "hour", "hours", "weekday",
                             "day"})}  # fmt: skip


_SUPERLATIVE = frozenset({"most", "least", "peak"})
_CYCLES = frozenset({"hour", "hours", "weekday", "weekdays", "day", "days", "time", *_CELLS})
_WHEN_VERBS = frozenset({"was", "is", "were", "did"})
_FIGURE_WORDS = frozenset({"value", "figure", "mean", "average", "level", "reading"})


def _joins(doc: Doc, j: int, nouns: frozenset[str]) -> bool:
    """The hyphen of 'rack-hour': two group nouns made one."""
    return doc[j].text == "-" and j + 1 < len(doc) and doc[j + 1].lower_ in nouns


def _superlative(word: str) -> bool:
    """'hottest', 'busiest', 'highest': a one-word superlative (not 'best', 'rest', 'test')."""
    quality = load_qualities().get(word)
    if quality is not None:
        return quality.degree == "superlative"
    return word in ("highest", "lowest", "largest", "smallest", "biggest", "peak")


_LINKS = frozenset({"'s", "’s", "is", "was", "runs", "ran", "got", "gets", "had", "has"})
_GROUP_NOUNS = {
    "hour": ("hour", "hours", "time"), "day": ("day", "days"), "rack": ("rack", "racks"),
    "node": ("node", "nodes"), "user": ("user", "users"), "gpu": ("gpu", "gpus"),
}  # fmt: skip


def _answered(
    doc: Doc, stats: Sequence[StatisticSpan], *, series: frozenset[str] = frozenset()
) -> list[Span]:
    """'how many', 'which nodes': the form words a self-answering statistic answers (an anomaly
    count says how many and on which nodes), so the retrieval returns readings, not a count.
    ``series``: the nouns of a drawn grouping; then only 'which hour was quietest', 'which rack
    runs warmest', the extreme of the drawn groups (its answer states the highest and lowest)."""
    if not (series or _answers_itself(stats)):
        return []
    out = []
    taken = [(s.start, s.end) for s in stats]
    profile = bool(series) or any(s.name == "profile" for s in stats)
    for i, tok in enumerate(doc[:-1]):
        first, last, whole = i, None, False
        if series and tok.lower_ == "the" and _superlative(doc[i + 1].lower_):
            # 'the hottest rack-hour's value': the extreme cell of the groups drawn
            j = i + 2
            while j < len(doc) and (doc[j].lower_ in series or _joins(doc, j, series)):
                j += 1
            if j == i + 2:
                continue
            last = j - 1
            if j < len(doc) and doc[j].lower_ in ("'s", "’s"):
                last = j + (j + 1 < len(doc) and doc[j + 1].lower_ in _FIGURE_WORDS)
            start, end = doc[first].idx, doc[last].idx + len(doc[last].text)
            if not any(a < end and start < b for a, b in taken):
                out.append(Span(**_quote(doc.text, start, end)))
                taken.append((start, end))
            continue
        # 'hottest cell?' of a heatmap drawn per rack per hour: the grid's highest cell
        cell = bool(series) and _superlative(tok.lower_) and doc[i + 1].lower_ in _CELLS
        if series and not cell and not (tok.lower_ in ("which", "what", "when") and (
                doc[i + 1].lower_ in series or tok.lower_ == "when")):  # fmt: skip
            continue
        if profile and tok.lower_ == "when" and doc[i + 1].lower_ in _WHEN_VERBS:
            # 'when was the most idle', 'when was it warmest': the bucket the answer states
            j = i + 2 + (i + 2 < len(doc) and doc[i + 2].lower_ in ("the", "it"))
            if j < len(doc) and (doc[j].lower_ in _SUPERLATIVE or doc[j].lower_.endswith("est")):
                last = j + (doc[j].lower_ in _SUPERLATIVE and j + 1 < len(doc)
                            and doc[j + 1].is_alpha)  # fmt: skip
                whole = True
        elif tok.lower_ in _ASKING and doc[i + 1].lower_ in (series or _ASKED[tok.lower_]):
            last = i + 1
            while series and last + 2 < len(doc) and _joins(doc, last + 1, series):
                last += 2  # 'which node-hour ran hottest': a cell of the grid drawn
        elif profile and (tok.lower_ in _SUPERLATIVE or tok.lower_.endswith("est")):
            # 'most humid weekday', 'warmest hour': the profile's highest, which it states
            ahead = [j for j in (i + 1, i + 2) if j < len(doc) and doc[j].lower_ in _CYCLES]
            last = ahead[0] if ahead else None
        if last is None:
            continue
        if whole:
            pass
        elif last + 1 < len(doc) and doc[last + 1].lower_ in _LINKS:
            last += 1  # "which hour's warmest"
        if (
            not whole
            and profile
            and last + 1 < len(doc)
            and (doc[last + 1].lower_.endswith("est") or doc[last + 1].lower_ in _SUPERLATIVE)
        ):
            last += 1  # the superlative the profile's highest answers
            if doc[last].lower_ in _SUPERLATIVE and last + 1 < len(doc) and doc[last + 1].is_alpha:
                last += 1  # 'most idle'
        elif series and not whole and not cell:
            continue  # 'which hour' alone asks nothing of the series' extremes
        start, end = doc[first].idx, doc[last].idx + len(doc[last].text)
        if not any(a < end and start < b for a, b in taken):
            out.append(Span(**_quote(doc.text, start, end)))
            taken.append((start, end))
    return out


def _names_a_line(doc: Doc, m: Match) -> bool:
    """'line 1 current', 'lines 2 and 3': an electrical line (a panel's phase), not a chart."""
    return (m.end - m.start == 1 and doc[m.start].lower_ in ("line", "lines")
            and m.end < len(doc) and doc[m.end].like_num)  # fmt: skip


def _number(word: str) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


def _anomalies(doc: Doc, m: Match, vocab: Vocabulary) -> StatisticSpan:
    """'more than 3 std devs above the mean', '2 sigma off its own mean', 'outliers': k (3 when
    none is said), the side of the mean, and every word saying them, as one span."""
    words = vocab.anomaly
    first, last = m.start, m.end
    k: float | None = None
    if first and (number := _number(doc[first - 1].text)) is not None and number > 0:
        k, first = number, first - 1
    while first and doc[first - 1].lower_ in words.before:
        first -= 1
    side = None
    if last < len(doc) and (found := words.side_of(doc[last].lower_)) is not None:
        side, at = found, last + 1
        if at < len(doc) and doc[at].lower_ == "from":  # 'away from'
            at += 1
        # the mean's words only up to a word that names it: 'above the mean', not 'above the 3'
        last = at
        for j in range(at, min(at + 6, len(doc))):
            if doc[j].lower_ in words.mean_heads:
                last = j + 1
                break
            if doc[j].lower_ not in words.mean:
                break
    start, end = _chars(doc, Match(m.label, first, last))
    return StatisticSpan(name="anomalies", k=k, side=side or "both",
                         **_quote(doc.text, start, end))  # fmt: skip


def _rolling_window(doc: Doc, m: Match, shapes: Sequence[Match], start: int, end: int
                    ) -> tuple[int, int, float | None]:  # fmt: skip
    for w in shapes:
        if w.label != "WINDOW_LEN" or not (w.end == m.start or w.start in (m.end, m.end + 1)):
            continue
        words = "".join(t.text.lower() for t in doc[w.start : w.end]).replace("-", "")
        number = float("".join(ch for ch in words if ch.isdigit() or ch == "."))
        unit = words.lstrip("0123456789.")
        minutes = number * 60 if unit.startswith("h") else number / 60 if unit.startswith(
            "s") else number  # fmt: skip
        a, b = _chars(doc, w)
        return min(start, a), max(end, b), minutes
    return start, end, None


def _charts(doc: Doc, verbs: frozenset[str], found: Sequence[Match]) -> list[ChartRequest]:
    """Chart phrases near one another are one chart; two different named kinds are two."""
    groups: list[list[Match]] = []
    for m in sorted(found, key=lambda m: m.start):
        if m.label.startswith("CHART:histogram") and m.end < len(doc) and \
                doc[m.end].lower_ in ("unit", "units"):  # fmt: skip
            continue  # 'power distribution unit' is equipment
        if groups and m.start - groups[-1][-1].end <= _CLAUSE_GAP:
            kinds = {_kind(doc, g) for g in groups[-1]} | {_kind(doc, m)}
            if len(kinds - {None, "weak"}) <= 1:
                groups[-1].append(m)
                continue
        groups.append([m])
    out = []
    for group in _one_per_kind(doc, groups):
        named = _named_kind(doc, group)
        kind: ChartKind | None = cast(ChartKind, named) if named else (
            "line" if any(_kind(doc, m) == "weak" for m in group) else None)  # fmt: skip
        parts = [_span(doc, m) for m in group]
        start, end = parts[0].start, parts[-1].end
        out.append(ChartRequest(kind=kind, parts=parts, start=start, end=end,
                                text=doc.text[start:end],
                                in_clause=_in_clause(doc, group[0].start, verbs)))  # fmt: skip
    return out


def _named_kind(doc: Doc, group: Sequence[Match]) -> str | None:
    """The first chart kind a group of chart phrases names (not a bare verb like 'plot')."""
    return next((k for k in (_kind(doc, m) for m in group) if k not in (None, "weak")), None)


def _one_per_kind(doc: Doc, groups: list[list[Match]]) -> list[list[Match]]:
    """'plot job 7's power over its run as a line': one line chart, however far apart its words;
    a verb alone ('plot', 'visualise') is the named chart's wherever one is named, and two
    phrases of one kind are one chart."""

    kinds = {_named_kind(doc, g) for g in groups} - {None}
    merged: dict[str, list[Match]] = {}
    out: list[list[Match]] = []
    for group in groups:
        kind = _named_kind(doc, group) or (next(iter(kinds)) if len(kinds) == 1 else None)
        if kind is None:
            out.append(group)
        elif kind in merged:
            merged[kind].extend(group)
        else:
            merged[kind] = list(group)
            out.append(merged[kind])
    return [sorted(g, key=lambda m: m.start) for g in out]


_BOUNDARY = frozenset({",", ";", "and", "then"})


def _in_clause(doc: Doc, first: int, verbs: frozenset[str]) -> bool:
    """Whether the chart's clause opens with an analysis verb after 'and', a comma or 'then',
    with words of the question before it ('… and create a line plot'; not 'Plot the power …')."""
    i = first
    while i > 0 and doc[i - 1].lower_ not in _BOUNDARY:
        i -= 1
    if i == 0:
        return False
    while i < first and doc[i].lower_ in ("also", "then", "and"):
        i += 1
    return doc[i].lower_ in verbs and any(not t.is_punct for t in doc[: i - 1])


def _kind(doc: Doc, m: Match) -> str | None:
    if m.label == "UNSPEC":
        return None
    kind = m.label.split(":", 1)[1]
    if kind == "line" and doc[m.start : m.end].text.lower() in _WEAK_LINE:
        return "weak"
    return kind


_GRID_X = frozenset({"x", "×"})  # 'node x hour': the axes of a grid


def _groupings(doc: Doc, shapes: Sequence[Match]) -> list[GroupingSpan]:
    out = []
    for m in shapes:
        if m.label != "GROUP":
            continue
        words = [t.lower_ for t in doc[m.start : m.end]]
        if words[0] == "by" and m.end < len(doc) and doc[m.end].like_num:
            continue  # 'drawn by node 900': an entity, not a grouping
        if len(words) == 3 and words[1] == "by" and words[0].rstrip("s") != words[2].rstrip("s"):
            continue  # 'node by rack' says no one grouping
        word = (words[0] if words[-1] in _GRID_X else words[-1]).removeprefix("per-")
        by = bucket_of(word) or (word if word == "qos" else word.rstrip("s"))
        start, end = _chars(doc, m)
        out.append(GroupingSpan(by=by, **_quote(doc.text, start, end)))
    return out


def _rankings(doc: Doc, shapes: Sequence[Match]) -> list[RankingSpan]:
    out = []
    for m in shapes:
        if m.label != "RANK":
            continue
        words = [t.lower_ for t in doc[m.start : m.end]]
        head, _, tail = words[0].partition("-")
        k = count_word(tail or (words[1] if len(words) > 1 else "")) or 1
        by = _by_words(doc, m.end)
        start, end = _chars(doc, m)
        out.append(RankingSpan(direction="top" if head == "top" else "bottom", k=k, by=by,
                               **_quote(doc.text, start, end)))  # fmt: skip
    for tok in doc:  # '3 highest nodes', 'lowest 5'
        direction = rank_direction(tok.text)
        if direction is None or tok.lower_ in ("top", "bottom"):
            continue
        near = [doc[i] for i in (tok.i - 1, tok.i + 1) if 0 <= i < len(doc)]
        count = next((count_word(t.text) for t in near if count_word(t.text)), None)
        if count is not None and count < 1000:
            out.append(
                RankingSpan(
                    direction=cast(Literal["top", "bottom"], direction),
                    k=count,
                    by=_by_words(doc, tok.i + 1),
                    **_quote(doc.text, tok.idx, tok.idx + len(tok.text)),
                )
            )
    return out


def _by_words(doc: Doc, after: int) -> str | None:
    """The words after the first 'by' of the clause: what a ranking ranks by."""
    for i in range(after, min(after + 6, len(doc))):
        if doc[i].is_punct and doc[i].text != "-":
            return None
        if doc[i].lower_ == "by":
            words = []
            for t in doc[i + 1 : i + 5]:
                if t.is_punct or t.lower_ in ("on", "in", "for", "during", "from", "between",
                                              "and", "over", "at"):  # fmt: skip
                    break
                words.append(t.text)
            return " ".join(words) or None
    return None


# --- form, metric phrases, unused words -------------------------------------------------------


def _form(doc: Doc, comparison: Sequence[Span], entities: Sequence[EntitySpan],
          vocab: Vocabulary) -> Form:  # fmt: skip
    words = [t.lower_ for t in doc if not t.is_punct]
    if not words:
        return "value"
    if words[:2] == ["how", "many"]:
        return "how_many"
    named = [i for e in entities if e.kind in ("node", "rack", "job", "user") for i in e.ids]
    # 'user 28190 or user 28271: who had more jobs …': the entities first, then who did more
    # (a comparative before 'than' is a threshold: 'more than 300 W')
    compared = {w for w, after in zip(words, [*words[1:], ""], strict=True)
                if w in vocab.comparatives and after != "than"}  # fmt: skip
    asked = "who" in words or "which" in words
    if len(named) >= 2 and (comparison or (asked and compared)):
        return "compare"
    if "which" in words[:3] or words[0] in ("list", "who"):
        return "which"
    if words[0] in _YES_NO:
        return "yes_no"
    return "value"


def _comparatives(doc: Doc, claimed: Sequence[bool], vocab: Vocabulary,
                  entities: Sequence[EntitySpan]) -> list[Span]:  # fmt: skip
    """'which window was busier', 'which ran warmer': a comparative a few words after 'which'
    or before 'than' and an entity (not 'more than 300 W', a threshold), unclaimed by anything
    else."""
    out = []
    for t in doc:
        if t.lower_ not in vocab.comparatives or claimed[t.idx]:
            continue
        against = _than_entity(doc, t.i, entities)
        after = doc[t.i + 1 : t.i + 2]
        if after.text.lower() == "than" and not against:
            continue
        if against or any(w.lower_ in ("which", "whether") for w in doc[max(t.i - 4, 0) : t.i]):
            out.append(Span(start=t.idx, end=t.idx + len(t.text), text=t.text))
    return out


def _than_entity(doc: Doc, i: int, entities: Sequence[EntitySpan]) -> bool:
    """'did node 900 use more gpu power than node 920': a comparative whose 'than' (a few words
    on) is followed by a named entity sets two entities side by side ('more than 300 W' is a
    threshold)."""
    for w in doc[i + 1 : i + 7]:
        if w.lower_ == "than":
            ahead = doc[w.i + 1 : w.i + 3]
            return any(e.start <= x.idx < e.end for x in ahead for e in entities)
    return False


def _leftovers(doc: Doc, claimed: Sequence[bool]) -> tuple[list[Span], list[Span]]:
    """(metric phrases, unused words): runs of the catalogue's words nothing else claimed, and
    content words known to no vocabulary."""
    known = load_catalogue().vocabulary
    lexicon = load_lexicon().words
    phrases: list[Span] = []
    unused: list[Span] = []
    run: list[Any] = []

    def close() -> None:
        while run and run[-1].lower_ in lexicon:
            run.pop()  # 'utilisation for': the phrase ends on the catalogue's own word
        if run and not all(t.like_num for t in run):
            start, end = run[0].idx, run[-1].idx + len(run[-1].text)
            phrases.append(Span(start=start, end=end, text=doc.text[start:end]))
        run.clear()

    for tok in doc:
        if any(claimed[tok.idx : tok.idx + len(tok.text)]) or tok.is_punct or tok.is_space:
            close()
            continue
        low = tok.lower_
        if low not in known and low not in lexicon:
            low = tok.norm_  # 'tempreture', 'lowst': the known word a typo misses (``doc``)
        if low in known and low not in lexicon:
            run.append(tok)
            continue
        if low in known and run:
            run.append(tok)  # 'power of' stays inside a phrase only when a metric word follows
            continue
        close()
        if tok.is_alpha and low not in lexicon and low not in known:
            unused.append(Span(start=tok.idx, end=tok.idx + len(tok.text), text=tok.text))
    close()
    return phrases, unused


def _units_said(doc: Doc, claimed: Sequence[bool], phrases: Sequence[Span]) -> list[Span]:
    """'outdoor air pressure …, with the lowest and highest hPa', 'wind speed on 20 june, m/s':
    a unit of the catalogue's, alone and after no number (that is a threshold's, '300 W'),
    beside a metric phrase that names the quantity (alone, 'node 900 watts', the unit names it)."""
    text = doc.text
    said = [Span(start=m.start(), end=m.end(), text=m.group(0))
            for m in _unit_pattern().finditer(text) if not any(claimed[m.start() : m.end()])
            and not re.search(r"\d\s*$", text[: m.start()])]  # fmt: skip
    return said if any(not _inside_any(p, said) for p in phrases) else []


def _time_unit_said(text: str, claimed: Sequence[bool]) -> tuple[Span, TimeUnit] | None:
    """'with the median of each in minutes', 'queue waits (hrs)': the unit durations are asked
    in, after 'in' or 'as' or alone in parentheses (the last said wins); never after a number
    ('in 10 minutes' is a time)."""
    found = None
    for m in _time_unit_pattern().finditer(text):
        if not any(claimed[m.start() : m.end()]):
            word = (m.group("after") or m.group("alone")).lower()
            unit = cast(TimeUnit, load_time_units()[word])
            found = (Span(start=m.start(), end=m.end(), text=m.group(0)), unit)
    return found


@functools.cache
def _time_unit_pattern() -> re.Pattern[str]:
    words = "|".join(re.escape(w) for w in sorted(load_time_units(), key=len, reverse=True))
    return re.compile(rf"\b(?:in|as)\s+(?P<after>{words})\b(?!\s*\d)|\((?P<alone>{words})\)", re.I)


def _before_units(phrase: Span, units: Sequence[Span]) -> Span | None:
    """A metric phrase without the unit a run of catalogue words took in ('wind speed in m' of
    'wind speed in m/s'); None when the unit is all it was."""
    cut = min((u.start for u in units if phrase.start <= u.start < phrase.end), default=None)
    if cut is None:
        return phrase
    words = phrase.text[: cut - phrase.start].rstrip()
    for tail in (" in", " of", " at"):  # the link the unit hung on
        words = words.removesuffix(tail)
    return Span(start=phrase.start, end=phrase.start + len(words), text=words) if words else None


@functools.cache
def _unit_pattern() -> re.Pattern[str]:
    words = sorted(_unit_words(), key=len, reverse=True)
    return re.compile(rf"(?<![\w/])(?:{'|'.join(map(re.escape, words))})(?![\w/])", re.I)


@functools.cache
def _unit_words() -> frozenset[str]:
    """The catalogue's units of two letters or more that are no English word ('hPa', 'kW',
    'MWh'; not 'min', 'Pa', 'count')."""
    english = spelling.english()
    return frozenset(u.lower() for m in load_catalogue() if len(u := m.unit) >= 2
                     and u.replace("/", "").isalpha() and u.lower() not in english)  # fmt: skip


def _after_any(stat: StatisticSpan, words: Iterable[Span]) -> bool:
    return any(w.end <= stat.start for w in words)


def _inside_any(span: Span, others: Iterable[Span]) -> bool:
    return any(o.start <= span.start and span.end <= o.end for o in others)
