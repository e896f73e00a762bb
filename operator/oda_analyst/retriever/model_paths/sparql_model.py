"""Model-written SPARQL (the paper's Stage 2 path), held to the same validator as compiled SPARQL.

``generate_sparql`` builds the ontology- and retrieval-augmented prompt (traversal paths derived
from ``oda.ttl`` for the classes involved, prefixes, the request's graph, the grounded metrics,
entities and window, the top-k curated examples), asks the model for ``{"sparql": ...}``, and
runs the deterministic validator on the answer, then checks that the query uses the grounded
request (its metric and node IRIs, its window bounds: ``grounding_diagnostics``). Each rejected
answer goes back to the model with every diagnostic (code, message, offending pattern,
suggestion) and is regenerated, within a fixed budget of attempts; when the budget is spent,
``SparqlGenerationError`` carries every attempt so the caller can fall back to the compiled
plan or fail the request.

Model-service errors (``LLMError``: unreachable, rejected request) are not retried here: they
propagate, and the caller takes the rule-based path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oda_analyst.errors import OdaError
from oda_analyst.llm import LLMClient, Message, TokenLedger, Usage
from oda_analyst.llm.structured import parse_json
from oda_analyst.observability import instrument
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.model import OntologyModel
from oda_analyst.ontology.plan import ENTITY_CLASS
from oda_analyst.reading.types import Entities, ParsedWindow
from oda_analyst.retriever.grounding.embeddings import Embedder
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.fewshot import (
    CuratedExample,
    load_examples,
    select_examples,
)
from oda_analyst.retriever.model_paths.ontology_paths import traversal_paths
from oda_analyst.retriever.model_paths.prompts import diagnostics_feedback, sparql_messages
from oda_analyst.sparql.diagnostics import Diagnostic, ValidationReport
from oda_analyst.sparql.patterns import datetime_literal
from oda_analyst.sparql.validator import validate

STAGE = "sparql"
DEFAULT_MAX_ATTEMPTS = 3
NO_QUERY = "no_query"
NOT_SELECT = "not_select"

SPARQL_SCHEMA: dict[str, Any] = {
    "type": "object",
    # No maxLength: a grammar of thousands of nested optional characters slows llama.cpp's
    # sampler; the stage's max_tokens bounds the query instead.
    "properties": {"sparql": {"type": "string", "description": "one SPARQL 1.1 SELECT query"}},
    "required": ["sparql"],
    "additionalProperties": False,
}
_FENCED = re.compile(r"```(?:sparql|SPARQL)?\s*\n(?P<body>.*?)```", re.DOTALL)
_QUERY_START = re.compile(r"^\s*(?:PREFIX|BASE|SELECT)\b", re.IGNORECASE)


@dataclass(frozen=True)
class GroundedRequest:
    """What Stage 1 settled: catalogue metric names, the named entities, the time window(s)."""

    metrics: tuple[str, ...]
    entities: Entities = field(default_factory=Entities)
    windows: tuple[ParsedWindow, ...] = ()


@dataclass(frozen=True)
class SparqlAttempt:
    """One model answer and the validator's verdict on it."""

    number: int
    content: str
    sparql: str | None
    diagnostics: tuple[Diagnostic, ...]
    ok: bool
    usage: Usage


@dataclass(frozen=True)
class ModelSparql:
    """The accepted query, its validation report, every attempt and the tokens spent."""

    sparql: str
    report: ValidationReport
    attempts: tuple[SparqlAttempt, ...]
    usage: Usage
    examples: tuple[str, ...]  # ids of the few-shot examples in the prompt


class SparqlGenerationError(OdaError):
    """The model wrote no valid query within the retry budget."""

    code = "sparql_generation_failed"

    def __init__(self, message: str, attempts: tuple[SparqlAttempt, ...]) -> None:
        super().__init__(
            message,
            hint="the request can still run on the compiled plan (no model needed); otherwise "
            "rephrase the question with the metric and entity names the clarification offers",
        )
        self.attempts = attempts


# --- the prompt's grounded section ------------------------------------------------------------


def _metric_line(info: MetricInfo) -> str:
    index = f" {info.entity_index}" if info.entity_index is not None else ""
    unit = f", {info.unit}" if info.unit else ""
    return (
        f"- metric {info.name} ({info.plugin}{unit}; its sensors observe the "
        f"{info.entity}{index}): <{ns.metric_iri(info.plugin, info.name)}>"
    )


def _entity_lines(e: Entities) -> list[str]:
    lines = [f"- node {n}: <{ns.node_iri(n)}>" for n in e.nodes]
    if e.all_nodes:
        lines.append("- all compute nodes: ?node a oda:ComputeNode")
    lines += [f"- rack {r}: <{ns.rack_iri(r)}>" for r in e.racks]
    lines += [f"- room {r}: <{ns.room_iri(r)}>" for r in e.rooms]
    if e.system:
        lines.append(f"- the system: <{ns.system_iri()}>")
    lines += [f"- job {j}: <{ns.job_iri(j)}>" for j in e.jobs]
    lines += [f"- user {u}: <{ns.user_iri(u)}>" for u in e.users]
    lines += [f"- GPU index {g} of each node: ?gpu oda:gpuIndex {g}" for g in e.gpus]
    lines += [f"- CPU socket {c} of each node: ?cpu oda:socketIndex {c}" for c in e.cpus]
    for kind, key in e.devices:
        if kind == "crac":
            lines.append(f"- cooling unit {key}: <{ns.crac_iri(key)}>")
        elif kind == "plc":
            lines.append(f"- liquid-cooling PLC {key}: <{ns.plc_iri(key)}>")
        else:
            panel, _, device = key.partition("/")
            lines.append(f"- electrical panel {key}: <{ns.panel_iri(panel, device)}>")
    if e.weather:
        lines.append(f"- the weather station: <{ns.weather_iri()}>")
    return lines


def describe_grounding(grounded: GroundedRequest, catalogue: Catalogue) -> str:
    """The grounded metrics, entity IRIs and window filter, one line each."""
    lines = [_metric_line(catalogue.get(m)) for m in grounded.metrics]
    lines += _entity_lines(grounded.entities) or ["- no entity named"]
    for w in grounded.windows:
        lines.append(
            f"- time window {w.text or ''!r}: FILTER(?ts >= {datetime_literal(w.start)} && "
            f"?ts < {datetime_literal(w.end)})"
        )
    if not grounded.windows:
        lines.append("- no time window")
    return "\n".join(lines)


def start_classes(grounded: GroundedRequest, catalogue: Catalogue) -> list[str]:
    """The ontology classes the request is about: what its metrics measure and what it names."""
    e = grounded.entities
    named = {
        "node": bool(e.nodes or e.all_nodes), "rack": bool(e.racks), "room": bool(e.rooms),
        "system": e.system, "job": bool(e.jobs), "user": bool(e.users), "gpu": bool(e.gpus),
        "cpu": bool(e.cpus), "weather": e.weather,
    }  # fmt: skip
    classes = {catalogue.get(m).entity for m in grounded.metrics}
    classes |= {ENTITY_CLASS[k] for k, on in named.items() if on}
    classes |= {ENTITY_CLASS[kind] for kind, _ in e.devices}
    return sorted(classes)


# --- reading and checking an answer -----------------------------------------------------------


def extract_sparql(content: str | None) -> str | None:
    """The query in an answer: JSON ``{"sparql": ...}``, a fenced block, or bare SPARQL."""
    if not content or not content.strip():
        return None
    data, problem = parse_json(content)
    if problem is None:
        text = data.get("sparql") if isinstance(data, dict) else None
        return text.strip() if isinstance(text, str) and text.strip() else None
    fenced = _FENCED.search(content)
    if fenced:
        return fenced.group("body").strip() or None
    return content.strip() if _QUERY_START.match(content) else None


def check_query(
    sparql: str | None, *, graph: str, model: OntologyModel | None = None
) -> tuple[ValidationReport | None, tuple[Diagnostic, ...]]:
    """The validator's report and the diagnostics to feed back (none: accepted)."""
    if sparql is None:
        diag = Diagnostic(
            NO_QUERY,
            "the answer holds no SPARQL query",
            suggestion='answer with JSON {"sparql": "<the query>"}',
        )
        return None, (diag,)
    report = validate(sparql, model=model, allowed_graph=graph)
    diags = report.errors
    if report.ok and report.query_form != "SELECT":
        diags = (
            Diagnostic(
                NOT_SELECT,
                f"the query is a {report.query_form}; only SELECT returns rows here",
                suggestion="rewrite it as SELECT",
            ),
        )
    instrument.validated("model", sparql, [(d.code, d.message) for d in diags])
    return report, diags


GROUNDING_UNUSED = "grounding_unused"


def grounding_diagnostics(sparql: str, grounded: GroundedRequest) -> tuple[Diagnostic, ...]:
    """What of the grounded request a valid query does not use: every grounded metric IRI,
    every named node IRI and each window's start and end must appear in it. A valid query that
    leaves them out answers another question (a copied example, another metric)."""
    found = []
    for name in grounded.metrics:
        info = load_catalogue().get(name)
        iri = ns.metric_iri(info.plugin, info.name)
        if f"<{iri}>" not in sparql:
            found.append(f"the grounded metric {name} <{iri}>")
    found += [f"node {n} <{ns.node_iri(n)}>" for n in grounded.entities.nodes
              if f"<{ns.node_iri(n)}>" not in sparql]  # fmt: skip
    compact = (
        "".join(sparql.split()).replace("xsd:dateTime", "").replace(f"<{ns.XSD_NS}dateTime>", "")
    )
    for w in grounded.windows:
        for stamp in (w.start, w.end):
            literal = datetime_literal(stamp).split("^^")[0]
            if literal not in compact:
                found.append(f"the window bound {literal}")
    return tuple(
        Diagnostic(GROUNDING_UNUSED, f"the query does not use {what}",
                   suggestion="use exactly the grounded request: its IRIs and window FILTER")
        for what in found
    )  # fmt: skip


def feedback_lines(diagnostics: Sequence[Diagnostic]) -> list[str]:
    """Each diagnostic as one line a model can act on: code, message, where, what to do."""
    lines = []
    for d in diagnostics:
        text = f"[{d.code}] {d.message}"
        if d.pattern:
            text += f" — in: {d.pattern}"
        if d.suggestion:
            text += f" — suggestion: {d.suggestion}"
        lines.append(text)
    return lines


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.total_tokens + b.total_tokens,
    )


# --- the loop -----------------------------------------------------------------------------------


def sparql_prompt(
    question: str,
    grounded: GroundedRequest,
    graph_iri: str,
    *,
    examples_k: int = 3,
    examples: Sequence[CuratedExample] | None = None,
    embedder: Embedder | None = None,
    catalogue: Catalogue | None = None,
    ontology: OntologyModel | None = None,
) -> tuple[list[Message], list[CuratedExample]]:
    """The first turn of the SPARQL conversation and the few-shot examples it shows."""
    cat = catalogue or load_catalogue()
    pool = load_examples() if examples is None else examples
    shots = [s.example for s in select_examples(question, pool, examples_k, embedder=embedder)]
    paths = traversal_paths(start_classes(grounded, cat), model=ontology)
    messages = sparql_messages(
        question,
        graph=graph_iri,
        ontology_text=paths.render(),
        grounding_text=describe_grounding(grounded, cat),
        examples=shots,
    )
    return messages, shots


def generate_sparql(
    client: LLMClient,
    *,
    question: str,
    grounded: GroundedRequest,
    graph_iri: str,
    examples_k: int = 3,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    examples: Sequence[CuratedExample] | None = None,
    embedder: Embedder | None = None,
    catalogue: Catalogue | None = None,
    ontology: OntologyModel | None = None,
    ledger: TokenLedger | None = None,
) -> ModelSparql:
    """Ask for SPARQL, validate, feed diagnostics back; at most ``max_attempts`` model calls."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    conversation, shots = sparql_prompt(
        question, grounded, graph_iri, examples_k=examples_k, examples=examples,
        embedder=embedder, catalogue=catalogue, ontology=ontology,
    )  # fmt: skip
    attempts: list[SparqlAttempt] = []
    total = Usage()
    for number in range(1, max_attempts + 1):
        result = client.chat(
            conversation,
            stage=STAGE,
            response_schema=SPARQL_SCHEMA,
            schema_name="sparql",
            ledger=ledger,
            max_tokens=max_tokens(STAGE),
        )
        total = _add(total, result.usage)
        content = result.content or ""
        sparql = extract_sparql(content)
        report, diags = check_query(sparql, graph=graph_iri, model=ontology)
        if not diags and sparql is not None:
            diags = grounding_diagnostics(sparql, grounded)
        ok = not diags and report is not None
        attempts.append(SparqlAttempt(number, content, sparql, diags, ok, result.usage))
        if ok and sparql is not None and report is not None:
            return ModelSparql(sparql, report, tuple(attempts), total, tuple(e.id for e in shots))
        conversation = [
            *conversation,
            {"role": "assistant", "content": content},
            {"role": "user", "content": diagnostics_feedback(feedback_lines(diags))},
        ]
    last = attempts[-1].diagnostics
    raise SparqlGenerationError(
        f"the model wrote no valid SPARQL in {max_attempts} attempt(s); last finding: "
        f"{feedback_lines(last)[0] if last else 'none'}",
        tuple(attempts),
    )
