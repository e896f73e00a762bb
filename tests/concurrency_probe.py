"""Run the SPARQL validator over a fixed set of queries in a fresh process, one after another or
from many threads released together, and print every report as JSON (one line).

    python tests/concurrency_probe.py sequential
    python tests/concurrency_probe.py threads [--threads 16] [--rounds 3]

The tests start it as a subprocess, so the parser is cold (no parse action has run yet in that
process) — the state in which rdflib's pyparsing grammar breaks under concurrent first use.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/probe"

# Queries that are not curated examples: rejections of several kinds exercise other parse actions.
EXTRA = (
    "SELECT ?x WHERE { ?x a <https://w3id.org/oda-analyst/ontology#Nope> }",
    "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "SELECT ?x WHERE { ?x ?p ",
    "SELECT (COUNT(?x) AS ?n) ?y WHERE { ?x ?p ?y } GROUP BY ?x",
    'ASK { ?x ?p "abc"^^<http://www.w3.org/2001/XMLSchema#double> }',
    "SELECT ?x WHERE { SERVICE <http://example.org/sparql> { ?x ?p ?o } }",
    "DESCRIBE ?x WHERE { ?x ?p ?o } LIMIT 3",
    "CONSTRUCT { ?x ?p ?o } WHERE { ?x ?p ?o FILTER(?o > 3 && REGEX(STR(?o), 'a')) }",
    "SELECT ?x WHERE { ?x ?p ?o . OPTIONAL { ?o ?q ?r } MINUS { ?x ?p 1 } } ORDER BY DESC(?x)",
)


def queries() -> list[str]:
    examples = yaml.safe_load((ROOT / "ontology" / "examples" / "examples.yaml").read_text())
    return [e["sparql"] for e in examples["examples"]] + list(EXTRA)


def _one(text: str) -> dict[str, Any]:
    from oda_analyst.sparql.validator import validate  # noqa: PLC0415 (the first import is what threads race on)

    try:
        return validate(text, allowed_graph=GRAPH).to_dict()
    except Exception as exc:  # the probe reports crashes; the test fails on them
        return {"crash": f"{type(exc).__name__}: {exc}"}


def sequential(texts: list[str]) -> list[dict[str, Any]]:
    return [_one(t) for t in texts]


def threaded(texts: list[str], threads: int, rounds: int) -> list[list[dict[str, Any]]]:
    """Each thread validates every text ``rounds`` times, in its own rotated order, all threads
    starting at once; one list of reports (in text order) per thread and round."""
    barrier = threading.Barrier(threads)
    out: list[list[dict[str, Any]]] = [[] for _ in range(threads * rounds)]

    def work(i: int) -> None:
        barrier.wait()
        for r in range(rounds):
            order = list(range(len(texts)))
            shift = (i * 7 + r) % len(texts)
            order = order[shift:] + order[:shift]
            got: dict[int, dict[str, Any]] = {k: _one(texts[k]) for k in order}
            out[i * rounds + r] = [got[k] for k in range(len(texts))]

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("sequential", "threads"))
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    texts = queries()
    # Import (not parse) before the threads start, so only parsing races.
    import oda_analyst.sparql.validator  # noqa: F401, PLC0415 (the first import is what threads race on)
    from oda_analyst.ontology.model import load_ontology  # noqa: PLC0415 (the first import is what threads race on)

    load_ontology()
    if args.mode == "sequential":
        result: Any = sequential(texts)
    else:
        result = threaded(texts, args.threads, args.rounds)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
