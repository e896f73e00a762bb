"""Benchmark of the SPARQL validator: rejection of ontology-violating mutants, false rejections.

Gold queries: the compiler's output for the paper's 14 questions (``ontology/examples/
paper_plans.yaml``) and the curated examples (``ontology/examples/examples.yaml``). For each
mutation kind (bench/mutants.py) at least ``--per-kind`` mutants are generated; an independent
oracle in the mutation operator marks the ones still valid by chance, which are counted apart.

    python bench/validator.py [--per-kind 1000] [--seed 7]

Last line, for scripts:
    validator: rejected=<fraction of violating mutants rejected> false_rejections=<n> median_ms=<ms>
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery

from mutants import KINDS, Gold, generate
from oda_analyst.ontology.model import OntologyModel, load_ontology
from oda_analyst.ontology.plan import load_paper_plans
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.parse import parse
from oda_analyst.sparql.validator import ValidationReport, validate

GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/bench"
EXAMPLES = Path(__file__).resolve().parents[1] / "ontology" / "examples" / "examples.yaml"


def curated_golds(path: Path = EXAMPLES) -> list[Gold]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Gold(f"example:{e['id']}", e["sparql"]) for e in data["examples"]]


def compiled_golds() -> tuple[list[Gold], str]:
    """The compiler's SPARQL for every plan of the paper's questions, and what they are."""
    golds = []
    for question in load_paper_plans():
        for i, plan in enumerate(question.plans):
            compiled = compile_plan(plan, graph=GRAPH)
            golds.append(Gold(f"compiled:{question.id}.{i}", compiled.sparql))
    return golds, f"{len(golds)} compiled plans of the 14 paper questions"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def rdflib_parse(text: str) -> object:
    """rdflib's reference path alone: its parser and algebra translation."""
    return translateQuery(parseQuery(text))


def timed_validate(text: str, model: OntologyModel) -> tuple[float, ValidationReport]:
    start = time.perf_counter()
    report = validate(text, model=model, allowed_graph=GRAPH)
    return (time.perf_counter() - start) * 1000.0, report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--per-kind", type=int, default=1000, help="mutants per kind (>= 1000)")
    args.add_argument("--seed", type=int, default=7)
    opts = args.parse_args(argv)

    model = load_ontology()
    compiled, compiled_note = compiled_golds()
    golds = compiled + curated_golds()
    print(f"gold queries: {len(golds)} ({compiled_note}; {len(golds) - len(compiled)} curated)")

    for g in golds[:3]:  # warm-up: grammar copy, ontology, caches
        validate(g.sparql, model=model, allowed_graph=GRAPH)

    times: list[float] = []
    false_rejections: list[tuple[str, ValidationReport]] = []
    for g in golds:
        ms, report = timed_validate(g.sparql, model)
        times.append(ms)
        if not report.ok:
            false_rejections.append((g.id, report))
    parse_only = [timed(partial(rdflib_parse, g.sparql)) for g in golds]
    fast_parse = [timed(partial(parse, g.sparql)) for g in golds]

    header = (f"{'kind':22s} {'generated':>9s} {'violating':>9s} {'rejected':>9s} {'rate':>8s} "
              f"{'by-chance':>9s} {'bc-rejected':>11s} {'median ms':>9s}")  # fmt: skip
    print()
    print(header)
    print("-" * len(header))
    total_violating = total_rejected = 0
    misses: list[tuple[str, str, str]] = []
    codes_by_kind: dict[str, Counter[str]] = {}
    for kind in KINDS:
        mutants = generate(golds, kind, opts.per_kind, model, seed=opts.seed)
        kind_times: list[float] = []
        violating = rejected = chance = chance_rejected = 0
        codes: Counter[str] = Counter()
        for m in mutants:
            ms, report = timed_validate(m.sparql, model)
            kind_times.append(ms)
            ok = report.ok
            codes.update(report.codes)
            if m.violating:
                violating += 1
                rejected += not ok
                if ok:
                    misses.append((kind, m.gold_id, m.note))
            else:
                chance += 1
                chance_rejected += not ok
        times.extend(kind_times)
        codes_by_kind[kind] = codes
        total_violating += violating
        total_rejected += rejected
        rate = rejected / violating if violating else float("nan")
        kind_median = statistics.median(kind_times)
        print(f"{kind:22s} {len(mutants):9d} {violating:9d} {rejected:9d} {rate:8.2%} "
              f"{chance:9d} {chance_rejected:11d} {kind_median:9.1f}")  # fmt: skip
    print()
    print(f"gold queries: {len(golds)}, false rejections: {len(false_rejections)}")
    for gid, report in false_rejections:
        print(f"  FALSE REJECTION {gid}: {[d.to_dict() for d in report.errors]}")
    for kind, gid, note in misses[:20]:
        print(f"  MISSED {kind} {gid}: {note}")
    print("error codes per kind:")
    for kind, codes in codes_by_kind.items():
        top = ", ".join(f"{c}={n}" for c, n in codes.most_common(5))
        print(f"  {kind:22s} {top}")
    median = statistics.median(times)
    print(
        f"validation ms over {len(times)} queries: median {median:.1f}, "
        f"p95 {pct(times, 0.95):.1f}; "
        f"gold only: median {statistics.median(times[: len(golds)]):.1f}"
    )
    print(
        f"parse only, gold queries: rdflib parseQuery+translateQuery median "
        f"{statistics.median(parse_only):.1f} ms; validator's parse (fast grammar) median "
        f"{statistics.median(fast_parse):.1f} ms"
    )
    fraction = total_rejected / total_violating if total_violating else float("nan")
    print(
        f"validator: rejected={fraction:.4f} false_rejections={len(false_rejections)} "
        f"median_ms={median:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
