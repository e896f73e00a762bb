"""Attribute questions about named jobs: routed to the job table, answered by a job listing with
the attribute columns asked for, never by a metric or a count of the one job."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from oda_analyst.ontology.plan import QueryPlan, output_columns
from oda_analyst.reading.rules import jobattrs
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.form import read_form, words_of
from oda_analyst.reading.rules.intent import classify_intent
from oda_analyst.retriever.planning.shape import shape
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.validator import validate

GRAPH = "https://w3id.org/oda-analyst/m100/graph/vkg/test"


def listing(**extra: object) -> QueryPlan:
    return QueryPlan.model_validate(
        {"target": "jobs", "entities": [{"kind": "job", "ids": [1037364]}], **extra}
    )


def test_job_fields_add_validated_columns() -> None:
    plan = listing(job_fields=["user", "state", "partition"])
    compiled = compile_plan(plan, graph=GRAPH)
    want = ("job_id", "start_time", "end_time", "num_nodes", "user_id", "job_state", "partition")
    assert compiled.column_names == want == output_columns(plan)
    assert validate(compiled.sparql, allowed_graph=GRAPH).ok
    assert "OPTIONAL { ?job oda:jobState ?job_state . }" in compiled.sparql


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"job_fields": ["state", "state"]}, "repeat"),
        ({"job_fields": ["num_nodes"]}, "always listed"),
        ({"job_fields": ["user"], "aggregations": [{"fn": "count", "of": "job"}]}, "listing"),
    ],
)
def test_job_fields_that_cannot_be_honoured_are_refused(extra: dict[str, object], message: str
                                                        ) -> None:  # fmt: skip
    with pytest.raises(ValidationError, match=message):
        listing(**extra)


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("when did job 1037364 end?", "list_jobs"),
        ("how many nodes does job 5358079 use", "list_jobs"),
        ("what state did job 1037364 finish in", "list_jobs"),
        ("average node power of the nodes of job 1037364", None),  # a metric question
        ("how many gpu hours did job 1037364 use", "job_stats"),
        ("how long did job 5821060 take", "list_jobs"),  # its duration: 'take' names no metric
        ("how long did job 5821060 take to run", "list_jobs"),
    ],
)
def test_attribute_questions_are_job_table_questions(question: str, kind: str | None) -> None:
    intent = classify_intent(question, chunk(question, extract_entities(question)))
    assert intent.sub_kind == kind


@pytest.mark.parametrize(
    ("words", "fields"),
    [
        ("who ran it", ("user",)),
        ("what state did it finish in and who submitted it", ("user", "state")),
        ("when did it start", ()),
        ("partition and qos and gpus", ("partition", "qos", "num_gpus")),
    ],
)
def test_asked_fields(words: str, fields: tuple[str, ...]) -> None:
    assert jobattrs.asked_fields(words.split()) == fields


def test_how_long_a_job_took_asks_its_duration() -> None:
    assert read_form(words_of("how long did it take")).asks_duration


def test_the_form_adds_the_asked_attributes_to_a_job_listing() -> None:
    (shaped,), conflict = shape(read_form(words_of("who ran it, and in what state")), [listing()])
    assert conflict is None
    assert shaped.job_fields == ["user", "state"]


def test_how_many_nodes_of_a_job_is_its_node_count_not_a_count_of_jobs() -> None:
    counted = listing(aggregations=[{"fn": "count", "of": "job"}])
    (shaped,), conflict = shape(read_form(words_of("how many nodes does it use")), [counted])
    assert conflict is None
    assert shaped.aggregations == []
    assert "num_nodes" in output_columns(shaped)


@pytest.mark.parametrize(
    "words",
    [
        "the number of nodes allocated to it",
        "number of nodes it was given",
        "node count of it",  # blind9 V57: was a count of the named jobs
        "user, state and node count for it",
    ],
)
def test_the_number_of_nodes_of_a_job_is_its_node_count(words: str) -> None:
    counted = listing(aggregations=[{"fn": "count", "of": "job"}])
    (shaped,), conflict = shape(read_form(words_of(words)), [counted])
    assert conflict is None
    assert shaped.aggregations == []
    assert "num_nodes" in output_columns(shaped)


def test_how_many_hours_a_job_ran_is_its_duration_not_a_count_of_jobs() -> None:
    counted = listing(aggregations=[{"fn": "count", "of": "job"}])
    (shaped,), conflict = shape(read_form(words_of("how many hours did it run for")), [counted])
    assert conflict is None
    assert shaped.aggregations == []
    assert "duration_h" in output_columns(shaped)


def test_a_job_listing_is_not_stretched_to_another_form() -> None:
    _, conflict = shape(read_form(words_of("how many racks does it use")), [listing()])
    assert conflict is not None


# --- jobs that started / ended in the window (not the jobs running in it) ---------------------

WINDOW = {"start": "2022-06-04T00:00:00Z", "end": "2022-06-05T00:00:00Z"}


def jobs_in_window(**extra: object) -> QueryPlan:
    return QueryPlan.model_validate(
        {"target": "jobs", "entities": [{"kind": "job", "all": True}], "window": WINDOW,
         "aggregations": [{"fn": "count", "of": "job"}], **extra}
    )  # fmt: skip


def test_an_event_window_filters_on_that_event() -> None:
    ended = compile_plan(jobs_in_window(job_event="ended"), graph=GRAPH).sparql
    assert '?end_time >= "2022-06-04T00:00:00Z"^^xsd:dateTime' in ended
    assert "?start_time <" not in ended  # not the overlap
    started = compile_plan(jobs_in_window(job_event="started"), graph=GRAPH)
    assert validate(started.sparql, allowed_graph=GRAPH).ok
    assert '?start_time >= "2022-06-04T00:00:00Z"^^xsd:dateTime' in started.sparql


def test_an_event_needs_a_window_and_a_jobs_plan() -> None:
    with pytest.raises(ValidationError, match="job_event"):
        QueryPlan.model_validate(
            {"target": "jobs", "entities": [{"kind": "job", "all": True}], "job_event": "ended"}
        )
    with pytest.raises(ValidationError, match="job_event"):
        QueryPlan.model_validate(
            {"target": "readings", "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
             "entities": [{"kind": "node", "ids": [1]}], "window": WINDOW, "job_event": "ended"}
        )  # fmt: skip


@pytest.mark.parametrize(
    ("question", "event"),
    [
        ("how many jobs started on 4 june", "started"),
        ("list the jobs that finished between 8 and 9", "ended"),
        ("how many jobs wrapped up on june 11", "ended"),  # blind9 V79
        ("how many jobs ended in the failed state", None),  # the final state, not an end time
        ("how many jobs ran on 4 june", None),
        ("jobs that started and ended on 4 june", None),  # which event? the jobs running then
    ],
)
def test_the_form_reads_the_event(question: str, event: str | None) -> None:
    assert read_form(words_of(question)).job_event == event


def test_an_event_shapes_a_jobs_plan_bucketed_or_not() -> None:
    form = read_form(words_of("how many jobs started on 4 june"))
    (shaped,), conflict = shape(form, [jobs_in_window()])
    assert conflict is None and shaped.job_event == "started"
    (daily,), conflict = shape(form, [jobs_in_window(group_by=["day"])])
    assert conflict is None and daily.job_event == "started"


def test_a_bucketed_event_counts_each_job_in_the_bucket_of_its_event() -> None:
    plan = jobs_in_window(job_event="ended", group_by=["day"])
    sparql = compile_plan(plan, graph=GRAPH).sparql
    assert validate(sparql, allowed_graph=GRAPH).ok
    assert "FILTER(?end_time >= ?bucket_start && ?end_time < ?bucket_end)" in sparql
    assert "?start_time < ?bucket_end" not in sparql  # not the overlap with the bucket


def _with_state(states: list[str], **extra: object) -> QueryPlan:
    state = {"about": "job", "field": "state", "op": "in", "value": states}
    return jobs_in_window(filters=[state], **extra)


@pytest.mark.parametrize(
    ("question", "states", "event"),
    [
        # the state names the event: its end falls in the window
        ("how many jobs failed on 4 june", ["FAILED"], "ended"),
        ("list the jobs that timed out between 8 and 9 on 5 june", ["TIMEOUT"], "ended"),
        ("how many jobs ended FAILED on 4 june", ["FAILED"], "ended"),
        ("how many jobs ran out of memory on 4 june", ["OUT_OF_MEMORY"], "ended"),
        # the question says the jobs were running then
        ("how many FAILED jobs were running on 4 june", ["FAILED"], "running"),
        ("of the jobs that ran on 4 june how many ended up failing", ["FAILED"], "running"),
        # a state jobs are in before they end names no event
        ("how many jobs pending on 4 june", ["PENDING"], "running"),
    ],
)
def test_a_final_state_selects_the_jobs_that_reached_it_in_the_window(
    question: str, states: list[str], event: str
) -> None:
    form = read_form(words_of(question))
    (shaped,), conflict = shape(form, [_with_state(states)])
    assert conflict is None and shaped.job_event == event


def test_cpu_gpu_hours_of_failed_jobs_stay_the_hours_inside_the_window() -> None:
    form = read_form(words_of("gpu hours of failed jobs on 4 june"))
    plan = _with_state(["FAILED"], aggregations=[{"fn": "sum", "of": "gpu_hours"}],
                       derived=["gpu_hours"])  # fmt: skip
    (shaped,), _ = shape(form, [plan])
    assert shaped.job_event == "running"


# --- distinct users (nodes) of the chosen jobs, not the number of jobs -------------------------


@pytest.mark.parametrize(
    ("question", "of"),
    [("how many distinct users ran jobs", "user"), ("how many different users had jobs", "user"),
     ("number of distinct users with failed jobs", "user"),
     ("how many nodes did the jobs run on", "node")],
)  # fmt: skip
def test_a_count_of_users_or_nodes_counts_them_distinct(question: str, of: str) -> None:
    (shaped,), conflict = shape(read_form(words_of(question)), [jobs_in_window()])
    assert conflict is None
    assert [(a.fn, a.of) for a in shaped.aggregations] == [("count", of)]
    compiled = compile_plan(shaped, graph=GRAPH)
    assert f"COUNT(DISTINCT ?{of})" in compiled.sparql
    assert validate(compiled.sparql, allowed_graph=GRAPH).ok


def test_distinct_racks_of_jobs_are_counted_by_grouping_the_jobs_by_rack() -> None:
    # was refused; the racks of a job are those of its nodes, one group each
    plans, conflict = shape(read_form(words_of("how many distinct racks had jobs")),
                            [jobs_in_window()])  # fmt: skip
    assert conflict is None
    assert [(p.group_by, p.count_groups) for p in plans] == [(["rack"], True)]
    assert output_columns(plans[0]) == ("count_rack",)


def test_users_are_counted_in_jobs_plans_only() -> None:
    with pytest.raises(ValidationError, match="users are counted"):
        QueryPlan.model_validate(
            {"target": "readings", "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
             "entities": [{"kind": "node", "ids": [1]}], "window": WINDOW,
             "aggregations": [{"fn": "count", "of": "user"}]}
        )  # fmt: skip


def test_a_node_list_of_a_job_is_refused_not_dropped() -> None:
    # 'state, user and node list of job J': answering the state and user alone drops a part
    _, conflict = shape(read_form(words_of("state, user and node list of it")), [listing()])
    assert conflict is not None and "which nodes" in conflict


@pytest.mark.parametrize(
    "question",
    ["how many OOM kills on 6 june", "out-of-memory kills on 6 June, how many?",
     "how many timeouts on june 7", "NODE_FAIL count on 2 june"],
)  # fmt: skip
def test_slurm_end_states_name_jobs_without_the_word(question: str) -> None:
    intent = classify_intent(question, chunk(question, extract_entities(question)))
    assert (intent.kind, intent.sub_kind) == ("non_metric", "job_stats")


# --- the scheduler's own count of nodes is the number asked for -----------------------------


def _slurm_reading(metric: str, **extra: object) -> QueryPlan:
    return QueryPlan.model_validate(
        {"target": "readings", "metrics": [{"plugin": "slurm", "metric": metric}],
         "entities": [{"kind": "system", "all": True}], "window": WINDOW, **extra}
    )  # fmt: skip


def test_how_many_nodes_were_idle_is_the_schedulers_idle_count() -> None:
    # blind8 U05, blind9 V05: refused as 'the plan counts something else'
    form = read_form(words_of("how many nodes were idle at 9pm"))
    (shaped,), conflict = shape(form, [_slurm_reading("total_nodes_idle")])
    assert conflict is None and shaped.metrics[0].metric == "total_nodes_idle"
    # a count of its readings, or another metric, is still not the nodes asked for
    counted = _slurm_reading("total_nodes_idle", aggregations=[{"fn": "count", "of": "value"}])
    assert shape(form, [counted])[1] is not None
    assert shape(form, [_slurm_reading("s21.cluster_cpu_util")])[1] is not None
