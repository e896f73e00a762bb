"""Metric grounding bench: per-phrase decision, top-3 candidates and time per query.

Run: ``python bench/grounding.py [--accept 0.7] [--fail 0.5] [--margin 0.03] [--repeat 5]``.
Prints one row per phrasing (status, grounded metrics or the top-3 candidates with scores), then
the model/index load time and the median / p95 time per query. Use it to tune thresholds and to
see which operator phrasings need a catalogue synonym.
"""

from __future__ import annotations

import argparse
import statistics
import time

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import load_paper_plans
from oda_analyst.retriever import embeddings
from oda_analyst.retriever.grounding import GroundingResult, Thresholds, ground_metrics

PHRASINGS = [
    "the temperature of node 900",
    "power of the big nodes",
    "the flux capacitor reading of node 900",
    "gpu and cpu utilisation for job 3423336",
    "temperature and power for node 900",
    "inlet temp of rack 12",
    "how hot is the air going into node 17",
    "intake air temperature for nodes 10-19 yesterday",
    "node 900 watts over the last 10 hours",
    "power draw of node 900",
    "energy used by node 4 today",
    "GPU-1 temperature on node 88",
    "gpu die temp of node 88",
    "gpu memory temperature of node 88",
    "GPU memory used for job 4835969",
    "how busy were the GPUs of job 4835969",
    "gpu power of node 5",
    "power of the GPU 2 on node 5",
    "cpu core temperature of node 5 socket 1",
    "cpu socket power for node 7",
    "dimm temperatures of node 7",
    "fan speed of node 7",
    "psu input voltage of node 7",
    "pcie temperature of node 7",
    "load average of node 7",
    "free memory of node 7",
    "network traffic of node 7",
    "bytes received by node 7",
    "system cpu of node 7",
    "iowait of node 7",
    "cluster gpu utilisation last week",
    "system-level memory utilisation",
    "how many nodes are idle in the cluster",
    "number of running jobs in the scheduler",
    "crac supply air temperature of CDZ05",
    "return air humidity of CRAC 3",
    "compressor load of the cooling units",
    "supply water temperature of the liquid cooling",
    "coolant flow of panel Q101",
    "pump 101 status",
    "data centre power",
    "facility power yesterday",
    "PUE over June 2022",
    "IT power of the data center",
    "chiller power consumption",
    "active power of QGBT1",
    "outdoor temperature last week",
    "weather humidity",
    "wind speed at the site",
    "node health of node 12",
    "nagios alerts on node 12",
    "is node 12 up",
    "how many nodes are there in M100?",
    "which jobs ran on node 900 yesterday",
    "list the users",
    "total cpu hours of user 12 in May 2022",
    "the vibes of rack 3",
    "thermal stress of node 900",
    "heat of node 900",
    "electricity of the nodes of rack 2",
]


def _row(text: str, r: GroundingResult) -> str:
    if r.status == "ok":
        detail = ", ".join(f"{g.metric}({g.score:.2f})" for g in r.grounded[:4]) + (
            f" +{len(r.grounded) - 4}" if len(r.grounded) > 4 else ""
        )
    elif r.status == "non_metric" and r.intent is not None:
        detail = f"route: {r.intent.sub_kind}"
    else:
        cands = r.clarification.candidates if r.clarification else (
            r.outcomes[-1].candidates if r.outcomes else ()
        )  # fmt: skip
        detail = ", ".join(f"{c.metric}({c.score:.2f})" for c in cands[:3]) or r.message[:60]
    return f"{r.status:<13} {text[:58]:<58} {detail}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fail", type=float, default=0.5)
    ap.add_argument("--accept", type=float, default=0.7)
    ap.add_argument("--margin", type=float, default=0.03)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per phrasing")
    args = ap.parse_args()
    th = Thresholds(fail=args.fail, accept=args.accept, margin=args.margin)

    t0 = time.perf_counter()
    index = embeddings.get_index(load_catalogue())
    load_s = time.perf_counter() - t0
    if index is None:
        print(f"no embedding model: {embeddings.embedder_unavailable_reason()}")
    texts = [*PHRASINGS, *(q.question for q in load_paper_plans())]
    times: list[float] = []
    counts: dict[str, int] = {}
    for text in texts:
        result = ground_metrics(text, thresholds=th)
        for _ in range(args.repeat):
            t = time.perf_counter()
            ground_metrics(text, thresholds=th)
            times.append((time.perf_counter() - t) * 1000)
        counts[result.status] = counts.get(result.status, 0) + 1
        print(_row(text, result))
    # a fresh index from the on-disk cache (the model itself stays loaded)
    t = time.perf_counter()
    if index is not None:
        embeddings.build_index(load_catalogue(), index.embedder)
    cache_ms = (time.perf_counter() - t) * 1000
    times.sort()
    print(
        f"\n{len(texts)} phrasings: {counts}; model+index load {load_s:.1f} s, index from cache "
        f"{cache_ms:.0f} ms; per query median {statistics.median(times):.1f} ms, "
        f"p95 {times[int(0.95 * (len(times) - 1))]:.1f} ms"
    )


if __name__ == "__main__":
    main()
