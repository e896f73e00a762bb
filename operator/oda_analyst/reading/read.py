"""``read(question, as_of, lake_facts) -> Reading``: the one place a question's text is read.

One pass over the tokens labels them: entity and time spans first (ids and windows), then the
vocabulary's phrases and shapes (charts, statistics, report words, comparisons, percentiles,
rankings, groupings), then metric phrases (runs of the catalogue's words nothing else claimed),
and last the words nothing could use. Where two labels want the same words, the earlier kind
keeps them: an id or a window is never a chart, and a chart phrase is never a metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
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
from oda_analyst.reading.rules.entities import entities_from_dict, extract_entities
from oda_analyst.reading.rules.intent import classify_intent
from oda_analyst.reading.rules.names import named_metrics
from oda_analyst.reading.rules.numerals import numerals
from oda_analyst.reading.rules.stray import conjoined
from oda_analyst.reading.rules.timeparse import parse_time, time_spans
from oda_analyst.reading.rules.vague import vague_level
from oda_analyst.reading.scope import load_scope, out_of_scope
from oda_analyst.reading.types import Entities
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
    stats = _statistics(doc, phrases, shapes)
    for s in stats:
        take(s.start, s.end)
    named = [m for m in phrases if m.label.startswith(("CHART:", "UNSPEC"))]
    charts = _charts(doc, vocab.clause_verbs, named)
    for c in charts:
        for p in c.parts:
            take(p.start, p.end)
    report = [_span(doc, m) for m in phrases if m.label == "REPORT"]
    comparison = [_span(doc, m) for m in phrases if m.label == "COMPARE"]
    for word in (*report, *comparison):
        take(word.start, word.end)
    # 'for every node' names all nodes and groups by node: a grouping may share an entity's
    # or a time's words ('each day from 1 to 5 June'), never an analysis phrase's
    found = _groupings(doc, shapes)
    groupings = [g for g in found if not _inside_any(g, stats)
                 and not _inside_any(g, [o for o in found if o != g])]  # fmt: skip
    for g in groupings:
        take(g.start, g.end)
    rankings = [r for r in _rankings(doc, shapes) if free(r.start, r.start + 1)]
    for r in rankings:
        take(r.start, r.end)
    metric_phrases, unused = _leftovers(doc, claimed)
    beyond = out_of_scope(doc, load_scope())
    reported = [s for s in stats if s.name in ANALYSIS_ONLY or _after_any(s, report)]
    # 'p95 inlet temp across all nodes + histogram', 'which of nodes 12 and 13 drew more power on
    # average? line plot': the statistics are of the drawn readings, so one retrieval of the
    # readings serves both (a grouping or ranking keeps them the retrieval's: 'per rack')
    over = (not report and not groupings and not rankings
            and any(c.kind in READING_CHARTS for c in charts)
            and any(s.name in OF_READINGS for s in stats))  # fmt: skip
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
        form=_form(doc, comparison, entities, vocab),
        analysis=AnalysisRequest(
            charts=charts,
            statistics=reported,
            report=report,
            comparison=comparison,
            over_readings=over,
        ),
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
    return reading.model_copy(update={"retrieval": _retrieval(reading)})


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


def _retrieval(reading: Reading) -> RetrievalReading:
    """The retrieval's words (analysis words out, gaps closed, typos read) and what the rules
    find in them."""
    text, typos = spelling.corrected(" ".join(reading.retrieval_text().split()))
    text = numerals(text)
    problem = None
    try:
        found = extract_entities(text)
    except UsageError as err:
        found, problem = Entities(), Problem(message=err.message, hint=err.hint)
    chunking, named = named_metrics(chunk(text, found), load_catalogue())
    core = text[: chunking.core_end]  # the analysis tail holds no form cue
    asked = form.read_form(form.words_of(masked(core, [*found.spans, *time_spans(core)])))
    asked = replace(asked, level=level_statistic(masked(text, time_spans(text))))
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
                            time_spans=time_spans(text), job_state_spans=job_state_spans(text),
                            threshold_spans=threshold_spans(text),
                            unit_note_spans=unit_note_spans(text))  # fmt: skip


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


def _statistics(doc: Doc, phrases: Sequence[Match], shapes: Sequence[Match]
                ) -> list[StatisticSpan]:  # fmt: skip
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
        out.append(StatisticSpan(name=name, window_minutes=window, **_quote(text, start, end)))
    inside = [
        s for s in out if any(o is not s and o.start <= s.start and s.end <= o.end for o in out)
    ]
    return sorted((s for s in out if s not in inside), key=lambda s: s.start)


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
    for group in groups:
        seen = [_kind(doc, m) for m in group]
        named = [k for k in seen if k not in (None, "weak")]
        kind: ChartKind | None = cast(ChartKind, named[0]) if named else (
            "line" if "weak" in seen else None)  # fmt: skip
        parts = [_span(doc, m) for m in group]
        start, end = parts[0].start, parts[-1].end
        out.append(ChartRequest(kind=kind, parts=parts, start=start, end=end,
                                text=doc.text[start:end],
                                in_clause=_in_clause(doc, group[0].start, verbs)))  # fmt: skip
    return out


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


def _groupings(doc: Doc, shapes: Sequence[Match]) -> list[GroupingSpan]:
    out = []
    for m in shapes:
        if m.label != "GROUP":
            continue
        words = [t.lower_ for t in doc[m.start : m.end]]
        by = bucket_of(words[-1]) or words[-1].removeprefix("per-").rstrip("s")
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
    asks_which = "which" in words[:3] or words[0] == "who"
    if len(named) >= 2 and (comparison or (asks_which and vocab.comparatives & set(words))):
        return "compare"
    if "which" in words[:3] or words[0] in ("list", "who"):
        return "which"
    if words[0] in _YES_NO:
        return "yes_no"
    return "value"


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


def _after_any(stat: StatisticSpan, words: Iterable[Span]) -> bool:
    return any(w.end <= stat.start for w in words)


def _inside_any(span: Span, others: Iterable[Span]) -> bool:
    return any(o.start <= span.start and span.end <= o.end for o in others)
