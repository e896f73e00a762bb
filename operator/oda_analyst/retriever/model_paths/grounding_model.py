"""The model's versions of intent (I), decomposition (D) and plugin classification (P).

``LLMGroundingHooks`` implements ``grounding.MetricModelHooks`` with schema-constrained
structured outputs. ``grounding.ground_metrics`` owns Algorithm 1's loop (retry while the
confidence is below t_ref = 0.7, up to the budget); these hooks make each call, and on a retry
(``reflection`` given) show the model its previous answer, verbatim, and why it was not accepted.

A model failure (unreachable, or an answer that still breaks the schema after the client's own
repair turn) never escapes a hook: it returns the rule-based prior with the prior's confidence
(decomposition: confidence 0, so the rules' split is kept), and says so in ``notes``. The
grounding loop then decides exactly as it would have on a weak answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from oda_analyst.llm import LLMClient, LLMError, Message, TokenLedger
from oda_analyst.ontology.catalogue import Catalogue
from oda_analyst.retriever.grounding import Reflection
from oda_analyst.retriever.intent import Cardinality, Intent
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.prompts import (
    decompose_messages,
    intent_messages,
    plugin_messages,
    reflection_turns,
)
from oda_analyst.retriever.plugin import PLUGINS, PluginGuess

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
        "subqueries": {"type": "array", "items": {"type": "string"}, "minItems": 1},
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
        return [str(s) for s in data["subqueries"]], float(data["confidence"])

    def classify_plugin(
        self, subquery: str, *, prior: PluginGuess, reflection: Reflection | None
    ) -> tuple[str, float]:
        base = plugin_messages(subquery, self.catalogue)
        messages = self._with_reflection("plugin", subquery, base, reflection)
        data = self._ask("plugin", subquery, messages, plugin_schema())
        if data is None:
            return prior.plugin or "", prior.confidence
        return str(data["plugin"]), float(data["confidence"])

    # -- plumbing -------------------------------------------------------------------------------

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
