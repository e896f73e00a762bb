"""Making SPARQL parsing safe under concurrency: a lock, a per-thread grammar or a process pool.

rdflib's pyparsing grammar is not thread-safe (the first call of each parse action records its
arity in a closure shared by every copy of the grammar). Three ways out, measured on the curated
examples (``ontology/examples/examples.yaml``), each validated ``--rounds`` times:

- **lock** (what ``oda_analyst.sparql.grammar`` does): ``--threads`` threads share the work, one
  parse at a time;
- **per-thread grammar**: the cost of one more deep copy of the grammar (time, memory) and how
  many parse-action functions the copy still shares with the original (a copy does not isolate
  the state that breaks);
- **process pool**: ``--workers`` processes (spawned) run ``validate``; start-up and throughput.

    python bench/parse_concurrency.py [--threads 8] [--workers 2] [--rounds 3]

Last line, for scripts:
    parse_concurrency: sequential_qps=… lock_qps=… lock_p95_ms=… pool_qps=… pool_start_s=…
    copy_s=… copy_mb=… shared_actions=…
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import resource
import statistics
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml
from pyparsing import ParserElement

EXAMPLES = Path(__file__).resolve().parents[1] / "ontology" / "examples" / "examples.yaml"
GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/bench"


def texts() -> list[str]:
    data = yaml.safe_load(EXAMPLES.read_text(encoding="utf-8"))
    return [e["sparql"] for e in data["examples"]]


def _validate(text: str) -> dict[str, Any]:
    from oda_analyst.sparql.validator import validate  # noqa: PLC0415 (the first import is what threads race on)

    return validate(text, allowed_graph=GRAPH).to_dict()


def _warm() -> None:
    from oda_analyst.ontology.model import load_ontology  # noqa: PLC0415 (the first import is what threads race on)

    load_ontology()
    _validate(texts()[0])


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def sequential(work: list[str]) -> tuple[float, float]:
    latencies = []
    start = time.perf_counter()
    for text in work:
        t0 = time.perf_counter()
        _validate(text)
        latencies.append(time.perf_counter() - t0)
    return len(work) / (time.perf_counter() - start), statistics.median(latencies) * 1000


def locked_threads(work: list[str], threads: int) -> tuple[float, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def one(text: str) -> None:
        t0 = time.perf_counter()
        _validate(text)
        with lock:
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, work))
    return len(work) / (time.perf_counter() - start), _p95(latencies) * 1000


def _actions(grammar: ParserElement) -> set[int]:
    """ids of the parse-action functions reachable from ``grammar``."""
    seen: set[int] = set()
    found: set[int] = set()
    stack = [grammar]
    while stack:
        element = stack.pop()
        if id(element) in seen:
            continue
        seen.add(id(element))
        found.update(id(fn) for fn in element.parseAction)
        stack.extend(getattr(element, "exprs", None) or [])
        inner = getattr(element, "expr", None)
        if isinstance(inner, ParserElement):
            stack.append(inner)
    return found


def grammar_copy() -> tuple[float, float, int, int]:
    """(seconds, MB, shared parse actions, all parse actions) of one more grammar copy."""
    from oda_analyst.sparql import grammar  # noqa: PLC0415 (the first import is what threads race on)

    original = grammar._fast_grammar()
    tracemalloc.start()
    start = time.perf_counter()
    copy = grammar._fast_grammar.__wrapped__()
    seconds = time.perf_counter() - start
    size = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    mine, theirs = _actions(copy), _actions(original)
    return seconds, size, len(mine & theirs), len(mine)


def process_pool(work: list[str], workers: int) -> tuple[float, float, float]:
    """(qps once started, start-up seconds, peak RSS MB of a worker)."""
    ctx = mp.get_context("spawn")
    start = time.perf_counter()
    with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_warm) as pool:
        list(pool.map(_validate, work[:workers]))  # every worker up and warm
        started = time.perf_counter() - start
        t0 = time.perf_counter()
        list(pool.map(_validate, work, chunksize=1))
        qps = len(work) / (time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return qps, started, peak_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = texts() * args.rounds
    _warm()
    seq_qps, seq_ms = sequential(work)
    print(f"sequential: {len(work)} validations, {seq_qps:.1f}/s, median {seq_ms:.1f} ms")
    lock_qps, lock_p95 = locked_threads(work, args.threads)
    print(f"lock, {args.threads} threads: {lock_qps:.1f}/s, p95 latency {lock_p95:.1f} ms")
    copy_s, copy_mb, shared, total = grammar_copy()
    print(f"per-thread grammar: one copy {copy_s:.2f} s, {copy_mb:.1f} MB; it shares {shared} of "
          f"its {total} parse actions with the original")  # fmt: skip
    pool_qps, pool_start, pool_mb = process_pool(work, args.workers)
    print(f"process pool, {args.workers} workers: start-up {pool_start:.1f} s, {pool_qps:.1f}/s, "
          f"peak worker RSS {pool_mb:.0f} MB")  # fmt: skip
    print(f"parse_concurrency: sequential_qps={seq_qps:.1f} lock_qps={lock_qps:.1f} "
          f"lock_p95_ms={lock_p95:.1f} pool_qps={pool_qps:.1f} pool_start_s={pool_start:.1f} "
          f"copy_s={copy_s:.2f} copy_mb={copy_mb:.1f} shared_actions={shared}/{total}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
