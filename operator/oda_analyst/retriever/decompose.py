"""Query decomposition (D of F = M∘P∘D∘I): metric phrases and context-preserving sub-queries.

``chunk(question, entities)`` finds the metric phrases of a question by rules:

- Entity and time text (``Entities.spans``, ``timeparse.time_spans``) is masked first, so
  ``nodes 900 and 920`` is never read as a conjunction of metrics. A masked GPU or CPU reference
  (``GPU-0``, ``all GPUs``, ``socket 1``) becomes the bare word ``gpu``/``cpu``: it still says which
  part of the node is meant, while its index travels in ``Entities``.
- The analysis tail (``and create a histogram of the temperature distribution``, ``, create …``,
  ``and plot …``) is cut: it talks about the result, not about what to retrieve.
- Task words, articles, prepositions and aggregations (``retrieve``, ``the``, ``for``,
  ``average``…) separate phrases; what is left are runs of content words. Runs joined only by
  ``and``/``,``/``&``/``or``/``as well as`` form a conjunction group.
- A run of device words only (``gpu``, ``cpu``) inside a group borrows the head of the group's
  last phrase (``gpu and cpu utilisation`` → ``gpu utilisation``, ``cpu utilisation``); after a
  phrase (``power of the GPU``) it qualifies that phrase (``gpu power``).
- A run that ends with an entity noun (``the big nodes``, ``top-3 longest single-node jobs``) is
  an entity reference, not a metric. When it carries a word that is not a known selector
  (``big``) it is reported as unresolved, so the caller can say it is not an entity.
- A run made only of job attributes (``users``) is a non-metric part (the job table answers it).

``decompose(chunking)`` then turns each phrase into a sub-query that keeps the entity, time and
scope context: the question (analysis tail cut) with the phrase's conjunction group replaced by
that one phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oda_analyst.retriever.entities import Entities
from oda_analyst.retriever.timeparse import time_spans


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOKEN = re.compile(
    r"(?P<conj>\bas\s+well\s+as\b)|(?P<word>[^\W_][\w'’]*(?:[-./][^\W_][\w'’]*)*)|(?P<punct>[,;:.!?()&/])"
)
CONJ_WORDS = frozenset({"and", "or", "plus", ",", "&", "/"})
ARTICLES = frozenset({"the", "a", "an", "their", "its", "his", "her", "my", "our", "each"})
FILLER = _wordset(
    """retrieve get fetch show give list display find tell pull extract query read see
    please me us i we you can could would will what which when where who how is was were are be been
    being there do does did have has had of for on in at from to between over during by with per
    within across under into about all every any both than that this these those them they site
    average avg mean median minimum maximum min max peak sum std deviation standard coefficient
    variation distribution trend evolution profile series values value readings reading data
    measurements measurement daily hourly weekly monthly time whole entire full duration lifetime
    run runtime ran running executed execute submitted consumed used using recorded measured
    compute calculate determine obtain correlation correlate compared comparing versus vs level
    plugin metric metrics sensor sensors collected many much day days hour hours week weeks month
    months year years morning afternoon evening night minute minutes today yesterday above below
    greater less higher lower more fewer exceeding exceeds exceeded c degrees celsius w watts kw
    percent"""
) - {"reading", "readings"}  # kept: 'flux capacitor reading' must stay a phrase to be judged
ANALYSIS_VERBS = _wordset(
    """plot create make draw visualise visualize compare report produce generate build render chart
    summarise summarize export save graph histogram then"""
)
# Parts of a node: they qualify a quantity ('power of the PSU' -> 'psu power').
DEVICE_WORDS = _wordset(
    """gpu gpus cpu cpus socket sockets processor processors psu psus fan fans dimm dimms"""
)
# Device words are left out: 'system cpu' is a metric phrase, not an entity reference.
ENTITY_NOUNS = _wordset(
    """node nodes rack racks job jobs user users system systems cluster machine machines server
    servers host hosts room partition partitions"""
)
SELECTOR_WORDS = _wordset(
    """top bottom longest shortest largest smallest first last single-node multi-node single multi
    compute gpu cpu idle allocated down running failed completed pending cancelled finished active
    all every each these those same other"""
)
JOB_ATTRIBUTES = frozenset(
    {"user", "users", "user id", "user ids", "job", "jobs", "job id", "job ids", "partition", "qos"}
)


@dataclass(frozen=True)
class Phrase:
    """One metric phrase and the character region of its conjunction group in the question."""

    text: str  # lower-case, one space between words; device words first when attached
    start: int  # the phrase's own run
    end: int
    group_start: int  # the whole conjunction group it belongs to
    group_end: int


@dataclass(frozen=True)
class Chunking:
    """What the rules found in a question."""

    question: str
    core_end: int  # where the analysis tail starts (len(question) when there is none)
    phrases: tuple[Phrase, ...]
    non_metric_parts: tuple[str, ...] = ()
    entity_refs: tuple[str, ...] = ()  # job/node selections the rules recognise
    unresolved_entities: tuple[str, ...] = ()  # 'big nodes': looks like an entity, is none


@dataclass(frozen=True)
class SubQuery:
    """A context-preserving sub-query and the bare metric phrase to ground."""

    text: str
    phrase: str


@dataclass(frozen=True)
class _Tok:
    kind: str  # word | conj | punct | mask | device
    text: str
    start: int
    end: int


def _span_token(text: str, start: int, end: int) -> _Tok:
    low = text[start:end].lower()
    if re.search(r"\bgpus?\b", low) and not re.search(r"\bnodes?\b|\bjobs?\b", low):
        return _Tok("device", "gpu", start, end)
    if re.search(r"\b(?:cpus?|sockets?)\b", low) and not re.search(r"\bnodes?\b|\bjobs?\b", low):
        return _Tok("device", "cpu", start, end)
    return _Tok("mask", "", start, end)


def _tokens(question: str, entities: Entities) -> list[_Tok]:
    spans = sorted({*entities.spans, *time_spans(question)})
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    out: list[_Tok] = []
    pos = 0
    for s, e in [*merged, (len(question), len(question))]:
        for m in _TOKEN.finditer(question, pos, s):
            if m["conj"]:
                out.append(_Tok("conj", "and", m.start(), m.end()))
            elif m["word"]:
                word = m["word"].lower().replace("’", "'")
                kind = "conj" if word in CONJ_WORDS else "word"
                out.append(_Tok(kind, word, m.start(), m.end()))
            else:
                kind = "conj" if m["punct"] in CONJ_WORDS else "punct"
                out.append(_Tok(kind, m["punct"], m.start(), m.end()))
        if s < e:
            out.append(_span_token(question, s, e))
        pos = max(pos, e)
    return out


def _cut_tail(tokens: list[_Tok]) -> int:
    """Index of the first token of the analysis tail (len(tokens) when there is none)."""
    for i, tok in enumerate(tokens):
        if i == 0 or tok.kind != "word" or tok.text not in ANALYSIS_VERBS:
            continue
        prev = tokens[i - 1]
        if prev.kind == "conj" or prev.text in {"then", "to"}:
            j = i - 1
            while j > 0 and tokens[j - 1].kind == "conj":
                j -= 1
            return j
    return len(tokens)


def _runs(tokens: list[_Tok]) -> list[list[list[_Tok]]]:
    """Conjunction groups of runs of content words."""
    groups: list[list[list[_Tok]]] = []
    run: list[_Tok] = []
    joinable = False  # only conjunctions (and articles) since the last run
    for tok in tokens:
        content = tok.kind == "device" or (
            tok.kind == "word"
            and tok.text not in FILLER
            and tok.text not in ARTICLES
            and not tok.text.replace(".", "").isdigit()  # thresholds, not metric words
        )
        if content:
            if not run and not (joinable and groups):
                groups.append([])
            run.append(tok)
            continue
        if run:
            groups[-1].append(run)
            run = []
            joinable = True
        if tok.kind == "conj" or tok.text in ARTICLES:
            continue
        joinable = False
    if run:
        groups[-1].append(run)
    return groups


def _words(run: list[_Tok]) -> list[str]:
    return [t.text for t in run]


def _is_device_only(run: list[_Tok]) -> bool:
    return all(t.kind == "device" or t.text in DEVICE_WORDS for t in run)


def _head(words: list[str]) -> list[str]:
    """The words after the last device word ('cpu utilisation' -> ['utilisation'])."""
    last = max((i for i, w in enumerate(words) if w in DEVICE_WORDS), default=-1)
    return words[last + 1 :] or words[-1:]


def chunk(question: str, entities: Entities) -> Chunking:
    """Find the metric phrases, non-metric parts and entity references of ``question``."""
    tokens = _tokens(question, entities)
    cut = _cut_tail(tokens)
    core_end = tokens[cut].start if cut < len(tokens) else len(question)
    phrases: list[Phrase] = []
    non_metric: list[str] = []
    refs: list[str] = []
    unresolved: list[str] = []
    for group in _runs(tokens[:cut]):
        g_start, g_end = group[0][0].start, group[-1][-1].end
        metric_runs = []
        for run in group:
            words = _words(run)
            text = " ".join(words)
            if text in JOB_ATTRIBUTES:
                non_metric.append(text)
            elif words[-1] in ENTITY_NOUNS and not _is_device_only(run):
                extra = [w for w in words[:-1] if w not in SELECTOR_WORDS and not _selector(w)]
                (unresolved if extra else refs).append(text)
            else:
                metric_runs.append(run)
        heads = [r for r in metric_runs if not _is_device_only(r)]
        for run in metric_runs:
            words = _words(run)
            if _is_device_only(run):
                if not heads:
                    continue  # 'on GPU 0 of node 900' alone: an entity, handled below
                words = words + _head(_words(heads[-1]))
            phrases.append(Phrase(" ".join(words), run[0].start, run[-1].end, g_start, g_end))
        if not heads:
            _attach_devices(group, phrases, question)
    return Chunking(
        question=question,
        core_end=core_end,
        phrases=tuple(phrases),
        non_metric_parts=tuple(non_metric),
        entity_refs=tuple(refs),
        unresolved_entities=tuple(unresolved),
    )


def _selector(word: str) -> bool:
    # 'top-3', 'top3', '3', 'single-node': numbers and hyphenated selectors
    return bool(re.fullmatch(r"(?:top|bottom)?-?\d+|\d+(?:st|nd|rd|th)|[a-z]+-node", word))


def _attach_devices(group: list[list[_Tok]], phrases: list[Phrase], question: str) -> None:
    """'power of the GPU': a device-only group right after a phrase qualifies that phrase."""
    if not phrases:
        return
    prev = phrases[-1]
    between = question[prev.end : group[0][0].start].lower().split()
    if not set(between) <= {"of", "for", "on", "the", "each", "every", "all", "its", "their"}:
        return
    device = " ".join(dict.fromkeys(t.text for run in group for t in run))
    if set(device.split()) <= DEVICE_WORDS and not prev.text.startswith(device):
        phrases[-1] = Phrase(
            f"{device} {prev.text}", prev.start, group[-1][-1].end, prev.group_start,
            max(prev.group_end, group[-1][-1].end),
        )  # fmt: skip


def decompose(chunking: Chunking) -> list[SubQuery]:
    """One sub-query per metric phrase, keeping the question's entity, time and scope context."""
    q = chunking.question[: chunking.core_end]
    groups = sorted({(p.group_start, p.group_end) for p in chunking.phrases})
    out = []
    for p in chunking.phrases:
        text = q
        # cut every group (right to left keeps offsets valid), then put this phrase where the
        # first group was: 'pcie temperature of rack 3', not 'of rack 3 … pcie temperature'
        for start, end in reversed(groups):
            text = text[:start] + ("\0" if start == groups[0][0] else "") + text[end:]
        text = _DANGLING.sub("", " ".join(text.split())).replace("\0", p.text)
        out.append(SubQuery(text=" ".join(text.split()).strip(" ,;"), phrase=p.text))
    return out


# a conjunction left hanging once the other groups are cut out ('… as well as the')
_DANGLING = re.compile(r"(?:\s*(?:,|\band\b|\bor\b|\bas well as\b)\s*(?:the\s*)?)+(?=$|[.;?!])")
