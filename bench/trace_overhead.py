"""Cost of tracing: spans through the process's provider (trace file + any LangFuse batch), and
what one real retriever request's trace holds.

Part 1 times ``--traces`` traces of ``--spans`` nested spans each, through the real provider
(every span goes to the trace file exporter; the file is written when each trace's root ends),
against the same loop with OpenTelemetry's no-op tracer (the cost of the instrumentation
calls themselves). Part 2 (``--request``) answers one question on a generated ``tiny`` lake
and reports the request's time, its span count and trace file size, and the provenance
record's size, and the time to replay it.

    python bench/trace_overhead.py [--traces 200] [--spans 20] [--request]

Last line, for scripts:
    tracing: per_span_us=… noop_per_span_us=… per_trace_file_ms=… [request_s=… spans=…]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry.trace import NoOpTracer

from oda_analyst.config import load_settings
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.observability.tracing import request_trace, span
from oda_analyst.retriever.replay import replay
from oda_analyst.retriever.service import Retriever


def _spans_loop(traces: int, spans: int, settings: object) -> float:
    start = time.perf_counter()
    for _ in range(traces):
        with request_trace("bench", settings=settings):  # type: ignore[arg-type]
            for j in range(spans - 1):
                with span(f"step {j}", {"oda.stage": "bench", "n": j}):
                    pass
    return time.perf_counter() - start


def _noop_loop(traces: int, spans: int) -> float:
    tracer = NoOpTracer()
    start = time.perf_counter()
    for _ in range(traces):
        with tracer.start_as_current_span("bench"):
            for j in range(spans - 1):
                with tracer.start_as_current_span(f"step {j}") as s:
                    s.set_attribute("n", j)
    return time.perf_counter() - start


def _request(tmp: Path) -> dict[str, float]:

    lake = tmp / "lake"
    generate(build_spec("tiny", nodes="900", metrics="total_power"), lake)
    settings = load_settings(lake=str(lake), data_dir=tmp / "data", redis_url=None,
                             sparql_endpoint=None)  # fmt: skip
    retriever = Retriever(settings)
    question = "average node power of node 900 on 1 June 2022 from 00:00 to 01:00"
    as_of = datetime(2022, 6, 15, tzinfo=UTC)
    retriever.query(question, as_of=as_of)  # warm: embeddings, ontology, graph store
    start = time.perf_counter()
    got = retriever.query(question, as_of=as_of)
    seconds = time.perf_counter() - start
    trace = Path(str(got.trace))
    start = time.perf_counter()
    assert replay(retriever, got.request_id).unchanged
    replay_s = time.perf_counter() - start
    return {
        "request_s": round(seconds, 3),
        "replay_s": round(replay_s, 3),
        "spans": len(json.loads(trace.read_text())["spans"]),
        "trace_bytes": trace.stat().st_size,
        "provenance_bytes": len(json.dumps(got.provenance)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=200)
    parser.add_argument("--spans", type=int, default=20, help="spans per trace, root included")
    parser.add_argument("--request", action="store_true", help="also time a real request")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oda-trace-bench-") as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data")
        _spans_loop(5, args.spans, settings)  # warm
        total = args.traces * args.spans
        traced = _spans_loop(args.traces, args.spans, settings)
        noop = _noop_loop(args.traces, args.spans)
        figures: dict[str, float] = {
            "per_span_us": round(traced / total * 1e6, 1),
            "noop_per_span_us": round(noop / total * 1e6, 2),
            "per_trace_file_ms": round(traced / args.traces * 1e3, 2),
        }
        print(f"{args.traces} traces x {args.spans} spans: {traced:.3f} s traced, "
              f"{noop:.4f} s with the no-op tracer")  # fmt: skip
        if args.request:
            req = _request(Path(tmp))
            print(
                f"one retriever request (warm): {req['request_s']} s, its replay "
                f"{req['replay_s']} s, {req['spans']} spans, "
                f"trace file {req['trace_bytes']:,} B, provenance {req['provenance_bytes']:,} B"
            )
            figures.update(req)
    print("tracing: " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
