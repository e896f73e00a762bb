"""Prompt builders of the model-backed retriever stages: pure functions from inputs to messages.

Nothing here calls a model. Every piece of domain knowledge in a prompt is derived from the
symbolic layer at build time, so a prompt cannot drift from the code that checks the answer:
the time examples' answers come from the deterministic parser, the plugin descriptions from the
metric catalogue, the traversal paths from the ontology (``ontology_paths``), the few-shot
SPARQL from the curated examples (``fewshot``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from oda_analyst.llm import Message
from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.ontology.namespaces import PREFIXES
from oda_analyst.reading.rules.timeparse import parse_time
from oda_analyst.reading.types import TimeParse
from oda_analyst.retriever.grounding.plugin import PLUGIN_DESCRIPTIONS, PLUGINS
from oda_analyst.retriever.model_paths.fewshot import CuratedExample

# --- time -----------------------------------------------------------------------------------------

TIME_EXAMPLE_AS_OF = datetime(2022, 6, 15, 12, 0, tzinfo=UTC)
# Only the questions are written here; their answers are the parser's, computed when the prompt
# is built, so the model is shown exactly the conventions the parser implements.
TIME_EXAMPLE_QUESTIONS: tuple[str, ...] = (
    "Retrieve the inlet temperature for all nodes on 1 June 2022 between 08:00 and 09:00",
    "Average power of node 900 during the previous week",
    "GPU utilisation of rack 12 on the first day of September",
    "Which jobs ran in the morning of 3 June 2022?",
    "How many nodes are there in M100?",
)
TIME_RULES = """\
You extract the time window of a question about HPC telemetry (the Marconi100 lake).
Rules:
- Every time is UTC unless the question gives an offset or a zone. Write ISO-8601 with 'Z'.
- A window is half-open [start, end): "on 1 June 2022" is 2022-06-01T00:00:00Z to
  2022-06-02T00:00:00Z; "08:00-09:00" ends at 09:00; an end written HH:59 includes that minute.
- morning 00:00-12:00, afternoon 12:00-18:00, evening 18:00-24:00, night 00:00-06:00.
- Relative phrases are relative to the "as of" time given with the question. "previous week"
  is the previous ISO week (Monday to Monday); "past week" is the seven days before "as of".
- A date without a year takes the latest year in which it does not start after "as of".
- "text" is the temporal phrase copied exactly from the question.
- No temporal phrase: status "missing", no windows. Two readings (1/6/2022): status "ambiguous".
  A phrase you cannot turn into a window: status "unparseable". Otherwise status "ok".
- "message" says what is missing or ambiguous; null when status is "ok".
Answer with the JSON object only."""


def time_answer(parse: TimeParse) -> dict[str, Any]:
    """The JSON answer the time schema expects, for one parse (used for few-shot examples)."""
    return {
        "windows": [
            {"start": _z(w.start), "end": _z(w.end), "text": w.text} for w in parse.windows
        ],
        "status": parse.status,
        "message": parse.message,
    }


def _z(stamp: datetime) -> str:
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time_user(question: str, as_of: datetime) -> str:
    return f"As of: {_z(as_of)}\nQuestion: {question}"


def time_messages(question: str, as_of: datetime) -> list[Message]:
    """System rules, few-shot pairs answered by the parser, then the question."""
    messages: list[Message] = [{"role": "system", "content": TIME_RULES}]
    for example in TIME_EXAMPLE_QUESTIONS:
        answer = time_answer(parse_time(example, as_of=TIME_EXAMPLE_AS_OF))
        messages.append({"role": "user", "content": _time_user(example, TIME_EXAMPLE_AS_OF)})
        messages.append({"role": "assistant", "content": json.dumps(answer)})
    messages.append({"role": "user", "content": _time_user(question, as_of)})
    return messages


# --- metric grounding (intent, decomposition, plugin) -------------------------------------------

INTENT_RULES = """\
You classify a question about HPC and data-centre telemetry.
- "metric": true when answering needs telemetry readings or job records (a temperature, a power,
  a utilisation, jobs that ran); false for greetings, questions about the assistant, or general
  knowledge.
- "cardinality": "multi" when it asks for several different quantities ("GPU and CPU
  utilisation", "power and inlet temperature"), else "single".
- "confidence": your probability, between 0 and 1, that both fields are right.
Answer with the JSON object only."""

DECOMPOSE_RULES = """\
You split a question that asks for several quantities into sub-questions, one quantity each.
Each sub-question keeps the original entities (nodes, racks, jobs), the time window and the
scope word for word, and names exactly one quantity. Example: "gpu and cpu utilisation for job
X on 1 June 2022" -> ["gpu utilisation for job X on 1 June 2022", "cpu utilisation for job X on
1 June 2022"]. A question with one quantity gives a list with that question alone.
"confidence" is your probability, between 0 and 1, that the split is right.
Answer with the JSON object only."""

PLUGIN_RULES_HEAD = """\
You choose the telemetry plugin (data source) of the Marconi100 lake that measures the quantity
a question asks for. The plugins:"""
PLUGIN_RULES_TAIL = """\
"confidence" is your probability, between 0 and 1, that the plugin is right.
Answer with the JSON object only."""


def plugin_catalogue_text(catalogue: Catalogue | None = None) -> str:
    """One line per plugin the grounding accepts: its description, then from the catalogue the
    entities measured, the main kinds of quantity and a few metric names."""
    cat = catalogue or load_catalogue()
    lines = []
    for plugin in PLUGINS:
        metrics = cat.by_plugin(plugin)
        entities = sorted({m.entity for m in metrics})
        kinds = [k for k, _ in Counter(m.kind for m in metrics).most_common(5)]
        names = ", ".join(m.name for m in metrics[:4])
        lines.append(
            f"- {plugin}: {PLUGIN_DESCRIPTIONS[plugin]}. {len(metrics)} metric(s) on "
            f"{', '.join(entities)}; kinds: {', '.join(kinds)}; e.g. {names}"
        )
    return "\n".join(lines)


def intent_messages(question: str) -> list[Message]:
    return [
        {"role": "system", "content": INTENT_RULES},
        {"role": "user", "content": f"Question: {question}"},
    ]


def decompose_messages(
    question: str, cardinality: str | None = None, prior: Sequence[str] = ()
) -> list[Message]:
    note = f"\n(The intent classifier said: cardinality {cardinality}.)" if cardinality else ""
    if prior:
        note += f"\n(A rule-based splitter proposed: {json.dumps(list(prior))}; correct it.)"
    return [
        {"role": "system", "content": DECOMPOSE_RULES},
        {"role": "user", "content": f"Question: {question}{note}"},
    ]


def plugin_messages(subquery: str, catalogue: Catalogue | None = None) -> list[Message]:
    system = f"{PLUGIN_RULES_HEAD}\n{plugin_catalogue_text(catalogue)}\n{PLUGIN_RULES_TAIL}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Question: {subquery}"},
    ]


def reflection_turns(previous: Mapping[str, Any] | str, reason: str) -> list[Message]:
    """The two turns appended for a reflection retry: the model's answer, then why it failed."""
    shown = previous if isinstance(previous, str) else json.dumps(previous, sort_keys=True)
    return [
        {"role": "assistant", "content": shown},
        {
            "role": "user",
            "content": (
                f"Your previous answer was not accepted: {reason}\n"
                "Reflect on the question again: check each field against the rules, correct "
                "what is wrong, and give your honest confidence. Answer with the JSON only."
            ),
        },
    ]


# --- SPARQL ---------------------------------------------------------------------------------------

SPARQL_RULES = """\
You write one SPARQL 1.1 SELECT query over a knowledge graph of HPC telemetry.
Rules:
- Use only the classes and properties listed under "Ontology"; follow the paths as written
  (subject −property→ object). Never invent a property, a class or a relation.
- Read only the graph named under "Graph" below: put "FROM <that IRI>" after SELECT. No GRAPH,
  no SERVICE, no INSERT/DELETE or any other update.
- Instance IRIs are written in full inside <...> (a prefixed name cannot contain '/').
- Readings: ?r oda:fromSensor ?sensor ; oda:timestamp ?ts ; oda:value ?value . and a sensor:
  ?sensor oda:observes ?entity ; oda:observesMetric <metric IRI> .
- A time window is a half-open FILTER on typed literals:
  FILTER(?ts >= "START"^^xsd:dateTime && ?ts < "END"^^xsd:dateTime)
- Every projected variable must be bound in WHERE; with aggregates, GROUP BY every
  non-aggregated projected variable.
- Declare the prefixes you use.
Answer with JSON {"sparql": "<the query>"} and nothing else."""


# ``m100:`` is left out on purpose: instance IRIs hold '/', which a prefixed name cannot.
PROMPT_PREFIXES = ("oda", "xsd", "rdf", "rdfs")


def prefix_lines(names: Iterable[str] = PROMPT_PREFIXES) -> str:
    return "\n".join(f"PREFIX {p}: <{PREFIXES[p]}>" for p in names)


def sparql_messages(
    question: str,
    *,
    graph: str,
    ontology_text: str,
    grounding_text: str,
    examples: Sequence[CuratedExample],
) -> list[Message]:
    """The SPARQL prompt: rules, prefixes, ontology paths, few-shot, grounded input, graph,
    question.

    What every request shares comes first and what is the request's own last (the graph IRI is
    per request): a server that keeps evaluated prompts (llama.cpp's prompt cache, vLLM's prefix
    caching) then evaluates again only the part after the longest prefix it has seen."""
    shots = (
        "\n\n".join(f"Question: {e.question}\nSPARQL:\n{e.sparql}" for e in examples) or "(none)"
    )
    user = (
        f"Prefixes:\n{prefix_lines()}\n\n"
        f"Ontology:\n{ontology_text}\n\n"
        f"Curated examples (their queries run on the graph implicitly; yours must say FROM):\n"
        f"{shots}\n\n"
        f"Grounded request (use exactly these):\n{grounding_text}\n\n"
        f"Graph: <{graph}>\n\n"
        f"Question: {question}"
    )
    return [
        {"role": "system", "content": SPARQL_RULES},
        {"role": "user", "content": user},
    ]


def diagnostics_feedback(lines: Sequence[str]) -> str:
    """The user turn after a query the validator rejected: every finding, one per line."""
    listed = "\n".join(f"- {line}" for line in lines)
    return (
        "The validator rejected your query before execution:\n"
        f"{listed}\n"
        "Fix every finding using only the ontology above, keep what was right, and answer with "
        'JSON {"sparql": "<the query>"} only.'
    )


# --- completeness and repair ---------------------------------------------------------------------

COMPLETENESS_RULES = """\
You review a SPARQL query that already passed an ontology validator. Judge only whether its
result answers the question completely:
- "missing_projections": quantities or identifiers the question asks for that the SELECT does
  not return (e.g. the node id when the question asks "per node").
- "projection_issues": returned columns that are wrong or misleading (a sum where an average
  was asked, an unnamed expression).
- "grouping_violations": aggregates without the GROUP BY the question implies, or projected
  variables missing from GROUP BY.
- "confidence": your probability, between 0 and 1, that the query is complete as it is.
Answer with the JSON object only."""

REPAIR_RULES = """\
You repair the SELECT and GROUP BY clauses of a SPARQL query. You may change only:
- the SELECT clause (projected variables, aggregates, AS names, DISTINCT),
- the GROUP BY clause (add, remove or reorder its variables).
Everything else must stay exactly as it is: the WHERE block with its triple patterns, FILTERs
and BINDs, FROM, HAVING, ORDER BY, LIMIT and OFFSET. Use only variables bound in WHERE.
If no change is needed, return the query unchanged.
Answer with JSON {"sparql": "<the query>"} and nothing else."""


def completeness_messages(question: str, sparql: str, columns: Sequence[str]) -> list[Message]:
    cols = ", ".join(columns) if columns else "(none declared)"
    user = f"Question: {question}\n\nQuery:\n{sparql}\n\nResult columns: {cols}"
    return [
        {"role": "system", "content": COMPLETENESS_RULES},
        {"role": "user", "content": user},
    ]


def repair_messages(question: str, sparql: str, findings: Sequence[str]) -> list[Message]:
    listed = "\n".join(f"- {f}" for f in findings) or "- (no specific finding)"
    user = f"Question: {question}\n\nQuery:\n{sparql}\n\nThe completeness review found:\n{listed}"
    return [
        {"role": "system", "content": REPAIR_RULES},
        {"role": "user", "content": user},
    ]


def repair_feedback(reason: str) -> str:
    return (
        f"Your repair was rejected: {reason}\n"
        "Change only SELECT and GROUP BY; copy every other clause character for character. "
        'Answer with JSON {"sparql": "<the query>"} only.'
    )
