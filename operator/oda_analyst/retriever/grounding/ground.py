"""Metric grounding F = M∘P∘D∘I (paper §III-C, Algorithm 1), rule-based by default.

``ground_metrics(question)`` maps the metric part of a question to catalogue metrics:

- **I** (``intent.classify_intent``): metric or not; single or multi. Non-metric questions exit
  early with ``status="non_metric"`` and a route (count entities, list jobs, job stats…).
- **D** (``decompose``): one context-preserving sub-query per metric phrase.
- **P** (``plugin.classify_plugin``): the plugin of each sub-query. With no model, a confident
  guess (≥ ``thresholds.reflect``) narrows the embedding search; a weak one searches every plugin
  (a sub-query is never dropped silently).
- **M** (``match.retrieve``): exact synonym or metric name first (score 1), then embeddings over
  the catalogue, then the decision on the top score: ``< fail`` fail, ``[fail, accept)`` clarify
  with the top-k candidates, ``≥ accept`` accept — unless another metric of different meaning is
  within ``margin`` of the top, or the phrase is a bare quantity (``temperature``) that several
  metrics of the scope measure: then the operator is asked instead of the system guessing.

An exact catalogue metric name in the question wins (``match.named_metrics``): ``cluster CPU
utilisation (cluster_cpu_util)`` is ``cluster_cpu_util`` alone, ``Pue`` is not also ``pue``.

Indexed families (``Gpu0..3_gpu_utilization``, ``p0/p1_power``, fans, DIMMs, power supplies)
differ only by which GPU/CPU/… they measure, so they are one candidate. The index comes from the
entities (``GPU-0`` → ``Gpu0_…``) or, for power supplies, from ``power supply 0``/``PSU 1``
(``match.part_indices``); when none is named, every member is accepted: "GPU utilisation of job
X" means all the GPUs of the job's nodes (the plan groups them by GPU). The paper grounds its
example to one arbitrary GPU (``Gpu3_gpu_utilization``); we prefer not to drop three GPUs
silently.

Like Algorithm 1, the first sub-query that is not accepted decides the outcome (clarification or
failure); the accepted ones are kept, so ``apply_clarification`` only re-grounds the one asked.
With ``model`` hooks (``MetricModelHooks``), I and P run the reflection loop: retried while the
confidence is below ``thresholds.reflect`` up to ``max_retries``; then I fails the request and P
skips the sub-query ("continue"), as Algorithm 1 does. One departure: I fails only when the
model's last, unsure answer contradicts the rules' kind. An unsure model that agreed with them
leaves the rules' reading standing, as with no model: otherwise a weak model would answer fewer
questions than none.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from oda_analyst.errors import UsageError
from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.reading.answers import phrases_of
from oda_analyst.reading.model import RetrievalReading
from oda_analyst.reading.rules.stray import is_stray
from oda_analyst.reading.types import Cardinality, Entities, Intent, SubQuery
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.grounding.match import (
    Candidate,
    Holdings,
    Retrieval,
    Thresholds,
    accept_metrics,
    eligible,
    listing,
    part_indices,
    retrieve,
)
from oda_analyst.retriever.grounding.plugin import PLUGINS, PluginGuess, classify_plugin

Status = Literal["ok", "clarification", "failed", "non_metric"]
__all__ = [
    "Candidate",
    "GroundedMetric",
    "GroundingResult",
    "Holdings",
    "MetricChoice",
    "MetricModelHooks",
    "Outcome",
    "Reflection",
    "Thresholds",
    "apply_clarification",
    "ground_metrics",
]  # fmt: skip


@dataclass(frozen=True)
class GroundedMetric:
    """One accepted (sub-query, plugin, metric) tuple of O."""

    subquery: str
    phrase: str
    plugin: str
    metric: str
    score: float
    candidates: tuple[Candidate, ...] = ()
    rule: str = ""  # how it was decided: synonym, context rule, embedding


@dataclass(frozen=True)
class MetricChoice:
    """What to ask the operator: which metric a sub-query's phrase means."""

    question: str
    candidates: tuple[Candidate, ...]
    subquery: str
    phrase: str


@dataclass(frozen=True)
class Outcome:
    """The decision for one sub-query."""

    subquery: SubQuery
    decision: Literal["accept", "clarify", "fail", "skipped"]
    grounded: tuple[GroundedMetric, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    plugin: PluginGuess | None = None
    message: str = ""


@dataclass(frozen=True)
class GroundingResult:
    """F(q): the grounded tuples, or the clarification / failure that stopped grounding."""

    question: str
    status: Status
    grounded: tuple[GroundedMetric, ...] = ()
    clarification: MetricChoice | None = None
    message: str = ""
    intent: Intent | None = None
    outcomes: tuple[Outcome, ...] = ()
    non_metric_parts: tuple[str, ...] = ()
    unresolved_entities: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    retries: dict[str, int] = field(default_factory=dict)
    indices: dict[str, tuple[int, ...]] = field(default_factory=dict)  # PowerSupply: (0,)
    entities: Entities = field(default_factory=Entities)  # what grounding was scoped by

    def metrics(self) -> list[tuple[str, str]]:
        """(plugin, metric) of every grounded tuple, in order, without repeats."""
        return list(dict.fromkeys((g.plugin, g.metric) for g in self.grounded))


@dataclass(frozen=True)
class Reflection:
    """What a model is told when asked again: its last answer, its confidence, the attempt."""

    attempt: int
    previous: str
    confidence: float
    feedback: str


class MetricModelHooks(Protocol):
    """A model's versions of I, D and P; each returns (value, confidence in [0, 1])."""

    def classify_intent(
        self, question: str, *, prior: Intent, reflection: Reflection | None
    ) -> tuple[Intent, float]: ...

    def decompose(
        self, question: str, *, cardinality: Cardinality, prior: Sequence[str]
    ) -> tuple[list[str], float]: ...

    def classify_plugin(
        self, subquery: str, *, prior: PluginGuess, reflection: Reflection | None
    ) -> tuple[str, float]: ...


# --- the pipeline ---------------------------------------------------------------------------


@dataclass
class _Run:
    question: str
    entities: Entities
    catalogue: Catalogue
    index: embeddings.MetricIndex | None
    thresholds: Thresholds
    model: MetricModelHooks | None
    warnings: list[str]
    retries: dict[str, int]
    indices: dict[str, tuple[int, ...]] = field(default_factory=dict)  # PowerSupply: (0,)
    named: dict[str, str] = field(default_factory=dict)  # phrase -> the metric it names exactly
    conjoined: frozenset[str] = frozenset()  # phrases listed with others ('power and X')
    names_nodes: bool = False  # 'node(s)' outside the metric phrases ('the nodes in rack 7')
    held: Holdings | None = None  # what the lake holds for the question's months


def ground_metrics(
    said: RetrievalReading,
    *,
    entities: Entities | None = None,
    model: MetricModelHooks | None = None,
    thresholds: Thresholds | None = None,
    catalogue: Catalogue | None = None,
    embedder: embeddings.Embedder | None = None,
    use_embeddings: bool = True,
    held: Holdings | None = None,
) -> GroundingResult:
    """Ground the metric phrases the reader found (Algorithm 1; rules + embeddings, model
    optional). ``entities``: the reading's, with those a reply added.

    ``held`` says whether the lake holds a metric for the question's months: a phrase read by a
    synonym as a metric it does not hold, beside a held one of the same kind, asks which."""
    question = said.text
    if not question.strip():
        raise UsageError("the question is empty", hint="ask about a metric, e.g. 'node power'")
    cat = catalogue or load_catalogue()
    ents = entities if entities is not None else said.entities
    run = _Run(
        question, ents, cat, None, thresholds or Thresholds(), model, [], {"intent": 0, "plugin": 0}
    )
    if use_embeddings:
        run.index = embeddings.get_index(cat, embedder)
        if run.index is None:
            reason = embeddings.embedder_unavailable_reason() or "no embedder"
            note = f"metric grounding uses exact synonyms only: {reason}"
            warnings.warn(note, RuntimeWarning, stacklevel=2)
            run.warnings.append(note)
    run.indices = part_indices(said.psu, cat, run.warnings)
    chunking, run.named = said.chunking, dict(said.named)
    run.conjoined = frozenset(said.conjoined)
    run.names_nodes = any(ref in ("node", "nodes") for ref in chunking.entity_refs)
    run.held = held
    intent = said.intent
    common = _Common(question, chunking.non_metric_parts, chunking.unresolved_entities)
    run.warnings.extend(
        f"'{u}' is not an entity I know; name node ids (node 900), racks (rack 45), jobs (job "
        "123) or 'all nodes'"
        for u in chunking.unresolved_entities
    )
    if model is not None:
        intent, ok = _reflect_intent(run, intent)
        if not ok:
            return _result(run, common, "failed", intent=intent, message=(
                f"could not tell whether the question asks for metrics (confidence "
                f"{intent.confidence:.2f} after {run.retries['intent']} reflections)"
            ))  # fmt: skip
    if intent.kind == "non_metric":
        return _result(run, common, "non_metric", intent=intent, message=(
            f"not a metric question ({intent.sub_kind}): {intent.reason}"
        ))  # fmt: skip
    subqueries = list(said.subqueries)
    if model is not None:
        subqueries = _model_decomposition(run, intent, subqueries)
    if not subqueries:
        return _result(run, common, "failed", intent=intent, message=(
            "the question names no metric; say what to retrieve, e.g. 'inlet temperature', "
            "'node power' or 'GPU utilisation'"
        ))  # fmt: skip
    outcomes = tuple(_ground_one(run, sq) for sq in subqueries)
    return _finish(run, common, intent, outcomes)


@dataclass(frozen=True)
class _Common:
    question: str
    non_metric_parts: tuple[str, ...]
    unresolved_entities: tuple[str, ...]


def _result(
    run: _Run,
    common: _Common,
    status: Status,
    *,
    message: str,
    intent: Intent | None = None,
    outcomes: tuple[Outcome, ...] = (),
    grounded: tuple[GroundedMetric, ...] = (),
    clarification: MetricChoice | None = None,
) -> GroundingResult:
    if common.unresolved_entities and status in ("clarification", "failed"):
        names = ", ".join(f"'{u}'" for u in common.unresolved_entities)
        message = (
            f"{message} Also, {names} is not an entity I know: name node ids (node 900), "
            "racks (rack 45), jobs (job 123) or say 'all nodes'."
        )
    return GroundingResult(
        question=common.question,
        status=status,
        grounded=grounded,
        clarification=clarification,
        message=message,
        intent=intent,
        outcomes=outcomes,
        non_metric_parts=common.non_metric_parts,
        unresolved_entities=common.unresolved_entities,
        warnings=tuple(run.warnings),
        retries=dict(run.retries),
        indices=dict(run.indices),
        entities=run.entities,
    )


def _finish(
    run: _Run, common: _Common, intent: Intent, outcomes: tuple[Outcome, ...]
) -> GroundingResult:
    grounded = tuple(g for o in outcomes for g in o.grounded)
    # Only a word standing alone: one listed with other quantities was asked for.
    strays = [
        o
        for o in outcomes
        if o.decision == "fail"
        and o.subquery.phrase not in run.conjoined
        and is_stray(o.subquery.phrase, run.catalogue.vocabulary)
    ]
    if grounded and strays:
        run.warnings.extend(
            f"ignored '{o.subquery.phrase}': no metric of the catalogue uses that word"
            for o in strays
        )
        outcomes = tuple(o for o in outcomes if o not in strays)
    # A failure to report names a phrase that looks like a metric before a stray word ('plot').
    stopped = [o for o in outcomes if o.decision in ("clarify", "fail")]
    first = next((o for o in stopped if o not in strays), stopped[0] if stopped else None)
    if first is not None and first.decision == "clarify":
        clar = MetricChoice(first.message, first.candidates, first.subquery.text,
                             first.subquery.phrase)  # fmt: skip
        return _result(run, common, "clarification", intent=intent, outcomes=outcomes,
                       grounded=grounded, clarification=clar, message=first.message)  # fmt: skip
    if first is not None:
        return _result(run, common, "failed", intent=intent, outcomes=outcomes,
                       grounded=grounded, message=first.message)  # fmt: skip
    if not grounded:
        return _result(run, common, "failed", intent=intent, outcomes=outcomes, message=(
            "no sub-query could be given a plugin with enough confidence"
        ))  # fmt: skip
    skipped = [o.subquery.phrase for o in outcomes if o.decision == "skipped"]
    note = f" (skipped: {', '.join(skipped)})" if skipped else ""
    names = ", ".join(f"{g.plugin}/{g.metric}" for g in grounded)
    return _result(run, common, "ok", intent=intent, outcomes=outcomes, grounded=grounded,
                   message=f"grounded to {names}{note}")  # fmt: skip


def _ground_one(run: _Run, sq: SubQuery) -> Outcome:
    guess = classify_plugin(sq.phrase, run.entities, run.index)
    name = run.named.get(sq.phrase)
    if name is not None and any(
        m.name == name for m in eligible(run.catalogue, run.entities, run.indices)
    ):
        info = run.catalogue.get(name)
        found = accept_metrics(sq.phrase, [info], "metric name")
        return _outcome(sq, PluginGuess(info.plugin, 1.0, "metric name"), found)
    restrict = guess.plugin if guess.confidence >= run.thresholds.reflect else None
    found = _retrieve(run, sq, restrict)  # what the rules alone find
    if run.model is not None:
        # An unsure model does not drop the sub-query (that would answer less than was asked):
        # retrieval runs as with no model, restricted only by a confident rule guess.
        reflected = _reflect_plugin(run, sq, guess)
        if reflected.confidence >= run.thresholds.reflect:
            if reflected.plugin == restrict:
                guess = reflected  # the same search: nothing to narrow
            else:
                guess, found = _narrowed(run, sq, guess, reflected, found)
    run.warnings.extend(w for w in found.warnings if w not in run.warnings)
    return _outcome(sq, guess, found)


def _retrieve(run: _Run, sq: SubQuery, plugin: str | None) -> Retrieval:
    return retrieve(
        sq.phrase, run.entities, run.catalogue, run.index, run.thresholds, plugin=plugin,
        indices=run.indices, names_nodes=run.names_nodes, held=run.held,
    )  # fmt: skip


def _narrowed(run: _Run, sq: SubQuery, rules: PluginGuess, model: PluginGuess,
              found: Retrieval) -> tuple[PluginGuess, Retrieval]:  # fmt: skip
    """The search narrowed to the model's confident plugin, where it may settle what the
    rules could not. It never replaces a metric the rules accepted: a plugin the model named
    that holds no accepted metric, or another one, leaves the rules' finding standing."""
    narrowed = _retrieve(run, sq, model.plugin)
    if found.decision != "accept":
        return model, narrowed
    theirs = {(m.plugin, m.name) for m in narrowed.accepted}
    ours = {(m.plugin, m.name) for m in found.accepted}
    if narrowed.decision == "accept" and theirs == ours:
        return model, narrowed
    run.warnings.append(
        f"the model's plugin {model.plugin!r} for '{sq.phrase}' was not used: the rules found "
        f"{', '.join(f'{p}/{n}' for p, n in sorted(ours))}"
    )
    return rules, found


def _outcome(sq: SubQuery, guess: PluginGuess, found: Retrieval) -> Outcome:
    if found.decision != "accept":
        return Outcome(sq, found.decision, candidates=found.candidates, plugin=guess,
                       message=found.message)  # fmt: skip
    grounded = tuple(
        GroundedMetric(
            sq.text, sq.phrase, m.plugin, m.name, found.score, found.candidates, found.rule
        )
        for m in found.accepted
    )
    return Outcome(sq, "accept", grounded, found.candidates, guess, found.message)


# --- the reflection loops (model hooks only) ---------------------------------------------------


def _reflect_intent(run: _Run, prior: Intent) -> tuple[Intent, bool]:
    assert run.model is not None
    t, budget = run.thresholds.reflect, run.thresholds.max_retries
    intent, p = run.model.classify_intent(run.question, prior=prior, reflection=None)
    while p < t and run.retries["intent"] < budget:
        run.retries["intent"] += 1
        reflection = Reflection(
            run.retries["intent"], f"{intent.kind}/{intent.cardinality}", p,
            f"confidence {p:.2f} is below {t}; re-read the question and correct yourself",
        )  # fmt: skip
        intent, p = run.model.classify_intent(run.question, prior=prior, reflection=reflection)
    if p < t and intent.kind == prior.kind:
        # An unsure model that never contradicted the rules adds nothing either way: the
        # rules' reading stands, exactly as with no model. Only an unsure contradiction fails.
        run.warnings.append(
            f"the model was unsure whether the question asks for metrics (confidence {p:.2f} "
            f"after {run.retries['intent']} reflections) and agreed with the rules' reading, "
            "which is used"
        )
        return prior, True
    intent = replace(intent, confidence=p)
    if intent.kind == "non_metric" and intent.sub_kind is None:
        intent = replace(intent, sub_kind=prior.sub_kind or "job_stats")
    return intent, p >= t


def _model_decomposition(run: _Run, intent: Intent, rules: list[SubQuery]) -> list[SubQuery]:
    assert run.model is not None
    texts, p = run.model.decompose(
        run.question, cardinality=intent.cardinality, prior=[s.text for s in rules]
    )
    texts = [t.strip() for t in texts if isinstance(t, str) and t.strip()]
    if p < run.thresholds.reflect or not texts:
        run.warnings.append(f"model decomposition not used (confidence {p:.2f}); rules kept")
        return rules
    out = []
    for text in texts:
        out.append(SubQuery(text, " ".join(phrases_of(text)) or text.lower()))
    return out


def _reflect_plugin(run: _Run, sq: SubQuery, prior: PluginGuess) -> PluginGuess:
    assert run.model is not None
    t, budget, tries = run.thresholds.reflect, run.thresholds.max_retries, 0
    plugin, p = run.model.classify_plugin(sq.text, prior=prior, reflection=None)
    while (p < t or plugin not in PLUGINS) and tries < budget:
        tries += 1
        why = f"'{plugin}' is not a plugin ({', '.join(PLUGINS)})" if plugin not in PLUGINS else (
            f"confidence {p:.2f} is below {t}"
        )  # fmt: skip
        reflection = Reflection(tries, plugin, p, f"{why}; refine the plugin selection")
        plugin, p = run.model.classify_plugin(sq.text, prior=prior, reflection=reflection)
    run.retries["plugin"] += tries
    if plugin not in PLUGINS:
        return PluginGuess(None, 0.0, f"model named no valid plugin after {tries} reflections")
    if p < t:
        return PluginGuess(plugin, p, f"plugin confidence {p:.2f} < {t} after {tries} reflections")
    return PluginGuess(plugin, p, "model")


# --- clarification answers -------------------------------------------------------------------


def apply_clarification(
    result: GroundingResult,
    answer: str,
    *,
    entities: Entities | None = None,
    thresholds: Thresholds | None = None,
    catalogue: Catalogue | None = None,
    embedder: embeddings.Embedder | None = None,
) -> GroundingResult:
    """Resume after a metric clarification: ground the asked sub-query with the answer.

    ``answer`` may be a candidate's number (``"1"``, ``"1."``: the whole candidate, every member
    of a family), a metric name (``"Pue"``, ``"Pue [logics]"`` as listed; case-sensitive first,
    then case-insensitive when only one candidate is so called) or a phrase (``"inlet
    temperature"``, grounded afresh); the other sub-queries keep their decisions.
    """
    asked = result.clarification
    if result.status != "clarification" or asked is None:
        raise UsageError(
            "this grounding result asks no question", hint="only a clarification can be answered"
        )
    text = answer.strip()
    if not text:
        raise UsageError("the clarification answer is empty", hint=asked.question)
    cat = catalogue or load_catalogue()
    ents = entities if entities is not None else result.entities
    th = thresholds or Thresholds()
    index = embeddings.get_index(cat, embedder)
    run = _Run(result.question, ents, cat, index, th, None, list(result.warnings),
               dict(result.retries))  # fmt: skip
    run.indices = dict(result.indices)
    names, still_open = _picked(asked, text)
    outcomes = []
    for old in result.outcomes:
        if old.subquery.text != asked.subquery or old.decision != "clarify":
            outcomes.append(old)
            continue
        if names:
            found = accept_metrics(text, [cat.get(n) for n in names], "clarification")
        elif still_open:
            found = Retrieval("clarify", 1.0, (), still_open, (
                f"'{text}' matches {len(still_open)} candidates that differ only in case; answer "
                f"with the number or the exact name: {listing(still_open)}"
            ), "clarification")  # fmt: skip
        else:
            found = retrieve(text, ents, cat, index, th, indices=run.indices)
        outcomes.append(_outcome(old.subquery, old.plugin or PluginGuess(None, 0, ""), found))
    common = _Common(result.question, result.non_metric_parts, result.unresolved_entities)
    assert result.intent is not None
    return _finish(run, common, result.intent, tuple(outcomes))


def _picked(asked: MetricChoice, reply: str) -> tuple[tuple[str, ...], tuple[Candidate, ...]]:
    """What an answer picks among the candidates as listed: (metric names to accept, candidates
    a case-insensitive name still leaves open); both empty: the answer is a phrase to ground."""
    cands = asked.candidates
    number = re.fullmatch(r"(\d+)\s*(?:[.)](?:\s.*)?)?", reply, re.DOTALL)
    if number:
        i = int(number[1])
        if not 1 <= i <= len(cands):
            raise UsageError(f"there is no candidate {i}", hint=f"answer 1..{len(cands)} or a name")
        return cands[i - 1].members or (cands[i - 1].metric,), ()
    # 'Pue [logics]' or 'Pue [logics] Power Usage …' as the listing prints it
    tagged = re.fullmatch(r"(.+?)\s*\[\s*([\w-]+)\s*\].*", reply, re.DOTALL)
    name, plugin = (tagged[1], tagged[2]) if tagged else (reply, None)
    name = name.strip().strip("'\"`")
    pool = [c for c in cands if plugin is None or c.plugin == plugin]
    options = {n: c for c in pool for n in (c.metric, *c.members)}
    if name in options:
        return (name,), ()  # a name is that one metric, even within a family
    folded = [n for n in options if n.lower() == name.lower()]
    if len(folded) == 1:
        return (folded[0],), ()
    return (), tuple(dict.fromkeys(options[n] for n in folded))
