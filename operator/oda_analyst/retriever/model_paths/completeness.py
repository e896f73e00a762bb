"""Semantic completeness check of a validated query (paper §III-C, Stage 2).

After the ontology validator accepts a query, a reasoning model judges whether its result
answers the question: a structured report with a confidence ``p`` and diagnostic signals
(missing projections, projection issues, grouping violations). ``p < 0.9`` triggers the bounded
SELECT/GROUP BY repair loop (``repair.py``). The report is schema-constrained and validated; a
model failure raises ``LLMError`` for the caller to keep the query as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from oda_analyst.llm import LLMClient, TokenLedger
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.prompts import completeness_messages

STAGE = "completeness"
COMPLETENESS_THRESHOLD = 0.9

_LIST = {"type": "array", "items": {"type": "string", "maxLength": 120}, "maxItems": 4}
COMPLETENESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "missing_projections": _LIST,
        "projection_issues": _LIST,
        "grouping_violations": _LIST,
    },
    "required": ["confidence", "missing_projections", "projection_issues", "grouping_violations"],
    "additionalProperties": False,
}


class CompletenessReport(BaseModel):
    """The model's verdict: confidence that the query is complete, and what is not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    confidence: float = Field(ge=0.0, le=1.0)
    missing_projections: tuple[str, ...] = ()
    projection_issues: tuple[str, ...] = ()
    grouping_violations: tuple[str, ...] = ()

    def needs_repair(self, threshold: float = COMPLETENESS_THRESHOLD) -> bool:
        return self.confidence < threshold

    def findings(self) -> list[str]:
        """Every signal as one line, labelled, for the repair prompt."""
        return [
            *(f"missing projection: {m}" for m in self.missing_projections),
            *(f"projection issue: {m}" for m in self.projection_issues),
            *(f"grouping violation: {m}" for m in self.grouping_violations),
        ]


def check_completeness(
    client: LLMClient,
    question: str,
    sparql: str,
    columns: Sequence[str],
    *,
    ledger: TokenLedger | None = None,
    repairs: int = 0,
) -> CompletenessReport:
    """Ask the model for a ``CompletenessReport``; ``repairs`` re-asks after a malformed one."""
    report, _ = client.structured(
        completeness_messages(question, sparql, columns),
        COMPLETENESS_SCHEMA,
        stage=STAGE,
        model_cls=CompletenessReport,
        schema_name="completeness_report",
        repairs=repairs,
        ledger=ledger,
        max_tokens=max_tokens(STAGE),
    )
    return report
