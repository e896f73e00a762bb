"""Metric grounding bench: per-phrase decision, top-3 candidates and time per query.

Run: ``python bench/grounding.py [--accept 0.7] [--fail 0.5] [--margin 0.03] [--repeat 5]``.
Every phrasing carries the expected decision (ok / clarification / failed / non_metric) and, for
ok, the expected metric set; the 14 paper questions take theirs from the paper plans. Prints one
row per phrasing (✗ marks a miss; status, grounded metrics or the top-3 candidates with scores),
the model/index load time, the median / p95 time per query, the misses, and last the accuracy
line ``grounding: correct=<n>/<total>`` (correct: same decision and, for ok, the same metric set).
Use it to tune thresholds and to see which operator phrasings need a catalogue synonym.
"""

from __future__ import annotations

import argparse
import statistics
import time

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import load_paper_plans
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.grounding.ground import GroundingResult, Thresholds, ground_metrics

OK, ASK, FAIL, ROUTE = "ok", "clarification", "failed", "non_metric"


def _gpus(stem: str) -> tuple[str, ...]:
    return tuple(f"Gpu{i}_{stem}" for i in range(4))


FANS = tuple(f"fan{x}_{y}" for x in range(4) for y in range(2))
DIMMS = tuple(f"dimm{n}_temp" for n in range(16))
IPMI_GPU_CORE = tuple(f"gpu{n}_core_temp" for n in (0, 1, 3, 4))
IPMI_GPU_HBM = tuple(f"gpu{n}_mem_temp" for n in (0, 1, 3, 4))
PLC = "PLC_PLC_Q101."


def _cores(*sockets: int) -> tuple[str, ...]:
    return tuple(f"p{x}_core{y}_temp" for x in sockets for y in range(24))


# (phrasing, expected decision, expected metric set when the decision is ok). A vague phrase
# ('temperature', 'power' alone, 'network traffic' = in + out) must ask, never guess.
Expectation = tuple[str, str, tuple[str, ...]]
PHRASINGS: list[Expectation] = [
    ("the temperature of node 900", ASK, ()),
    ("power of the big nodes", ASK, ()),
    ("the flux capacitor reading of node 900", FAIL, ()),
    ("gpu and cpu utilisation for job 3423336", OK, (*_gpus("gpu_utilization"), "cpu_user")),
    ("temperature and power for node 900", ASK, ()),
    ("inlet temp of rack 12", OK, ("ambient",)),
    ("how hot is the air going into node 17", OK, ("ambient",)),
    ("intake air temperature for nodes 10-19 yesterday", OK, ("ambient",)),
    ("node 900 watts over the last 10 hours", OK, ("total_power",)),
    ("power draw of node 900", OK, ("total_power",)),
    ("energy used by node 4 today", ASK, ()),  # no node energy series: GPU energy only covers GPUs
    ("GPU-1 temperature on node 88", OK, ("Gpu1_gpu_temp",)),
    ("gpu die temp of node 88", OK, IPMI_GPU_CORE),
    ("gpu memory temperature of node 88", OK, _gpus("memory_temp")),
    ("GPU memory used for job 4835969", OK, _gpus("fb_used")),
    ("how busy were the GPUs of job 4835969", OK, _gpus("gpu_utilization")),
    ("gpu power of node 5", OK, _gpus("power_usage")),
    ("power of the GPU 2 on node 5", OK, ("Gpu2_power_usage",)),
    ("cpu core temperature of node 5 socket 1", OK, _cores(1)),
    ("cpu socket power for node 7", OK, ("p0_power", "p1_power")),
    ("dimm temperatures of node 7", OK, DIMMS),
    ("fan speed of node 7", OK, FANS),
    ("psu input voltage of node 7", OK, ("ps0_input_voltag", "ps1_input_voltag")),
    ("pcie temperature of node 7", OK, ("pcie",)),
    ("load average of node 7", OK, ("load_one",)),  # 'the load average' is the 1-min one
    ("free memory of node 7", OK, ("mem_free",)),
    ("network traffic of node 7", ASK, ()),  # bytes in or out?
    ("bytes received by node 7", OK, ("bytes_in",)),
    ("system cpu of node 7", OK, ("cpu_system",)),
    ("iowait of node 7", OK, ("cpu_wio",)),
    ("cluster gpu utilisation last week", OK, ("s21.cluster_gpu_util",)),
    ("system-level memory utilisation", OK, ("s21.cluster_mem_util",)),
    ("how many nodes are idle in the cluster", OK, ("total_nodes_idle",)),
    ("number of running jobs in the scheduler", OK, ("s21.jobs.tot_jobs",)),
    ("crac supply air temperature of CDZ05", OK, ("Supply_Air_Temperature",)),
    ("return air humidity of CRAC 3", OK, ("Return_Humidity",)),
    ("compressor load of the cooling units", OK, ("Compressor_Utilization",)),
    ("supply water temperature of the liquid cooling", OK, (f"{PLC}Temp_mandata",)),
    ("coolant flow of panel Q101", ASK, ()),  # flow meter 1 or 2?
    ("pump 101 status", OK, (f"{PLC}Stato_p101",)),
    ("data centre power", OK, ("Tot",)),
    ("facility power yesterday", OK, ("Tot",)),
    ("PUE over June 2022", ASK, ()),  # two PUE series (Pue, pue): the operator picks
    ("IT power of the data center", OK, ("Tot_ict",)),
    ("chiller power consumption", OK, ("Tot_chiller",)),
    ("active power of QGBT1", OK, ("Potenza_attiva",)),
    ("outdoor temperature last week", OK, ("temp",)),
    ("weather humidity", OK, ("humidity",)),
    ("wind speed at the site", OK, ("wind_speed",)),
    ("node health of node 12", OK, ("state",)),
    ("nagios alerts on node 12", OK, ("state",)),
    ("is node 12 up", OK, ("state",)),
    ("how many nodes are there in M100?", ROUTE, ()),
    ("which jobs ran on node 900 yesterday", ROUTE, ()),
    ("list the users", ROUTE, ()),
    ("total cpu hours of user 12 in May 2022", ROUTE, ()),
    ("the vibes of rack 3", FAIL, ()),
    ("thermal stress of node 900", ASK, ()),
    ("heat of node 900", ASK, ()),
    ("electricity of the nodes of rack 2", OK, ("total_power",)),
    # --- operator phrasings: thermal hazards
    ("which nodes have an inlet temperature above 35 C", OK, ("ambient",)),
    ("hottest nodes by inlet temperature yesterday", OK, ("ambient",)),
    ("how hot are the GPUs of node 300", OK, _gpus("gpu_temp")),
    ("gpu thermal throttling on node 120", OK, _gpus("thermal_violation")),
    ("cpu core temperatures above 80 C on rack 3", OK, _cores(0, 1)),
    ("vrm temperature of node 15", OK, ("p0_vdd_temp", "p1_vdd_temp")),
    ("gpu hbm temperature on node 88", OK, IPMI_GPU_HBM),
    ("dimm 4 temperature of node 7", OK, ("dimm4_temp",)),
    ("temperature of rack 3", ASK, ()),
    ("temperature", ASK, ()),
    ("temp", ASK, ()),
    # --- GPU utilisation and health
    ("gpu util of node 33", OK, _gpus("gpu_utilization")),
    ("gpu memory utilisation of job 4835969", OK, _gpus("mem_copy_utilization")),
    ("GPU power cap of node 5", OK, _gpus("power_management_limit")),
    ("gpu clock of node 12", OK, _gpus("sm_clock")),
    ("gpu xid errors on node 900", OK, _gpus("xid_errors")),
    ("gpu ecc errors on node 44", ASK, ()),  # single or double bit, volatile or lifetime?
    ("idle gpus in the cluster", OK, ("s21.totals.gpus_idle",)),
    ("utilisation of node 7", ASK, ()),
    # --- job failures and the scheduler
    ("which jobs failed on node 900 yesterday", ROUTE, ()),
    ("number of failed jobs last week", ROUTE, ()),
    ("pending jobs in the queue", OK, ("s21.jobs.tot_jobs",)),
    ("eligible jobs in the queue", OK, ("s21.jobs.eligible",)),
    ("queue length of the scheduler", OK, ("s21.jobs.tot_jobs",)),
    ("average queue wait time last week", OK, ("s21.jobs.avg_waiting_hour",)),
    ("p95 queue time last month", OK, ("s21.jobs.p95_waiting_hour",)),
    ("allocated nodes in the cluster", OK, ("total_nodes_alloc",)),
    ("idle nodes in the cluster", OK, ("total_nodes_idle",)),
    ("how many nodes are down", OK, ("total_nodes_down",)),
    ("is node 12 down", OK, ("state",)),
    ("how busy is the cluster", ASK, ()),  # cpu, gpu or memory allocation?
    # --- power
    ("total power of rack 12 yesterday", OK, ("total_power",)),
    ("power consumption of job 4835969", OK, ("total_power",)),
    ("cpu power of node 5", OK, ("p0_power", "p1_power")),
    ("psu power of node 7", OK, ("ps0_input_power", "ps1_input_power")),
    ("memory power of node 7", OK, ("p0_mem_power", "p1_mem_power")),
    ("electricity use of the data centre", OK, ("Tot",)),
    ("reactive power at the facility meter", OK, ("Mvar",)),
    ("power factor of the panels", OK, ("Fattore_di_potenza",)),
    ("power of the chillers", OK, ("Tot_chiller",)),
    ("power", ASK, ()),
    ("energy", ASK, ()),
    # --- cooling
    ("power of the cooling units", OK, ("Tot_cdz",)),
    ("fan speed of CRAC 2", OK, ("Fan_Speed",)),
    ("supply air temperature of the crac units", OK, ("Supply_Air_Temperature",)),
    ("filter pressure drop of the CRACs", OK, ("Filter_Pressure_Drop",)),
    ("return water temperature of the liquid cooling", OK, (f"{PLC}Temp_ritorno",)),
    ("is pump 102 running", OK, (f"{PLC}In_marcia_p102",)),
    ("free cooling status", OK, ("Free_Cooling_Status",)),
    ("underfloor pressure", OK, ("Underflow_Static_Pressure",)),
    ("room humidity in the data centre", OK, ("Return_Humidity",)),
    ("humidity", ASK, ()),  # outdoor or room air?
    # --- held out: written after the rules and synonyms above, expectations fixed first; the
    # two misses left are honest gaps (a verb for power; 'wait' alone), not tuned away
    ("gpu temperatures of job 4835969", OK, _gpus("gpu_temp")),
    ("how warm is rack 7", ASK, ()),
    ("inlet air temp of nodes 100-120 in the last 6 hours", OK, ("ambient",)),
    ("gpu 3 power draw on node 450", OK, ("Gpu3_power_usage",)),
    ("hbm temperature of the gpus on node 12", OK, IPMI_GPU_HBM),
    ("cooling water return temperature", OK, (f"{PLC}Temp_ritorno",)),
    ("return air temperature of the cracs", OK, ("Return_Air_Temperature",)),
    ("swap free on node 33", OK, ("swap_free",)),
    ("how loaded is node 7", ASK, ()),  # 1, 5 or 15 minutes?
    ("cpu idle of node 7", OK, ("cpu_idle",)),
    ("queued jobs in slurm", OK, ("s21.jobs.tot_jobs",)),
    ("mixed nodes in the cluster", OK, ("total_nodes_mixed",)),
    ("outside humidity", OK, ("humidity",)),
    ("total it power yesterday", OK, ("Tot_ict",)),
    ("facility energy in mwh", OK, ("Mwh",)),
    ("power usage effectiveness", ASK, ()),
    ("gpu power throttling on node 3", OK, _gpus("power_violation")),
    ("fan rpm of node 9", OK, FANS),
    ("nodes drawing more than 2000 watts", OK, ("total_power",)),
    ("gpu temperature over 85 degrees on rack 4", OK, _gpus("gpu_temp")),
    ("data centre humidity", OK, ("Return_Humidity",)),
    ("how many gpus are allocated in the cluster", OK, ("s21.totals.gpus_alloc",)),
    ("power supply input power of node 5", OK, ("ps0_input_power", "ps1_input_power")),
    ("average wait time of pending jobs", OK, ("s21.jobs.avg_waiting_hour",)),
]


# Paper questions the rules route away from metrics (the job table or the base graph answers
# them), and the one that names a bare 'temperature' of a node (asks, paper Q6).
_PAPER_NON_METRIC = {"Q1", "Q8", "Q12"}
_PAPER_ASK = {"Q6"}


def paper_expectations() -> list[Expectation]:
    """The 14 paper questions with the decision and metric set of their plans."""
    out: list[Expectation] = []
    for q in load_paper_plans():
        metrics = tuple(sorted({m.metric for plan in q.plans for m in plan.metrics}))
        status = ROUTE if q.id in _PAPER_NON_METRIC else ASK if q.id in _PAPER_ASK else OK
        out.append((q.question, status, metrics if status == OK else ()))
    return out


def is_correct(r: GroundingResult, status: str, metrics: tuple[str, ...]) -> bool:
    """Decision matches; for ok, the grounded metric set matches exactly."""
    if r.status != status:
        return False
    return status != OK or {m for _, m in r.metrics()} == set(metrics)


def _row(text: str, r: GroundingResult, correct: bool) -> str:
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
    mark = " " if correct else "✗"
    return f"{mark} {r.status:<13} {text[:58]:<58} {detail}"


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
    cases = [*PHRASINGS, *paper_expectations()]
    times: list[float] = []
    counts: dict[str, int] = {}
    misses: list[str] = []
    for text, status, metrics in cases:
        result = ground_metrics(text, thresholds=th)
        for _ in range(args.repeat):
            t = time.perf_counter()
            ground_metrics(text, thresholds=th)
            times.append((time.perf_counter() - t) * 1000)
        counts[result.status] = counts.get(result.status, 0) + 1
        correct = is_correct(result, status, metrics)
        if not correct:
            want = f"{status} {', '.join(metrics[:3])}" + (" …" if len(metrics) > 3 else "")
            misses.append(f"  {text[:58]:<58} expected {want}")
        print(_row(text, result, correct))
    # a fresh index from the on-disk cache (the model itself stays loaded)
    t = time.perf_counter()
    if index is not None:
        embeddings.build_index(load_catalogue(), index.embedder)
    cache_ms = (time.perf_counter() - t) * 1000
    times.sort()
    print(
        f"\n{len(cases)} phrasings: {counts}; model+index load {load_s:.1f} s, index from cache "
        f"{cache_ms:.0f} ms; per query median {statistics.median(times):.1f} ms, "
        f"p95 {times[int(0.95 * (len(times) - 1))]:.1f} ms"
    )
    if misses:
        print("misses:", *misses, sep="\n")
    print(f"grounding: correct={len(cases) - len(misses)}/{len(cases)}")


if __name__ == "__main__":
    main()
