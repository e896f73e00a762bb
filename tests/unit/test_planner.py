"""The rule-based planner: paper questions (Appendix A) and operator phrasings → QueryPlans.

Stage-1 inputs are real: ``extract_entities`` and ``parse_time`` (as_of 2022-06-02T00:00Z) run on
each question; only the grounded metrics are written out (metric grounding is another stage).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.ontology.plan import QueryPlan, load_paper_plans, parse_plan
from oda_analyst.reading.rules.cues import read_intent
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.retriever.planning.planner import PlannerInput, PlannerOutput, plan_question
from oda_analyst.sparql.compiler import compile_plan
from reading_helpers import said

AS_OF = datetime(2022, 6, 2, tzinfo=UTC)
GRAPH = "urn:oda:test:planner"
POWER = ("ipmi", "total_power")
AMBIENT = ("ipmi", "ambient")
GPU_UTIL = tuple(("ganglia", f"Gpu{i}_gpu_utilization") for i in range(4))
GPU_TEMP = tuple(("ganglia", f"Gpu{i}_gpu_temp") for i in range(4))
WEATHER_TEMP = ("weather", "temp")
CLUSTER_CPU, CLUSTER_GPU = ("slurm", "s21.cluster_cpu_util"), ("slurm", "s21.cluster_gpu_util")

# The paper's grounded metrics (Table I / Appendix A); Q1, Q8 and Q12 ground none.
PAPER_METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "Q1": (),
    "Q2": (POWER,),
    "Q3": (GPU_UTIL[0],),
    "Q4": (AMBIENT,),
    "Q5": (AMBIENT,),
    "Q6": (AMBIENT, POWER),
    "Q7": GPU_UTIL,
    "Q8": (),
    "Q9": (POWER,),
    "Q10": (CLUSTER_CPU, CLUSTER_GPU),
    "Q11": (WEATHER_TEMP,),
    "Q12": (),
    "Q13": (AMBIENT, ("ganglia", "cpu_system"), *GPU_UTIL, POWER),
    "Q14": (POWER,),
}


def plan_for(
    question: str, metrics: tuple[tuple[str, str], ...] = (), kind: str | None = None
) -> PlannerOutput:
    read = said(question, AS_OF)
    inp = PlannerInput(read, read.entities, read.time.windows, metrics, kind)
    return plan_question(inp)


def sorted_ids(plan: QueryPlan) -> QueryPlan:
    """Entity ids in ascending order: the order of a VALUES list does not change its meaning."""
    data = plan.model_dump(mode="json")
    for sel in data["entities"]:
        sel["ids"] = sorted(sel["ids"], key=str)
    return parse_plan(data)


def sparql(plan: QueryPlan) -> str:
    return compile_plan(sorted_ids(plan), graph=GRAPH).sparql


# --- the paper's 14 questions ---------------------------------------------------------------

PAPER = {q.id: q for q in load_paper_plans()}


def test_every_paper_question_has_its_metrics_written_out() -> None:
    assert set(PAPER) == set(PAPER_METRICS)


@pytest.mark.parametrize("qid", list(PAPER_METRICS))
def test_paper_question_plans_compile_to_the_paper_sparql(qid: str) -> None:
    # Normalisation (the only one): entity ids are sorted before compiling, because the entity
    # extractor returns ids sorted (Q7: 3423336, 3776044, 4835969) while paper_plans.yaml keeps
    # the question's order; a VALUES list in another order means the same.
    question = PAPER[qid]
    out = plan_for(question.question, PAPER_METRICS[qid])
    assert out.missing == ()
    assert [sparql(p) for p in out.plans] == [sparql(p) for p in question.plans]


def test_paper_q7_differs_from_the_yaml_only_in_id_order() -> None:
    out = plan_for(PAPER["Q7"].question, PAPER_METRICS["Q7"])
    got, want = out.plans[0].model_dump(), PAPER["Q7"].plans[0].model_dump()
    assert got["entities"][0]["ids"] == sorted(want["entities"][0]["ids"])
    got["entities"], want["entities"] = [], []
    assert got == want


# --- operator phrasings --------------------------------------------------------------------


def window(start: str, end: str) -> dict[str, str]:
    return {"start": f"2022-{start}:00Z", "end": f"2022-{end}:00Z"}


JUNE1 = window("06-01T00:00", "06-02T00:00")
NODE_ALL = {"kind": "node", "all": True}
JOB_ALL = {"kind": "job", "all": True}


def nodes(*ids: int) -> dict[str, Any]:
    return {"kind": "node", "ids": list(ids)}


def jobs(*ids: int) -> dict[str, Any]:
    return {"kind": "job", "ids": list(ids)}


def racks(*ids: int) -> dict[str, Any]:
    return {"kind": "rack", "ids": list(ids)}


def refs(*metrics: tuple[str, str]) -> list[dict[str, str]]:
    return [{"plugin": p, "metric": m} for p, m in metrics]


def agg(fn: str, of: str = "value") -> dict[str, str]:
    return {"fn": fn, "of": of}


def job_filter(field: str, value: Any, op: str = "eq") -> dict[str, Any]:
    return {"about": "job", "field": field, "op": op, "value": value}


# (question, grounded metrics, expected plans). Every plan is written out in full.
CASES: list[tuple[str, tuple[tuple[str, str], ...], list[dict[str, Any]]]] = [
    # anomaly detection / thermal hazards
    (
        "What was the maximum inlet temperature per rack on 1 June 2022 between 10:00 and 11:00?",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL],
          "window": window("06-01T10:00", "06-01T11:00"), "aggregations": [agg("max")],
          "group_by": ["rack"]}],
    ),
    (
        "Which 5 nodes had the highest peak inlet temperature yesterday?",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL], "window": JUNE1,
          "aggregations": [agg("max")], "group_by": ["node"],
          "order_by": [{"key": "max_value", "desc": True}], "limit": 5}],
    ),
    (
        "Which node had the lowest inlet temperature on 1 June 2022 from 08:00 to 09:00?",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL],
          "window": window("06-01T08:00", "06-01T09:00"), "aggregations": [agg("min")],
          "group_by": ["node"], "order_by": [{"key": "min_value", "desc": False}], "limit": 1}],
    ),
    (
        "Which rack had the highest average inlet temperature on 1 June 2022?",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL], "window": JUNE1,
          "aggregations": [agg("avg")], "group_by": ["rack"],
          "order_by": [{"key": "avg_value", "desc": True}], "limit": 1}],
    ),
    (
        "Count the readings above 40 °C of the inlet temperature for all nodes on 1 June 2022",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL], "window": JUNE1,
          "filters": [{"about": "value", "op": "gt", "value": 40.0}],
          "aggregations": [agg("count")]}],
    ),
    (
        "Maximum GPU temperature of each GPU of node 77 on 1 June 2022 above 80 C",
        GPU_TEMP,
        [{"target": "readings", "metrics": refs(*GPU_TEMP), "entities": [nodes(77)],
          "window": JUNE1, "filters": [{"about": "value", "op": "gt", "value": 80.0}],
          "aggregations": [agg("max")], "group_by": ["gpu"]}],
    ),
    (
        "Give me the median and p99 power of nodes 10-12 on 1 June 2022 from 08:00 to 12:00",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER),
          "entities": [nodes(10, 11, 12)],
          "window": window("06-01T08:00", "06-01T12:00"),
          "aggregations": [agg("median"), agg("p99")], "group_by": ["node"]}],
    ),
    (
        "90th percentile of the inlet temperature for all nodes on 1 June 2022",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL], "window": JUNE1,
          "aggregations": [agg("p90")]}],
    ),
    (
        "Standard deviation of the total power of rack 5 on 1 June 2022",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [racks(5)],
          "window": JUNE1, "aggregations": [agg("std")]}],
    ),
    (
        "For each node of rack 12, give the min/max/avg power on 1 June 2022 from 00:00 to 06:00",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [racks(12)],
          "window": window("06-01T00:00", "06-01T06:00"),
          "aggregations": [agg("min"), agg("max"), agg("avg")], "group_by": ["node"]}],
    ),
    (
        "Minimum, mean and maximum inlet temperature of rack 2 by node on 1 June 2022",
        (AMBIENT,),
        [{"target": "readings", "metrics": refs(AMBIENT), "entities": [racks(2)],
          "window": JUNE1, "aggregations": [agg("min"), agg("avg"), agg("max")],
          "group_by": ["node"]}],
    ),
    (
        # the averages are of the drawn readings (Reading.analysis.over_readings): the retrieval
        # brings the series and the analysis computes each node's mean from it
        "Average power of nodes 1 and 2 on 1 June 2022 comparing the nodes, plotted over time",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [nodes(1, 2)],
          "window": JUNE1}],
    ),
    (
        "Overall average power of nodes 1, 2 and 3 on 1 June 2022",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER),
          "entities": [nodes(1, 2, 3)], "window": JUNE1,
          "aggregations": [agg("avg")]}],
    ),
    (
        "Sum of the power of rack 7 per hour on 1 June 2022",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [racks(7)],
          "window": JUNE1, "aggregations": [agg("sum")], "group_by": ["hour"]}],
    ),
    # GPU utilisation
    (
        "avg GPU utilisation per GPU for node 900 on 1 June 2022 from 08:00 to 09:00",
        GPU_UTIL,
        [{"target": "readings", "metrics": refs(*GPU_UTIL), "entities": [nodes(900)],
          "window": window("06-01T08:00", "06-01T09:00"), "aggregations": [agg("avg")],
          "group_by": ["gpu"]}],
    ),
    (
        "Hourly GPU-0 utilisation of node 5 on 1 June 2022",
        (GPU_UTIL[0],),
        [{"target": "readings", "metrics": refs(GPU_UTIL[0]), "entities": [nodes(5)],
          "window": JUNE1, "granularity": "hour"}],
    ),
    (
        "For jobs 101, 102 compare the mean GPU utilisation during the jobs",
        GPU_UTIL,
        [{"target": "readings", "metrics": refs(*GPU_UTIL), "entities": [jobs(101, 102)],
          "job_window": True, "aggregations": [agg("avg")], "group_by": ["job"]}],
    ),
    (
        "GPU temperature of the nodes of job 123456",
        GPU_TEMP,
        [{"target": "readings", "metrics": refs(*GPU_TEMP), "entities": [jobs(123456)],
          "job_window": True}],
    ),
    (
        "Power of the nodes of job 123456 on 1 June 2022 from 08:00 to 09:00",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [jobs(123456)],
          "window": window("06-01T08:00", "06-01T09:00")}],
    ),
    (
        "Average daily cluster GPU utilisation and CPU utilisation over 1-10 June 2022",
        (CLUSTER_GPU, CLUSTER_CPU),
        [{"target": "readings", "metrics": refs(CLUSTER_GPU, CLUSTER_CPU),
          "entities": [{"kind": "system", "ids": ["M100"]}],
          "window": window("06-01T00:00", "06-11T00:00"), "aggregations": [agg("avg")],
          "group_by": ["metric", "day"]}],
    ),
    # job failures
    (
        "How many failed jobs were there per day during the last week?",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": window("05-23T00:00", "05-30T00:00"),
          "filters": [job_filter("state", "FAILED")], "aggregations": [agg("count", "job")],
          "group_by": ["day"]}],
    ),
    (
        "Number of jobs that failed, timed out or ran out of memory on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("state", ["FAILED", "TIMEOUT", "OUT_OF_MEMORY"], "in")],
          "aggregations": [agg("count", "job")]}],
    ),
    (
        "Count the jobs that exceeded their wall-clock time limit on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("state", "TIMEOUT")], "aggregations": [agg("count", "job")]}],
    ),
    (
        # Slurm cancels a job that hits its limit, and calls that TIMEOUT, not CANCELLED
        "Count the jobs cancelled after hitting their time limit on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("state", "TIMEOUT")], "aggregations": [agg("count", "job")]}],
    ),
    (
        "Number of jobs of user 42 that ran out of time on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("state", "TIMEOUT"), job_filter("user", 42)],
          "aggregations": [agg("count", "job")]}],
    ),
    (
        "Number of timed out jobs of user 42 on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("state", "TIMEOUT"), job_filter("user", 42)],
          "aggregations": [agg("count", "job")]}],
    ),
    (
        "Show the job count per hour of completed jobs on node 900 on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL, nodes(900)], "window": JUNE1,
          "filters": [job_filter("state", "COMPLETED")], "aggregations": [agg("count", "job")],
          "group_by": ["hour"]}],
    ),
    (
        "What were the 5 longest multi-node jobs on partition m100_usr_prod on 1 June 2022?",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("num_nodes", 1, "gt"), job_filter("partition", "m100_usr_prod")],
          "derived": ["job_duration"], "order_by": [{"key": "duration_h", "desc": True}],
          "limit": 5}],
    ),
    (
        "List the shortest 10 jobs of user 7 on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("user", 7)], "derived": ["job_duration"],
          "order_by": [{"key": "duration_h", "desc": False}], "limit": 10}],
    ),
    (
        "Which user ran the most jobs in the last 7 days?",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": window("05-26T00:00", "06-02T00:00"),
          "aggregations": [agg("count", "job")], "group_by": ["user"],
          "order_by": [{"key": "count_job", "desc": True}, {"key": "user_id", "desc": False}],
          "limit": 1}],
    ),
    (
        "What is the coefficient of variation of power per job for completed jobs on 1 June 2022?",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("state", "COMPLETED")],
          "aggregations": [agg("cv"), agg("avg")], "group_by": ["job"]}],
    ),
    # power prediction / accounting
    (
        "Top 10 users by CPU hours on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1, "derived": ["cpu_hours"],
          "aggregations": [agg("sum", "cpu_hours"), agg("count", "job")], "group_by": ["user"],
          "order_by": [{"key": "sum_cpu_hours", "desc": True}], "limit": 10}],
    ),
    (
        "GPU hours by user for multi-node jobs over 1-10 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": window("06-01T00:00", "06-11T00:00"),
          "filters": [job_filter("num_nodes", 1, "gt")], "derived": ["gpu_hours"],
          "aggregations": [agg("sum", "gpu_hours"), agg("count", "job")], "group_by": ["user"]}],
    ),
    (
        "Daily GPU hours of single-node jobs over 1-10 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": window("06-01T00:00", "06-11T00:00"),
          "filters": [job_filter("num_nodes", 1)], "derived": ["gpu_hours"],
          "aggregations": [agg("sum", "gpu_hours"), agg("count", "job")], "group_by": ["day"]}],
    ),
    (
        "CPU hours of jobs 11, 12 and 13",
        (),
        [{"target": "jobs", "entities": [jobs(11, 12, 13)],
          "derived": ["cpu_hours"]}],
    ),
    (
        "Average duration of the jobs of user 9 on 1 June 2022",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1,
          "filters": [job_filter("user", 9)], "derived": ["job_duration"],
          "aggregations": [agg("avg", "duration_h"), agg("count", "job")]}],
    ),
    (
        "Mean power of the jobs of user 5 and user 6 on 1 June 2022",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("user", [5, 6], "in")],
          "aggregations": [agg("avg")], "group_by": ["user"]}],
    ),
    (
        "Peak power of the top-3 longest GPU jobs on 1 June 2022 over their whole duration, "
        "with a time series",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("num_gpus", 0, "gt")],
          "derived": ["job_duration"], "aggregations": [agg("max")], "group_by": ["job"],
          "order_by": [{"key": "duration_h", "desc": True}], "limit": 3},
         {"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("num_gpus", 0, "gt")],
          "derived": ["job_duration"], "order_by": [{"key": "duration_h", "desc": True}],
          "limit": 3}],
    ),
    (
        "Average power by user on 1 June 2022 with a box plot",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "aggregations": [agg("avg")], "group_by": ["user"]},
         {"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "aggregations": [agg("avg")], "group_by": ["user", "job"]}],
    ),
    (
        "Daily average power of node 9 over 1-10 June 2022 and the same period of the previous "
        "month",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [nodes(9)],
          "window": window("06-01T00:00", "06-11T00:00"), "aggregations": [agg("avg")],
          "group_by": ["day"]},
         {"target": "readings", "metrics": refs(POWER), "entities": [nodes(9)],
          "window": window("05-01T00:00", "05-11T00:00"), "aggregations": [agg("avg")],
          "group_by": ["day"]}],
    ),
    (
        "Per-minute power of node 33 over the last 2 hours",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [nodes(33)],
          "window": window("06-01T22:00", "06-02T00:00"), "granularity": "minute"}],
    ),
    (
        "Power of nodes 900 and 920 and the outdoor temperature on 1 June 2022",
        (POWER, WEATHER_TEMP),
        [{"target": "readings", "metrics": refs(POWER),
          "entities": [nodes(900, 920)], "window": JUNE1},
         {"target": "readings", "metrics": refs(WEATHER_TEMP),
          "entities": [{"kind": "weather", "all": True}], "window": JUNE1}],
    ),
    (
        "Total CPU hours on 1 June 2022 and the average power of all nodes",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [NODE_ALL], "window": JUNE1,
          "aggregations": [agg("avg")]},
         {"target": "jobs", "entities": [JOB_ALL], "window": JUNE1, "derived": ["cpu_hours"],
          "aggregations": [agg("sum", "cpu_hours"), agg("count", "job")]}],
    ),
    (
        "What is the longest job on 1 June 2022?",
        (),
        [{"target": "jobs", "entities": [JOB_ALL], "window": JUNE1, "derived": ["job_duration"],
          "order_by": [{"key": "duration_h", "desc": True}], "limit": 1}],
    ),
    # inventory
    (
        "How many racks does M100 have?",
        (),
        [{"target": "entities", "entities": [{"kind": "system", "ids": ["M100"]}, NODE_ALL],
          "aggregations": [agg("count", "node")], "group_by": ["rack"]}],
    ),
    (
        "How many GPUs are in M100?",
        (),
        [{"target": "entities", "entities": [{"kind": "system", "ids": ["M100"]}, NODE_ALL],
          "aggregations": [agg("count", "node")]}],
    ),
    (
        "Number of nodes in racks 3 and 4 per rack",
        (),
        [{"target": "entities", "entities": [NODE_ALL, racks(3, 4)],
          "aggregations": [agg("count", "node")], "group_by": ["rack"]}],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("question", "metrics", "expected"), CASES, ids=[c[0][:60] for c in CASES])
def test_operator_phrasing_plans(
    question: str, metrics: tuple[tuple[str, str], ...], expected: list[dict[str, Any]]
) -> None:
    out = plan_for(question, metrics)
    assert out.missing == (), out.notes
    got = [p.model_dump(mode="json") for p in out.plans]
    assert got == [parse_plan(p).model_dump(mode="json") for p in expected]
    for plan in out.plans:  # every plan the rules build compiles
        assert "SELECT" in compile_plan(plan, graph=GRAPH).sparql


def test_ungrouped_aggregate_compiles_with_an_order() -> None:
    out = plan_for("Overall average power of nodes 1, 2 and 3 on 1 June 2022", (POWER,))
    plan = out.plans[0]
    assert plan.aggregations and not plan.group_by
    assert "ORDER BY ?avg_value" in compile_plan(plan, graph=GRAPH).sparql


# --- what the rules refuse to guess --------------------------------------------------------


def test_total_power_is_the_metric_not_a_sum() -> None:
    out = plan_for("Total power of node 900 on 1 June 2022", (POWER,))
    assert [p.aggregations for p in out.plans] == [[]]
    summed = plan_for("Sum of the total power of node 900 on 1 June 2022", (POWER,))
    assert [a.fn for a in summed.plans[0].aggregations] == ["sum"]


def test_metric_names_with_aggregation_words_are_not_aggregations() -> None:
    # 'load average' is the Ganglia metric load_one, not an average
    out = plan_for("Load average of node 4 on 1 June 2022", (("ganglia", "load_one"),))
    assert out.plans[0].aggregations == []


def test_missing_window_is_asked_for() -> None:
    out = plan_for("Power of node 900", (POWER,))
    assert (out.plans, out.missing) == ((), ("window",))
    jobs = plan_for("How many jobs did user 5 run?")
    assert (jobs.plans, jobs.missing) == ((), ("window",))


def test_named_jobs_need_no_window() -> None:
    out = plan_for("Average GPU utilisation of job 77 over its whole duration", GPU_UTIL)
    assert out.missing == () and out.plans[0].job_window and out.plans[0].window is None


def test_readings_question_without_metrics_is_missing_a_metric() -> None:
    out = plan_for("Average flux of node 900 on 1 June 2022", ())
    assert (out.plans, out.missing) == ((), ("metric",))


def test_a_missing_entity_and_window_are_asked_at_once() -> None:
    out = plan_for("Average inlet temperature", (AMBIENT,))
    assert (out.plans, out.missing) == ((), ("entity", "window"))
    no_metric = plan_for("Power of node 900", ())
    assert (no_metric.plans, no_metric.missing) == ((), ("metric",))


def test_a_plan_the_model_rejects_is_reported_not_raised() -> None:
    # 1464 hourly buckets exceed the plan's bound (31 days of hours)
    out = plan_for("Number of jobs per hour over the last 2 months")
    assert (out.plans, out.missing) == ((), ("plan",))
    assert any("hour buckets" in n for n in out.notes)


def test_node_metrics_of_no_named_entity_ask_for_one() -> None:
    out = plan_for("Average inlet temperature on 1 June 2022", (AMBIENT,))
    assert (out.plans, out.missing) == ((), ("entity",))


def test_top_k_without_a_key_gets_a_default_ordering_and_a_note() -> None:
    out = plan_for("Top 3 nodes for power on 1 June 2022", (POWER,))
    (plan,) = out.plans
    assert [(a.fn, a.of) for a in plan.aggregations] == [("avg", "value")]
    assert [(k.key, k.desc) for k in plan.order_by] == [("avg_value", True)]
    assert plan.limit == 3 and plan.group_by == ["node"]
    assert any("no ranking key" in n for n in out.notes)
    users = plan_for("Top users on 1 June 2022")
    assert [k.key for k in users.plans[0].order_by] == ["count_job", "user_id"]
    assert any("no ranking key" in n for n in users.notes)


def test_meaningless_aggregates_are_dropped_with_a_note() -> None:
    out = plan_for("Average nagios state of node 900 on 1 June 2022", (("nagios", "state"),))
    assert out.plans[0].aggregations == []
    assert any("meaningless" in n for n in out.notes)


def test_unknown_or_job_table_metrics_are_dropped_with_a_note() -> None:
    out = plan_for("Power of node 900 on 1 June 2022", (POWER, ("ipmi", "no_such_metric")))
    assert [m.metric for m in out.plans[0].metrics] == ["total_power"]
    assert any("no_such_metric" in n for n in out.notes)


def test_non_metric_kind_overrides_the_cues() -> None:
    out = plan_for("Show me the nodes of rack 3", (), kind="count_entities")
    assert out.plans[0].target == "entities"
    with pytest.raises(UsageError):
        plan_for("Power of node 900 on 1 June 2022", (POWER,), kind="weather")


def test_top_k_of_nodes_gets_no_unranked_series_companion() -> None:
    out = plan_for("top-3 nodes by peak power on 1 June 2022 with a line plot", (POWER,))
    assert len(out.plans) == 1 and out.plans[0].limit == 3
    assert any("ranked first" in n for n in out.notes)


# --- cue rules directly --------------------------------------------------------------------


def test_aggregation_cues_keep_text_order_and_subjects() -> None:
    intent = read_intent("report min/max/avg power and the number of single-node jobs")
    assert [(a.fn, a.of) for a in intent.aggs] == [
        ("min", "value"), ("max", "value"), ("avg", "value"), ("count", "job"),
    ]  # fmt: skip
    hours = read_intent("the total CPU and GPU hours")
    assert [(a.fn, a.of) for a in hours.aggs] == [("sum", "cpu_hours"), ("sum", "gpu_hours")]
    assert read_intent("total number of jobs").aggs[0].fn == "count"
    # hours are an amount: "how many GPU hours" is their total, never a count of anything
    possessive = read_intent("how many of user ###'s jobs failed")
    assert [(a.fn, a.of) for a in possessive.aggs] == [("count", "job")]
    spent = read_intent("how many CPU hours and the number of GPU hours")
    assert [(a.fn, a.of) for a in spent.aggs] == [("sum", "cpu_hours"), ("sum", "gpu_hours")]


def test_ranking_words_are_not_aggregates_when_ranking() -> None:
    ranked = read_intent("the 3 hottest nodes")
    assert ranked.rank is not None and (ranked.rank.k, ranked.rank.noun) == (3, "node")
    assert ranked.aggs == ()
    plain = read_intent("the highest power of node ###")
    assert plain.rank is None and [a.fn for a in plain.aggs] == ["max"]


def test_job_window_phrase_is_not_a_duration() -> None:
    intent = read_intent("GPU utilisation for jobs ### over their whole duration")
    assert intent.job_window and not intent.duration


def test_total_power_is_never_a_sum_even_ungrounded() -> None:
    # the cue rule itself, independent of the grounded metric's synonyms
    assert read_intent("total power of node ### and total node power").aggs == ()


@pytest.mark.parametrize(
    ("text", "aggs", "groups"),
    [
        ("std and CV of the power per node", [("std", "value"), ("cv", "value")], ["node"]),
        ("p95 and p90 of power per user", [("p95", "value"), ("p90", "value")], ["user"]),
        ("the 99th percentile of power for each rack", [("p99", "value")], ["rack"]),
        ("mean power per hour", [("avg", "value")], ["hour"]),
        ("number of jobs per day by user", [("count", "job")], ["user", "day"]),
        ("the 75th percentile of power", [], []),
    ],
)
def test_cue_table(text: str, aggs: list[tuple[str, str]], groups: list[str]) -> None:
    intent = read_intent(text)
    assert [(a.fn, a.of) for a in intent.aggs] == aggs
    assert list(intent.groups) == groups


# --- dev-set defects (bench/devset/questions.yaml ids) -------------------------------------

IDLE_NODES = ("slurm", "total_nodes_idle")
TOT_ICT = ("logics", "Tot_ict")
CPU_USER, CPU_SYSTEM, CPU_IDLE = (("ganglia", f"cpu_{m}") for m in ("user", "system", "idle"))
M100 = {"kind": "system", "ids": ["M100"]}
PANEL_ALL = {"kind": "panel", "all": True}

DEVSET_CASES: list[tuple[str, str, tuple[tuple[str, str], ...], list[dict[str, Any]]]] = [
    (
        "G04",  # a singular 'while the job was running' is the job's own window
        "What was the mean GPU utilisation of job 4835969 while the job was running?",
        GPU_UTIL,
        [{"target": "readings", "metrics": refs(*GPU_UTIL), "entities": [jobs(4835969)],
          "job_window": True, "aggregations": [agg("avg")]}],
    ),
    (
        "P10",  # the planner side of P10 (the metric phrase was cut as an analysis tail)
        "For the top-5 longest single-node jobs on 1 June 2022, report the min, max and average "
        "node power.",
        (POWER,),
        [{"target": "readings", "metrics": refs(POWER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("num_nodes", 1)],
          "derived": ["job_duration"], "aggregations": [agg("min"), agg("max"), agg("avg")],
          "group_by": ["job"], "order_by": [{"key": "duration_h", "desc": True}], "limit": 5}],
    ),
    (
        "S08",  # 'number of idle nodes' is the count metric's value, not a count of its readings
        "Retrieve the number of idle nodes of M100 on 1 June 2022 from 03:00 to 03:30.",
        (IDLE_NODES,),
        [{"target": "readings", "metrics": refs(IDLE_NODES), "entities": [M100],
          "window": window("06-01T03:00", "06-01T03:30")}],
    ),
    (
        "S08-avg",  # an aggregation before the count metric still applies
        "What was the average number of idle nodes of M100 on 1 June 2022?",
        (IDLE_NODES,),
        [{"target": "readings", "metrics": refs(IDLE_NODES), "entities": [M100],
          "window": JUNE1, "aggregations": [agg("avg")]}],
    ),
    (
        "A03",  # 'user CPU' is the metric cpu_user: no jobs, no job run times
        "For node 42 on 1 June 2022, get user CPU, system CPU and idle CPU from 10:00 to 11:00.",
        (CPU_USER, CPU_SYSTEM, CPU_IDLE),
        [{"target": "readings", "metrics": refs(CPU_USER, CPU_SYSTEM, CPU_IDLE),
          "entities": [nodes(42)], "window": window("06-01T10:00", "06-01T11:00")}],
    ),
    (
        "A04",
        "What was the average user CPU per node for nodes 0-4 on 1 June 2022 between 00:00 and "
        "06:00?",
        (CPU_USER,),
        [{"target": "readings", "metrics": refs(CPU_USER), "entities": [nodes(0, 1, 2, 3, 4)],
          "window": window("06-01T00:00", "06-01T06:00"), "aggregations": [agg("avg")],
          "group_by": ["node"]}],
    ),
    (
        "A04-user",  # a user named beside 'user CPU' still selects that user's jobs
        "Average user CPU of the jobs of user 5 on 1 June 2022",
        (CPU_USER,),
        [{"target": "readings", "metrics": refs(CPU_USER), "entities": [JOB_ALL], "window": JUNE1,
          "job_window": True, "filters": [job_filter("user", 5)],
          "aggregations": [agg("avg")]}],
    ),
    (
        "F03",  # 'total' before a metric named total (Tot_ict) is the metric's name, no sum
        "Retrieve the total ICT power (Tot_ict) on 1 June 2022 from 06:00 to 07:00.",
        (TOT_ICT,),
        [{"target": "readings", "metrics": refs(TOT_ICT), "entities": [PANEL_ALL],
          "window": window("06-01T06:00", "06-01T07:00")}],
    ),
    (
        "F03-sum",
        "Sum of the total ICT power on 1 June 2022 from 06:00 to 07:00",
        (TOT_ICT,),
        [{"target": "readings", "metrics": refs(TOT_ICT), "entities": [PANEL_ALL],
          "window": window("06-01T06:00", "06-01T07:00"), "aggregations": [agg("sum")]}],
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("item", "question", "metrics", "expected"),
    DEVSET_CASES,
    ids=[c[0] for c in DEVSET_CASES],
)
def test_devset_defect_plans(
    item: str, question: str, metrics: tuple[tuple[str, str], ...], expected: list[dict[str, Any]]
) -> None:
    out = plan_for(question, metrics)
    assert out.missing == (), out.notes
    got = [p.model_dump(mode="json") for p in out.plans]
    assert got == [parse_plan(p).model_dump(mode="json") for p in expected]


def test_a11_how_many_nodes_over_a_threshold_counts_distinct_nodes() -> None:
    out = plan_for(
        "How many nodes had an inlet temperature above 40 °C on 1 June 2022 between 08:00 and "
        "09:00 across all nodes?",
        (AMBIENT,),
    )
    assert out.missing == (), out.notes
    expected = {
        "target": "readings", "metrics": refs(AMBIENT), "entities": [NODE_ALL],
        "window": window("06-01T08:00", "06-01T09:00"),
        "filters": [{"about": "value", "op": "gt", "value": 40.0}],
        "aggregations": [agg("count", "node")],
    }  # fmt: skip
    assert [p.model_dump(mode="json") for p in out.plans] == [
        parse_plan(expected).model_dump(mode="json")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "mean power of job ### while the job was running",
        "mean power of jobs ### and ### while the jobs were running",
        "mean power of job ### while it ran",
        "mean power while job ### was running",
    ],
)
def test_while_running_phrases_are_job_windows(text: str) -> None:
    intent = read_intent(text)
    assert intent.job_window and [(a.fn, a.of) for a in intent.aggs] == [("avg", "value")]


def test_statistics_after_report_are_not_an_analysis_tail() -> None:
    # P10's stage-1 side: ', report the min, max and average node power' names the metric;
    # ', report the results' stays an analysis tail
    question = (
        "For the top-5 longest single-node jobs on 1 June 2022, report the min, max and average "
        "node power."
    )
    assert [p.text for p in chunk(question, extract_entities(question)).phrases] == ["node power"]
    tail = "Retrieve the node power of node 5 on 1 June 2022, report the results"
    assert [p.text for p in chunk(tail, extract_entities(tail)).phrases] == ["node power"]
    g04 = "What was the mean GPU utilisation of job 4835969 while the job was running?"
    assert [p.text for p in chunk(g04, extract_entities(g04)).phrases] == ["gpu utilisation"]


def test_compared_metrics_of_one_quantity_are_aggregated_per_metric() -> None:
    # The two sockets' power is one quantity, pooled by default; compared, it goes per metric.
    sockets = (("ipmi", "p0_power"), ("ipmi", "p1_power"))
    compared = plan_for(
        "Compare the average draw of CPU socket 0 and CPU socket 1 on node 610 on 1 June 2022",
        sockets,
    )
    assert [p.group_by for p in compared.plans] == [["metric"]]
    pooled = plan_for("Average power of CPU socket 0 and 1 of node 610 on 1 June 2022", sockets)
    assert [p.group_by for p in pooled.plans] == [[]]
    together = plan_for(
        "Compare the combined average power of socket 0 and socket 1 of node 610 on 1 June 2022",
        sockets,
    )
    assert [p.group_by for p in together.plans] == [[]]
    one = plan_for("Compare the average power of node 610 on 1 and 2 June 2022", (POWER,))
    assert [p.group_by for p in one.plans] == [[]]


def test_third_held_out_set_plans() -> None:
    # 'how many' with no metric in a jobs question counts the jobs
    out = plan_for("GPU jobs with state TIMEOUT on 4 June 2022 - how many?")
    (plan,) = out.plans
    assert plan.target == "jobs" and [a.fn for a in plan.aggregations] == ["count"]
    assert {(f.field, f.op, f.value) for f in plan.filters} >= {("state", "eq", "TIMEOUT")}
    # '8 or more nodes' is a job filter
    out = plan_for(
        "Among the jobs using 8 or more nodes that ran between 1 and 3 June 2022, how many "
        "finished as FAILED or CANCELLED?"
    )
    (plan,) = out.plans
    filters = {(f.field, f.op, str(f.value)) for f in plan.filters}
    assert ("num_nodes", "ge", "8") in filters
    assert ("state", "in", "['FAILED', 'CANCELLED']") in filters
    # 'for each of user X's jobs' is per job
    out = plan_for(
        "For each of user 27392's jobs that were running on 1 June 2022, what was the mean "
        "node power while the job ran that day?",
        (POWER,),
    )
    assert [p.group_by for p in out.plans] == [["job"]]
    # counting the nodes over a threshold selects every node
    out = plan_for(
        "Count the nodes whose inlet temperature exceeded 25 °C on 1 June 2022", (AMBIENT,)
    )
    (plan,) = out.plans
    assert out.missing == () and plan.entities[0].all
    # 'at 0 %' is a level: readings equal to it
    out = plan_for(
        "How many nodes had GPU 0 at 0% utilisation on 1 June 2022?",
        (("ganglia", "Gpu0_gpu_utilization"),),
    )
    (plan,) = out.plans
    assert [(f.op, f.value) for f in plan.filters] == [("eq", 0.0)]


def test_a_request_that_opens_with_an_analysis_verb_is_not_cut_away() -> None:
    # 'I want to compare …' is the request itself; 'each socket' gives one figure per socket
    sockets = (("ipmi", "p0_power"), ("ipmi", "p1_power"))
    q = (
        "I want to compare the two CPU sockets of node 808 - give me the hourly mean power of "
        "each socket across 1 June 2022"
    )
    out = plan_for(q, sockets)
    assert [p.group_by for p in out.plans] == [["metric", "hour"]]
    pooled = plan_for(
        "hourly mean power of both sockets of node 808, combined, 1 June 2022", sockets
    )
    assert [p.group_by for p in pooled.plans] == [["hour"]]
