"""Metric retrieval (M of F = M∘P∘D∘I) and the accept / clarify / fail decision.

``retrieve(phrase, entities, …)`` grounds one bare metric phrase (entity and time text already
stripped by ``decompose``):

1. Only metrics the scope admits are eligible (``plugin.compatible_entities``; a GPU/CPU index
   named in the question, or a power supply's (``part_indices``), keeps only that part's members
   of indexed families).
2. Exact match, score 1.0: the context rewrites (``plugin.context_phrases``), then the phrase and
   its variants (singular, ``temp`` spelt out, -isation/-ization, without a scope qualifier of
   ``decompose``) against catalogue synonyms and metric names, then the phrase read as a quantity
   (``QUANTITY_ALIASES``: ``heat`` → ``temperature``, ``electricity`` → ``power``). A bare quantity
   with no scope never matches a metric *name* (weather ``humidity``, ``temp``): it asks. Last,
   the phrase without leading aggregation words (``p99 total power`` → ``total power``).
3. Embeddings: best cosine over each metric's texts (name, description, synonyms), for the phrase
   and its rewrites; narrowed to the guessed plugin when P is confident (falling back to all
   plugins when that finds nothing), and to metrics of the phrase's kind when the phrase is a bare
   quantity (``temperature``, ``power``).
4. Decision on the top family score s*: s* < fail → fail; s* < accept → clarify; else accept,
   except when a different family is within ``margin`` of s*, or the phrase is a bare quantity
   several families of the scope measure — then clarify with the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, normalise_phrase
from oda_analyst.reading.rules.decompose import SCOPE_QUALIFIERS, strip_aggregation
from oda_analyst.reading.types import Entities
from oda_analyst.retriever.grounding.embeddings import MetricIndex
from oda_analyst.retriever.grounding.plugin import compatible_entities, context_phrases

Decision = Literal["accept", "clarify", "fail"]
# A bare quantity word names a kind of metric, not a metric.
BARE_KINDS: dict[str, str] = {
    "temperature": "temperature", "temperatures": "temperature", "temp": "temperature",
    "power": "power", "power consumption": "power", "power usage": "power", "power draw": "power",
    "wattage": "power", "utilisation": "utilisation", "utilization": "utilisation",
    "usage": "utilisation", "util": "utilisation", "load": "load", "energy": "energy",
    "humidity": "humidity", "pressure": "pressure", "speed": "speed", "voltage": "voltage",
    "current": "current", "memory": "memory", "flow": "flow", "state": "state", "status": "state",
}  # fmt: skip
# Everyday words for a quantity: 'heat of node 900' is its temperature (and so asks which one),
# 'electricity of rack 2' its power. Tried after the phrase itself; a qualified phrase keeps its
# qualifier ('gpu heat' -> 'gpu temperature').
QUANTITY_ALIASES: dict[str, str] = {
    "heat": "temperature", "hotness": "temperature", "warmth": "temperature",
    "thermal": "temperature", "thermals": "temperature", "thermal stress": "temperature",
    "thermal state": "temperature", "overheating": "temperature",
    # 'which of nodes 4 and 5 was hotter': a comparison of some temperature (asked which)
    "hotter": "temperature", "warmer": "temperature", "colder": "temperature",
    "cooler": "temperature", "busier": "utilisation",
    "electricity": "power", "electricity use": "power", "electricity usage": "power",
    "electricity consumption": "power", "electric power": "power", "watts": "power",
    "busy": "utilisation", "busyness": "utilisation",
}  # fmt: skip
# 'temp' spelt out; plural parts singular ('how busy were the GPUs' -> 'gpu utilisation')
_SPELT = {
    "temp": "temperature", "temps": "temperatures", "gpus": "gpu", "cpus": "cpu", "psus": "psu",
    "dimms": "dimm", "fans": "fan", "sockets": "socket",
}  # fmt: skip
_SCOPE_PREFIXES = tuple(f"{q} " for q in dict.fromkeys(SCOPE_QUALIFIERS.values()))


@dataclass(frozen=True)
class Thresholds:
    """Decision thresholds (paper: fail < 0.5 ≤ clarify < 0.7 ≤ accept; t_ref = 0.7)."""

    fail: float = 0.5
    accept: float = 0.7
    margin: float = 0.03  # a different metric this close to the top is a tie: ask
    reflect: float = 0.7  # t_intent = t_plugin = t_ref
    max_retries: int = 2
    top_k: int = 5

    def __post_init__(self) -> None:
        if not 0.0 <= self.fail <= self.accept <= 1.0:
            raise ValueError("thresholds need 0 <= fail <= accept <= 1")
        if self.top_k < 1 or self.max_retries < 0 or self.margin < 0:
            raise ValueError("top_k >= 1, max_retries >= 0 and margin >= 0 are required")


@dataclass(frozen=True)
class Candidate:
    """A candidate metric; ``members`` lists an indexed family (Gpu0..3_…) it stands for."""

    metric: str
    plugin: str
    score: float
    description: str
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Retrieval:
    decision: Decision
    score: float
    accepted: tuple[MetricInfo, ...]
    candidates: tuple[Candidate, ...]
    message: str
    rule: str = ""
    warnings: tuple[str, ...] = ()


# (plugin, metric) -> whether the lake holds it for the question's months ('lake describe')
Holdings = Callable[[str, str], bool]


SCOPE_FREE = frozenset({"ElectricalPanel", "HPCSystem", "Weather"})
"""Classes of the site's own figures (PUE, IT power, the scheduler's counts, the weather)."""


def family_key(info: MetricInfo) -> str:
    """Metrics that differ only by the index of the part they measure share a key."""
    if info.entity_index is None:
        return f"{info.plugin}/{info.name}"
    return f"{info.plugin}/{info.entity}/{info.kind}/{re.sub(r'[0-9]+', '#', info.name)}"


def eligible(
    catalogue: Catalogue,
    entities: Entities,
    indices: Mapping[str, Sequence[int]] | None = None,
) -> list[MetricInfo]:
    """Metrics the question's scope admits (entity classes, named part indices).

    ``indices`` adds part indices the entities do not carry (``{"PowerSupply": (0,)}``); a part
    named with an index keeps only that member of an indexed family (GPU-0 → ``Gpu0_…``).
    """
    classes = compatible_entities(entities)
    wanted: dict[str, Sequence[int]] = {"GPU": entities.gpus, "CPU": entities.cpus}
    wanted.update(indices or {})
    out = []
    for info in catalogue:
        if info.kind == "table" or (classes is not None and info.entity not in classes):
            continue
        named = wanted.get(info.entity)
        if named and info.entity_index not in named:
            continue
        out.append(info)
    return out


def part_indices(
    psu: Sequence[tuple[int, int, tuple[int, ...]]], catalogue: Catalogue, warnings: list[str]
) -> dict[str, tuple[int, ...]]:
    """Part indices the entities do not carry: 'power supply 0', 'PSU 1' (for ``eligible``).

    An index no power supply has is kept (nothing matches, so grounding fails) and explained in
    ``warnings``: answering with both supplies would silently ignore the question.
    """
    named = sorted({i for _, _, ids in psu for i in ids})
    if not named:
        return {}
    valid = sorted(
        {
            m.entity_index
            for m in catalogue
            if m.entity == "PowerSupply" and m.entity_index is not None
        }
    )
    bad = [i for i in named if i not in valid]
    if bad:
        listed = " and ".join(str(i) for i in valid)
        warnings.append(
            f"power supply {', '.join(map(str, bad))} does not exist: nodes have power supplies "
            f"{listed}"
        )
    return {"PowerSupply": tuple(named)}


def variants(phrase: str) -> list[str]:
    """The phrase, singular, spelt out (_SPELT), the other -isation spelling, 'psu' as 'power
    supply', and without a scope qualifier of ``decompose`` ('crac compressor load' ->
    'compressor load')."""
    base = normalise_phrase(phrase)
    out = [base]
    words = base.split()
    if words and len(words[-1]) > 3 and words[-1].endswith("s") and not words[-1].endswith("ss"):
        out.append(" ".join([*words[:-1], words[-1][:-1]]))
    for v in list(out):
        out.append(" ".join(_SPELT.get(w, w) for w in v.split()))
    for v in list(out):
        for a, b in (("isation", "ization"), ("ization", "isation")):
            if a in v:
                out.append(v.replace(a, b))
    for v in list(out):  # 'psu input power' is the synonym 'power supply input power'
        if v.startswith("psu "):
            out.append(f"power supply {v[4:]}")
    for v in list(out):
        prefix = next((p for p in _SCOPE_PREFIXES if v.startswith(p)), None)
        if prefix is not None:
            out.append(v[len(prefix) :])
    return list(dict.fromkeys(out))


def as_quantity(phrase: str) -> str:
    """The phrase with an everyday quantity word replaced (QUANTITY_ALIASES), or the phrase."""
    base = normalise_phrase(phrase)
    for word in sorted(QUANTITY_ALIASES, key=len, reverse=True):
        if base == word or base.endswith(f" {word}"):
            return base[: len(base) - len(word)] + QUANTITY_ALIASES[word]
    return base


def _by_name(catalogue: Catalogue) -> dict[str, list[MetricInfo]]:
    names: dict[str, list[MetricInfo]] = {}
    for info in catalogue:
        names.setdefault(normalise_phrase(info.name.replace(".", " ")), []).append(info)
    return names


def _families(infos: Iterable[MetricInfo]) -> dict[str, list[MetricInfo]]:
    fams: dict[str, list[MetricInfo]] = {}
    for info in infos:
        fams.setdefault(family_key(info), []).append(info)
    return fams


def _candidate(members: list[MetricInfo], score: float) -> Candidate:
    first = members[0]
    names = tuple(m.name for m in members) if len(members) > 1 else ()
    return Candidate(first.name, first.plugin, round(float(score), 4), first.description, names)


def listing(cands: Iterable[Candidate]) -> str:
    return "; ".join(
        f"{i}. {c.metric}" + (f" (+{len(c.members) - 1} more)" if c.members else "")
        + f" [{c.plugin}] {c.description}"
        for i, c in enumerate(cands, 1)
    )  # fmt: skip


def retrieve(
    phrase: str,
    entities: Entities,
    catalogue: Catalogue,
    index: MetricIndex | None,
    thresholds: Thresholds,
    *,
    plugin: str | None = None,
    exact_only: bool = False,
    indices: Mapping[str, Sequence[int]] | None = None,
    names_nodes: bool = False,
    held: Holdings | None = None,
) -> Retrieval:
    """Ground one bare metric phrase; see the module docstring for the steps."""
    allowed = eligible(catalogue, entities, indices)
    allowed_names = {m.name for m in allowed}
    names = _by_name(catalogue)
    quantity = as_quantity(phrase)
    scoped = context_phrases(quantity, entities, names_nodes=names_nodes)
    tries = [*scoped, *((v, "synonym") for v in variants(phrase))]
    if quantity != normalise_phrase(phrase):
        tries += [(v, "synonym") for v in variants(quantity)]
    # 'p99 total power': after the phrase itself ('p95 queue time' is a metric), exactly without
    # its aggregation words; never for embeddings, where a lone 'queue' pulls in other metrics
    bare = strip_aggregation(quantity)
    exact_tries = tries if bare == quantity else [
        *tries, *context_phrases(bare, entities, names_nodes=names_nodes),
        *((v, "synonym") for v in variants(bare))
    ]  # fmt: skip
    # A bare quantity with no scope ('humidity', 'temp') names a kind even when one metric is
    # called that way (weather 'humidity', 'temp'): the name does not pick, the operator does.
    # Catalogue synonyms still do: they are written on purpose ('power consumption').
    by_name = not (
        BARE_KINDS.keys() & {quantity, bare}
        and index is not None
        and compatible_entities(entities) is None
    )
    for text, rule in exact_tries:
        hits = [m for m in catalogue.find_synonym(text) if m.name in allowed_names]
        if by_name:
            hits += [m for m in names.get(text, []) if m.name in allowed_names and m not in hits]
        if hits:
            found = _exact(phrase, hits, rule, text)
            by_its_name = any(m in names.get(text, ()) for m in hits)  # 'Tot' asks for Tot
            near = None if held is None or by_its_name else _nearest_held(
                phrase, found, allowed, held
            )  # fmt: skip
            return near or found
    # 'outdoor temperature vs PUE': the data centre's own figures need no entity of their own,
    # so a catalogue synonym of one is that metric under any other scope the question has
    for text, _ in exact_tries:
        wide = [m for m in catalogue.find_synonym(text)
                if m.entity in SCOPE_FREE and m.name not in allowed_names]  # fmt: skip
        if wide:
            return _exact(phrase, wide, "synonym of a data-centre-wide metric", text)
    if exact_only or index is None:
        why = "" if index is not None else " (embedding model unavailable: exact synonyms only)"
        return Retrieval("fail", 0.0, (), (), f"no metric matches '{phrase}'{why}; try a "
                         "catalogue phrase such as 'inlet temperature', 'node power', "
                         "'gpu utilisation'")  # fmt: skip
    texts = [*(t for t, _ in tries), *variants(phrase), *variants(quantity)]
    if bare in BARE_KINDS:  # '95th percentile temperature' is judged as 'temperature'
        texts += variants(bare)
    texts = list(dict.fromkeys(texts))
    return _by_embedding(phrase, bare, texts, allowed, index, thresholds, plugin, held)


def accept_metrics(phrase: str, infos: Sequence[MetricInfo], rule: str) -> Retrieval:
    """Accept metrics chosen by name (the question names one, or the operator picked it)."""
    cands = tuple(_candidate(members, 1.0) for members in _families(infos).values())
    names = ", ".join(m.name for m in infos)
    return Retrieval("accept", 1.0, tuple(infos), cands, f"'{phrase}' is {names} ({rule})", rule)


def _exact(phrase: str, hits: list[MetricInfo], rule: str, matched: str) -> Retrieval:
    fams = _families(hits)
    cands = tuple(_candidate(members, 1.0) for members in fams.values())
    how = "synonym" if rule == "synonym" else f"context rule: {rule}"
    if len(fams) == 1:
        members = tuple(next(iter(fams.values())))
        return Retrieval("accept", 1.0, members, cands, f"'{phrase}' is '{matched}' ({how})", how)
    return Retrieval("clarify", 1.0, (), cands, (
        f"'{phrase}' can mean several metrics; which one? {listing(cands)}"
    ), how)  # fmt: skip


# Kinds whose metrics of one unit on one equipment are near quantities ('data centre power' and
# 'IT power'); counts, states and durations of one entity are mostly unrelated.
_PHYSICAL = frozenset({"power", "temperature", "energy", "humidity", "voltage", "current", "flow",
                       "pressure"})  # fmt: skip


def _nearest_held(
    phrase: str, found: Retrieval, allowed: Sequence[MetricInfo], held: Holdings
) -> Retrieval | None:
    """'data centre power' is Tot, which the lake does not hold for the asked months, while it
    holds Tot_ict (IT power) on the same panels: a question back naming what it holds. Taking the
    neighbour silently would answer another question; a bare 'no data' hides that the lake could
    answer a near one. Only for a phrase read by a synonym or a context rule (a metric named
    exactly is what was asked: no data is its answer), and only when a metric of the same kind
    on the same entity is held."""
    if found.decision != "accept" or any(held(m.plugin, m.name) for m in found.accepted):
        return None
    asked = found.accepted[0]
    if asked.kind not in _PHYSICAL:
        return None  # a count of jobs and a count of allocated CPUs are no neighbours
    near = [m for m in allowed
            if (m.kind, m.entity, m.unit) == (asked.kind, asked.entity, asked.unit)
            and m not in found.accepted and held(m.plugin, m.name)]  # fmt: skip
    if not near:
        return None
    cands = tuple(_candidate(members, 0.9) for members in _families(near).values())
    return Retrieval("clarify", 0.9, (), cands, (
        f"'{phrase}' reads as {asked.plugin}/{asked.name} ({asked.description.rstrip('.')}), "
        f"which the lake does not hold for the asked time; it holds: {listing(cands)} — which "
        "one do you mean?"
    ), found.rule)  # fmt: skip


def _by_embedding(
    phrase: str,
    quantity: str,
    texts: list[str],
    allowed: list[MetricInfo],
    index: MetricIndex,
    th: Thresholds,
    plugin: str | None,
    held: Holdings | None = None,
) -> Retrieval:
    pos = index.position()
    raw = index.scores(texts)
    kind = BARE_KINDS.get(quantity)
    if kind is not None:
        plugin = None  # a kind word names no plugin: the scope alone narrows it (eligible)
    pool = [m for m in allowed if m.kind == kind] if kind else []
    pool = pool or allowed
    notes: list[str] = []
    ranked = _rank(pool, raw, pos, plugin)
    if plugin is not None and (not ranked or ranked[0][1] < th.fail):
        wide = _rank(pool, raw, pos, None)
        if wide and wide[0][1] >= th.fail:
            notes.append(f"nothing in plugin {plugin} matches '{phrase}'; searched every plugin")
            ranked = wide
    k = th.top_k
    if kind is not None:  # a bare quantity: show every metric of that kind the scope has
        k = max(k, min(10, sum(1 for _, s in ranked if s >= th.fail)))
    cands = tuple(_candidate(members, s) for members, s in ranked[:k])
    if not ranked or ranked[0][1] < th.fail:
        best = ", ".join(c.metric for c in cands[:3])
        return Retrieval("fail", ranked[0][1] if ranked else 0.0, (), cands, (
            f"no metric matches '{phrase}'; try naming the quantity and the part, e.g. 'inlet "
            f"temperature', 'node power', 'gpu utilisation' (nearest: {best})"
        ), "embedding", tuple(notes))  # fmt: skip
    top_members, top = ranked[0]
    close = [s for _, s in ranked[1:] if s >= top - th.margin]
    bare_ambiguous = kind is not None and sum(1 for _, s in ranked if s >= th.fail) > 1
    only = _only_held(ranked, th, held, quantity) if bare_ambiguous and not close else None
    if only is not None:
        # 'daily max humidity jun 20-24': a kind of which the lake holds one metric for the
        # asked time; any other would answer 'no data'. The answer's words name the metric.
        notes.append(f"read '{phrase}' as {only[0].plugin}/{only[0].name}, the only "
                     f"{kind} the lake holds for the asked time")  # fmt: skip
        return Retrieval("accept", top, tuple(only), cands,
                         f"'{phrase}' is {only[0].name}: the only {kind} the lake holds then",
                         "held", tuple(notes))  # fmt: skip
    if top < th.accept or close or bare_ambiguous:
        why = (
            "no metric matches it closely" if top < th.accept
            else f"'{phrase}' alone names a kind of metric, not one metric" if bare_ambiguous
            else f"{len(close) + 1} metrics match it about equally well"
        )  # fmt: skip
        return Retrieval("clarify", top, (), cands, (
            f"which metric do you mean by '{phrase}'? ({why}) {listing(cands)}"
        ), "embedding", tuple(notes))  # fmt: skip
    return Retrieval("accept", top, tuple(top_members), cands,
                     f"'{phrase}' ≈ {top_members[0].name} (cosine {top:.2f})", "embedding",
                     tuple(notes))  # fmt: skip


def _only_held(ranked: list[tuple[list[MetricInfo], float]], th: Thresholds,
               held: Holdings | None, word: str) -> list[MetricInfo] | None:  # fmt: skip
    """The one metric family of a bare kind the lake holds for the asked time, when the kind's
    word is that metric's own name ('humidity', weather's), or None: 'temperature' still asks
    which, whatever one lake holds (a node has many temperatures)."""
    if held is None:
        return None
    kept = [members for members, s in ranked if s >= th.fail
            and any(held(m.plugin, m.name) for m in members)]  # fmt: skip
    if len(kept) != 1:
        return None
    named = any(word in (m.name.lower(), *(s.lower() for s in m.synonyms)) for m in kept[0])
    return kept[0] if named else None


def _rank(
    pool: list[MetricInfo], raw: np.ndarray, pos: dict[str, int], plugin: str | None
) -> list[tuple[list[MetricInfo], float]]:
    fams = _families(m for m in pool if plugin is None or m.plugin == plugin)
    scored = [(members, max(float(raw[pos[m.name]]) for m in members)) for members in fams.values()]
    return sorted(scored, key=lambda fs: -fs[1])
