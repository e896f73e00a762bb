"""The model's versions of intent (I), decomposition (D) and plugin classification (P).

``LLMGroundingHooks`` implements ``grounding.MetricModelHooks`` with schema-constrained
structured outputs. ``grounding.ground_metrics`` owns Algorithm 1's loop (retry while the
confidence is below t_ref = 0.7, up to the budget); these hooks make each call, and on a retry
(``reflection`` given) show the model its previous answer, verbatim, and why it was not accepted.

A model failure (unreachable, or an answer that still breaks the schema after the client's own
repair turn) never escapes a hook: it returns the rule-based prior with the prior's confidence
(decomposition: confidence 0, so the rules' split is kept), and says so in ``notes``. The
grounding loop then decides exactly as it would have on a weak answer.

Well-formed answers are checked too, symbolically, and discarded the same way when they fail:
a decomposition may only reuse the question's own words (no translation, paraphrase or invented
quantity), into as many sub-questions as the rules found, none repeated and none of the rules'
quantities dropped; a plugin may not contradict the one the rules are confident about; the
question's kind (metric or not) may not overrule a confident rule prior nor invent a non-metric
route, and an answer that agrees with a confident rule prior's kind but is less sure leaves the
prior as it is (a weak echo is no reason to reflect on a settled question).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from oda_analyst.llm import LLMClient, LLMError, Message, TokenLedger
from oda_analyst.ontology.catalogue import Catalogue
from oda_analyst.reading.types import Cardinality, Intent
from oda_analyst.retriever.grounding.ground import Reflection
from oda_analyst.retriever.grounding.plugin import PLUGINS, PluginGuess
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.prompts import (
    decompose_messages,
    intent_messages,
    plugin_messages,
    reflection_turns,
)

_CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}

INTENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metric": {"type": "boolean"},
        "cardinality": {"type": "string", "enum": ["single", "multi"]},
        "confidence": _CONFIDENCE,
    },
    "required": ["metric", "cardinality", "confidence"],
    "additionalProperties": False,
}
DECOMPOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subqueries": {
            "type": "array",
            "items": {"type": "string", "maxLength": 240},
            "minItems": 1,
            "maxItems": 6,
        },
        "confidence": _CONFIDENCE,
    },
    "required": ["subqueries", "confidence"],
    "additionalProperties": False,
}


def plugin_schema() -> dict[str, Any]:
    """The plugin answer; its enum is the plugins the grounding loop accepts."""
    return {
        "type": "object",
        "properties": {
            "plugin": {"type": "string", "enum": list(PLUGINS)},
            "confidence": _CONFIDENCE,
        },
        "required": ["plugin", "confidence"],
        "additionalProperties": False,
    }


T_REF = 0.7
"""Algorithm 1's reflection threshold: a rule prior at least this confident is not overruled."""
_WORD = re.compile(r"[\w][\w'./-]*")
_GLUE = frozenset({"a", "an", "the", "of", "and", "for", "in", "on", "at", "to", "by", "per"})


def _words(text: str) -> list[str]:
    return [w.strip("./-'") for w in _WORD.findall(text.lower()) if w.strip("./-'")]


def decomposition_problem(question: str, subqueries: Sequence[str], prior: Sequence[str]
                          ) -> str | None:  # fmt: skip
    """Why a model's decomposition cannot be used, or None: every word must be the question's
    (or glue), no sub-question twice, and every word of a rule sub-question that is not in the
    others (its quantity) must appear in some model sub-question."""
    allowed = set(_words(question)) | _GLUE
    texts = [" ".join(_words(s)) for s in subqueries]
    if any(not t for t in texts):
        return "an empty sub-question"
    foreign = sorted({w for s in subqueries for w in _words(s)} - allowed)
    if foreign:
        return f"words that are not in the question: {', '.join(foreign[:6])}"
    if len(set(texts)) != len(texts):
        return "a sub-question repeated"
    if prior and len(subqueries) != len(prior):
        return f"{len(subqueries)} quantities where the rules found {len(prior)}"
    used = {w for s in subqueries for w in _words(s)}
    for i, rule in enumerate(prior):
        others = {w for j, r in enumerate(prior) if j != i for w in _words(r)}
        own = [w for w in _words(rule) if w not in others and w not in _GLUE]
        if own and not any(w in used for w in own):
            return f"the rules' sub-question {rule!r} is dropped"
    return None


def kind_overrule_problem(prior: Intent, metric: bool) -> str | None:
    """Why the model may not decide the question's kind, or None. It may not overrule a
    confident rule prior, and may not send a question to a non-metric route the rules did
    not see (the route decides what is planned: a guessed one plans another question)."""
    kind = "metric" if metric else "non_metric"
    if kind == prior.kind:
        return None
    if prior.confidence >= T_REF:
        return (
            f"it says {kind}; the rules are confident ({prior.confidence:.2f}) it is {prior.kind}"
        )
    if kind == "non_metric" and prior.sub_kind is None:
        return "it says non-metric, and the rules see no non-metric route"
    return None


class LLMGroundingHooks:
    """``MetricModelHooks`` backed by an OpenAI-compatible model (stages intent/decompose/plugin).

    ``repairs`` is how many times the client shows the model a schema violation before the hook
    falls back to the prior. The hooks remember their last raw answer per question, so a
    reflection shows the model exactly what it said.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        ledger: TokenLedger | None = None,
        catalogue: Catalogue | None = None,
        repairs: int = 1,
    ) -> None:
        self.client = client
        self.ledger = ledger
        self.catalogue = catalogue
        self.repairs = repairs
        self.notes: list[str] = []
        self.calls: dict[str, int] = {"intent": 0, "decompose": 0, "plugin": 0}
        self._last: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    # -- the protocol ---------------------------------------------------------------------------

    def classify_intent(
        self, question: str, *, prior: Intent, reflection: Reflection | None
    ) -> tuple[Intent, float]:
        messages = self._with_reflection("intent", question, intent_messages(question), reflection)
        data = self._ask("intent", question, messages, INTENT_SCHEMA)
        if data is None:
            return prior, prior.confidence
        p = float(data["confidence"])
        metric = bool(data["metric"])
        overrule = kind_overrule_problem(prior, metric)
        if overrule is not None:
            self._note(f"intent: the model's kind was discarded ({overrule})")
            return prior, prior.confidence
        agrees = metric == (prior.kind == "metric")
        if agrees and p < prior.confidence and prior.confidence >= T_REF:
            # Agreeing, less sure than confident rules: no evidence against their reading, and
            # it must not weaken it (below t_ref the loop would reflect on a settled question).
            return prior, prior.confidence
        cardinality: Cardinality = "multi" if data["cardinality"] == "multi" else "single"
        intent = Intent(
            kind="metric" if metric else "non_metric",
            cardinality=cardinality,
            confidence=p,
            sub_kind=None if metric else prior.sub_kind,
            reason="model",
        )
        return intent, p

    def decompose(
        self, question: str, *, cardinality: Cardinality, prior: Sequence[str]
    ) -> tuple[list[str], float]:
        messages = decompose_messages(question, cardinality, prior)
        data = self._ask("decompose", question, messages, DECOMPOSE_SCHEMA)
        if data is None:
            return list(prior), 0.0
        subqueries = [str(s) for s in data["subqueries"]]
        problem = decomposition_problem(question, subqueries, prior)
        if problem is not None:
            self._note(f"decompose: the model's split {subqueries!r} was discarded ({problem})")
            return list(prior), 0.0
        return subqueries, float(data["confidence"])

    def classify_plugin(
        self, subquery: str, *, prior: PluginGuess, reflection: Reflection | None
    ) -> tuple[str, float]:
        base = plugin_messages(subquery, self.catalogue)
        messages = self._with_reflection("plugin", subquery, base, reflection)
        data = self._ask("plugin", subquery, messages, plugin_schema())
        if data is None:
            return prior.plugin or "", prior.confidence
        plugin = str(data["plugin"])
        if prior.plugin and prior.confidence >= T_REF and plugin != prior.plugin:
            self._note(
                f"plugin: the model's {plugin!r} contradicts the rules' {prior.plugin!r} "
                f"(confidence {prior.confidence:.2f}); kept the rules'"
            )
            return prior.plugin, prior.confidence
        return plugin, float(data["confidence"])

    # -- plumbing -------------------------------------------------------------------------------

    def _note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    def _with_reflection(
        self, stage: str, key: str, messages: list[Message], reflection: Reflection | None
    ) -> list[Message]:
        if reflection is None:
            return messages
        with self._lock:
            previous = self._last.get((stage, key), reflection.previous)
        reason = f"{reflection.feedback} (attempt {reflection.attempt})"
        return [*messages, *reflection_turns(previous, reason)]

    def _ask(
        self, stage: str, key: str, messages: list[Message], schema: dict[str, Any]
    ) -> dict[str, Any] | None:
        with self._lock:
            self.calls[stage] += 1
        try:
            data, _ = self.client.structured(
                messages,
                schema,
                stage=stage,
                schema_name=stage,
                repairs=self.repairs,
                ledger=self.ledger,
                max_tokens=max_tokens(stage),
            )
        except LLMError as exc:
            with self._lock:
                self.notes.append(f"{stage}: model failed ({exc.message}); used the rules")
            return None
        with self._lock:
            self._last[(stage, key)] = json.dumps(data, sort_keys=True)
        return data
