"""The review of a validated query as the selected stages allow it (``stages.ModelStages``).

Both stages used: ``repair.review_sparql`` (the completeness check, then a repair when it is
unsure; with ``repair`` forced, a repair whatever it says). Only the completeness check: its
report, no repair. Only the repair: asked for every query, with no findings to go on. The
repair's guards (scope, additive columns, the validator again) are the same in every case.
"""

from __future__ import annotations

from collections.abc import Sequence

from oda_analyst.llm import LLMClient, LLMError, TokenLedger
from oda_analyst.retriever.model_paths.completeness import (
    COMPLETENESS_THRESHOLD,
    CompletenessReport,
    check_completeness,
)
from oda_analyst.retriever.model_paths.repair import ReviewOutcome, repair, review_sparql
from oda_analyst.retriever.model_paths.stages import ModelStages

ALWAYS = 1.01
"""A completeness threshold no confidence reaches: the repair is always asked."""


def review_with_stages(
    client: LLMClient,
    stages: ModelStages,
    *,
    question: str,
    sparql: str,
    graph_iri: str,
    columns: Sequence[str],
    ledger: TokenLedger | None = None,
    additive_only: bool = True,
) -> ReviewOutcome:
    """The review of ``sparql`` by the stages that are used (see the module docstring)."""
    checks, repairs = stages.uses("completeness"), stages.uses("repair")
    if checks and repairs:
        return review_sparql(
            client, question=question, sparql=sparql, graph_iri=graph_iri, columns=columns,
            ledger=ledger, additive_only=additive_only,
            threshold=ALWAYS if stages.forces("repair") else COMPLETENESS_THRESHOLD,
        )  # fmt: skip
    if checks:
        try:
            report = check_completeness(client, question, sparql, columns, ledger=ledger)
        except LLMError as exc:
            skipped = f"completeness check skipped: {exc.message}"
            return ReviewOutcome(sparql, None, None, (skipped,))
        return ReviewOutcome(sparql, report, None)
    if not repairs:
        return ReviewOutcome(sparql, None, None)
    unchecked = CompletenessReport(confidence=0.0)
    try:
        outcome = repair(
            client, question=question, sparql=sparql, report=unchecked, graph_iri=graph_iri,
            ledger=ledger, additive_only=additive_only,
        )  # fmt: skip
    except LLMError as exc:
        return ReviewOutcome(sparql, None, None, (f"repair skipped: {exc.message}",))
    note = (
        "repaired SELECT/GROUP BY"
        if outcome.repaired
        else f"kept the original query after {len(outcome.attempts)} repair attempt(s)"
    )
    return ReviewOutcome(outcome.sparql, None, outcome, (note,))
