"""Bounded repair of a validated query that may change only SELECT and GROUP BY (paper §III-C).

The paper's repair model is "restricted to modifying only SELECT and GROUP BY clauses. WHERE
patterns and filter logic remain immutable." A prompt cannot guarantee that, so it is enforced
here, deterministically: both queries are parsed with rdflib's SPARQL grammar, prefixed names are
resolved against each query's own prologue (so renaming a prefix is not a change, and redefining
one is), blank nodes are numbered by first appearance, and the syntax trees of every clause
other than the projection and GROUP BY are compared: the dataset (FROM), WHERE (patterns,
FILTER, BIND, OPTIONAL, sub-queries), HAVING, ORDER BY, LIMIT/OFFSET and a trailing VALUES.
The query form must stay SELECT. Within SELECT and GROUP BY a repair may only add columns:
every projected column stays as it was, and DISTINCT and GROUP BY stay unchanged
(``check_additive``), since regrouping or re-aggregating would answer a question the rules did
not understand. A repair that breaks any of this, does not parse, or fails the validator again
counts as a failed attempt and is shown to the model with the reason; after the budget the
original query is kept.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pyparsing import ParseBaseException, ParseResults
from rdflib.plugins.sparql.algebra import translatePName, translatePrologue, traverse
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import BNode, URIRef, Variable
from rdflib.term import Literal as RdfLiteral

from oda_analyst.llm import LLMClient, LLMError, Message, TokenLedger
from oda_analyst.ontology.model import OntologyModel
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.completeness import (
    COMPLETENESS_THRESHOLD,
    CompletenessReport,
    check_completeness,
)
from oda_analyst.retriever.model_paths.prompts import repair_feedback, repair_messages
from oda_analyst.retriever.model_paths.sparql_model import (
    SPARQL_SCHEMA,
    check_query,
    extract_sparql,
    feedback_lines,
)
from oda_analyst.sparql.grammar import parse_tree

STAGE = "repair"
DEFAULT_REPAIR_ATTEMPTS = 2

# Syntax-tree keys of a SelectQuery that a repair must leave alone, with their SPARQL names.
IMMUTABLE_CLAUSES: dict[str, str] = {
    "datasetClause": "FROM",
    "where": "WHERE",
    "having": "HAVING",
    "orderby": "ORDER BY",
    "limitoffset": "LIMIT/OFFSET",
    "valuesClause": "VALUES",
}
MUTABLE_CLAUSES: frozenset[str] = frozenset({"modifier", "projection", "groupby"})


@dataclass(frozen=True)
class ScopeCheck:
    """Whether a candidate changed only what a repair may change; ``reason`` when not."""

    ok: bool
    changed: tuple[str, ...] = ()
    reason: str = ""


class _UnparsableError(ValueError):
    pass


def _resolved(text: str) -> CompValue:
    """The query's syntax tree with every prefixed name resolved to a full IRI."""
    try:
        tree = parse_tree(text)
        prologue = translatePrologue(tree[0], None)
        body = traverse(tree[1], visitPost=functools.partial(translatePName, prologue=prologue))
    except ParseBaseException as exc:
        raise _UnparsableError(f"syntax error at line {exc.lineno}, column {exc.col}") from None
    except Exception as exc:  # rdflib raises a bare Exception for an unknown prefix
        raise _UnparsableError(str(exc)) from None
    if not isinstance(body, CompValue):
        raise _UnparsableError("the text is not a query")
    return body


def _canon(node: Any, bnodes: dict[BNode, int]) -> Any:
    """A hashable, comparable form: blank nodes by order of appearance, literals by parts."""
    if isinstance(node, CompValue):
        return (node.name, tuple((k, _canon(v, bnodes)) for k, v in dict.items(node)))
    if isinstance(node, list | tuple | ParseResults):
        return tuple(_canon(x, bnodes) for x in node)
    if isinstance(node, BNode):
        return ("_:", bnodes.setdefault(node, len(bnodes)))
    if isinstance(node, RdfLiteral):
        return ("lit", str(node), str(node.datatype or ""), node.language or "")
    if isinstance(node, URIRef | Variable):
        return (type(node).__name__, str(node))
    return node


def check_repair_scope(original: str, candidate: str) -> ScopeCheck:
    """Deterministic: did ``candidate`` change anything but SELECT and GROUP BY of ``original``?"""
    try:
        before = _resolved(original)
    except _UnparsableError as exc:
        return ScopeCheck(False, ("original",), f"the original query does not parse: {exc}")
    try:
        after = _resolved(candidate)
    except _UnparsableError as exc:
        return ScopeCheck(False, ("syntax",), f"the repaired query does not parse: {exc}")
    if after.name != before.name or before.name != "SelectQuery":
        return ScopeCheck(
            False, ("form",), f"the query form changed ({before.name} → {after.name})"
        )
    changed = []
    for key, label in IMMUTABLE_CLAUSES.items():
        # One numbering per clause pair, so the same blank-node structure compares equal.
        numbering_a: dict[BNode, int] = {}
        numbering_b: dict[BNode, int] = {}
        a = _canon(dict.get(before, key), numbering_a)
        b = _canon(dict.get(after, key), numbering_b)
        if a != b:
            changed.append(label)
    unknown = (set(dict.keys(before)) | set(dict.keys(after))) - set(IMMUTABLE_CLAUSES)
    unknown -= MUTABLE_CLAUSES
    for key in sorted(unknown):  # a clause this module does not know is immutable too
        if _canon(dict.get(before, key), {}) != _canon(dict.get(after, key), {}):
            changed.append(key)
    if changed:
        return ScopeCheck(
            False,
            tuple(changed),
            f"it changed {', '.join(changed)}; only SELECT and GROUP BY may change",
        )
    return ScopeCheck(True)


def check_additive(original: str, candidate: str) -> ScopeCheck:
    """Deterministic: does ``candidate`` keep every projected column of ``original`` as it was
    (same expression, same name), its DISTINCT and its GROUP BY, and only add columns?

    A repair that rewrites an existing column (AVG → SUM), regroups the rows (adds ?node to
    GROUP BY) or adds a column to a SELECT DISTINCT (more distinct rows) answers a different
    question than the one the rules understood; only the model says it is better, and nothing
    symbolic can confirm that, so it is refused."""
    try:
        before, after = _resolved(original), _resolved(candidate)
    except _UnparsableError as exc:
        return ScopeCheck(False, ("syntax",), f"a query does not parse: {exc}")
    changed = []
    for key, label in (("modifier", "DISTINCT"), ("groupby", "GROUP BY")):
        if _canon(dict.get(before, key), {}) != _canon(dict.get(after, key), {}):
            changed.append(label)
    old_items = [_canon(item, {}) for item in dict.get(before, "projection") or ()]
    new_items = [_canon(item, {}) for item in dict.get(after, "projection") or ()]
    if not old_items and new_items:  # SELECT * → a list: the columns change
        changed.append("SELECT *")
    lost = [item for item in old_items if item not in new_items]
    if lost:
        changed.append(f"{len(lost)} existing column(s) of SELECT")
    # Under DISTINCT a new column changes which rows are distinct ("which nodes" would list a
    # node once per reading): not an added column but another answer.
    if dict.get(before, "modifier") is not None and len(new_items) > len(old_items):
        changed.append("the columns of a SELECT DISTINCT")
    if changed:
        return ScopeCheck(
            False,
            tuple(changed),
            f"it changed {', '.join(changed)}; a repair may only add columns",
        )
    return ScopeCheck(True)


def same_query(a: str, b: str) -> bool:
    """True when the two texts parse to the same resolved syntax tree (whitespace, prefixes)."""
    try:
        return bool(_canon(_resolved(a), {}) == _canon(_resolved(b), {}))
    except _UnparsableError:
        return False


Outcome = Literal["accepted", "unchanged", "out_of_scope", "invalid", "no_query"]


@dataclass(frozen=True)
class RepairAttempt:
    number: int
    content: str
    sparql: str | None
    outcome: Outcome
    reason: str = ""


@dataclass(frozen=True)
class RepairOutcome:
    """The query to run (repaired or the original) and every attempt."""

    sparql: str
    repaired: bool
    attempts: tuple[RepairAttempt, ...]


def repair(
    client: LLMClient,
    *,
    question: str,
    sparql: str,
    report: CompletenessReport,
    graph_iri: str,
    max_attempts: int = DEFAULT_REPAIR_ATTEMPTS,
    ontology: OntologyModel | None = None,
    ledger: TokenLedger | None = None,
    additive_only: bool = True,
) -> RepairOutcome:
    """Ask for a corrected SELECT/GROUP BY; enforce the scope (with ``additive_only``, the
    default, a repair may only add columns: see ``check_additive``); revalidate; keep the
    original when every one of ``max_attempts`` repairs fails. Model-service errors propagate."""
    conversation: list[Message] = repair_messages(question, sparql, report.findings())
    attempts: list[RepairAttempt] = []
    for number in range(1, max_attempts + 1):
        result = client.chat(
            conversation, stage=STAGE, response_schema=SPARQL_SCHEMA, schema_name="sparql",
            ledger=ledger, max_tokens=max_tokens(STAGE),
        )  # fmt: skip
        content = result.content or ""
        candidate = extract_sparql(content)
        attempt = _judge(number, content, candidate, sparql, graph_iri, ontology, additive_only)
        attempts.append(attempt)
        if attempt.outcome == "accepted" and candidate is not None:
            return RepairOutcome(candidate, True, tuple(attempts))
        if attempt.outcome == "unchanged":
            return RepairOutcome(sparql, False, tuple(attempts))
        conversation = [
            *conversation,
            {"role": "assistant", "content": content},
            {"role": "user", "content": repair_feedback(attempt.reason)},
        ]
    return RepairOutcome(sparql, False, tuple(attempts))


def _judge(
    number: int,
    content: str,
    candidate: str | None,
    original: str,
    graph: str,
    ontology: OntologyModel | None,
    additive_only: bool = True,
) -> RepairAttempt:
    if candidate is None:
        return RepairAttempt(number, content, None, "no_query", "the answer holds no query")
    if same_query(original, candidate):
        return RepairAttempt(number, content, candidate, "unchanged", "no change proposed")
    scope = check_repair_scope(original, candidate)
    if scope.ok and additive_only:
        scope = check_additive(original, candidate)
    if not scope.ok:
        return RepairAttempt(number, content, candidate, "out_of_scope", scope.reason)
    _, diags = check_query(candidate, graph=graph, model=ontology)
    if diags:
        reason = "the validator rejected it: " + "; ".join(feedback_lines(diags))
        return RepairAttempt(number, content, candidate, "invalid", reason)
    return RepairAttempt(number, content, candidate, "accepted")


# --- completeness check + repair, as the pipeline calls them ---------------------------------


@dataclass(frozen=True)
class ReviewOutcome:
    """The query to execute after review, the report (None if the check failed) and notes."""

    sparql: str
    report: CompletenessReport | None
    repair: RepairOutcome | None
    notes: tuple[str, ...] = ()


def review_sparql(
    client: LLMClient,
    *,
    question: str,
    sparql: str,
    graph_iri: str,
    columns: Sequence[str],
    threshold: float = COMPLETENESS_THRESHOLD,
    max_attempts: int = DEFAULT_REPAIR_ATTEMPTS,
    ontology: OntologyModel | None = None,
    ledger: TokenLedger | None = None,
    additive_only: bool = True,
) -> ReviewOutcome:
    """Completeness check, then repair when ``p < threshold``; a model failure at either step
    keeps the validated query (the review improves a query, it never blocks one).
    ``additive_only``: True for a compiled plan (the rules understood the question's form; a
    repair may only add columns), False for model-written SPARQL (the paper's scope)."""
    try:
        report = check_completeness(client, question, sparql, columns, ledger=ledger)
    except LLMError as exc:
        return ReviewOutcome(sparql, None, None, (f"completeness check skipped: {exc.message}",))
    if not report.needs_repair(threshold):
        return ReviewOutcome(sparql, report, None)
    try:
        outcome = repair(
            client, question=question, sparql=sparql, report=report, graph_iri=graph_iri,
            max_attempts=max_attempts, ontology=ontology, ledger=ledger,
            additive_only=additive_only,
        )  # fmt: skip
    except LLMError as exc:
        return ReviewOutcome(sparql, report, None, (f"repair skipped: {exc.message}",))
    note = (
        "repaired SELECT/GROUP BY"
        if outcome.repaired
        else f"kept the original query after {len(outcome.attempts)} repair attempt(s)"
    )
    return ReviewOutcome(outcome.sparql, report, outcome, (note,))
