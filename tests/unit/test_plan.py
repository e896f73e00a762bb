"""The typed query plan: schema from the catalogue, validation rules, the paper's 14 plans."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from oda_analyst.lake.schema import PLUGINS
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import (
    Plugin,
    QueryPlan,
    TimeWindow,
    bucket_starts,
    describe_errors,
    load_paper_plans,
    output_columns,
    parse_plan,
    plan_json_schema,
    plan_model,
)

WINDOW = {"start": "2022-06-01T08:00:00Z", "end": "2022-06-01T09:00:00Z"}


def readings(**extra: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "target": "readings",
        "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
        "entities": [{"kind": "node", "ids": [900]}],
        "window": WINDOW,
    }
    plan.update(extra)
    return plan


def error_text(data: dict[str, Any], *, static: bool = False) -> str:
    with pytest.raises(ValidationError) as info:
        if static:
            QueryPlan.model_validate(data)
        else:
            parse_plan(data)
    return describe_errors(info.value)


# --- schema ---------------------------------------------------------------------------------


def test_plugin_literal_matches_the_lake_plugins() -> None:
    assert set(typing.get_args(Plugin)) == set(PLUGINS) - {"job_table"}


def test_schema_lists_metrics_per_plugin() -> None:
    schema = plan_json_schema()
    defs = schema["$defs"]
    ipmi = defs["IpmiMetricRef"]["properties"]["metric"]["enum"]
    ganglia = defs["GangliaMetricRef"]["properties"]["metric"]["enum"]
    assert "total_power" in ipmi and "total_power" not in ganglia
    assert "Gpu0_gpu_utilization" in ganglia and "Gpu0_gpu_utilization" not in ipmi
    cat = load_catalogue()
    assert sorted(ipmi) == sorted(m.name for m in cat.by_plugin("ipmi"))
    items = schema["properties"]["metrics"]["items"]
    assert items["discriminator"]["propertyName"] == "plugin"
    # entity kinds are described with their ontology classes
    assert "node = oda:ComputeNode" in schema["description"]


def test_schema_validates_paper_plans_and_rejects_wrong_plugin() -> None:
    schema = plan_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    good = readings()
    assert not list(validator.iter_errors(json.loads(json.dumps(good))))
    bad = readings(metrics=[{"plugin": "ganglia", "metric": "total_power"}])
    assert list(validator.iter_errors(bad))


def test_dynamic_model_rejects_total_power_under_ganglia() -> None:
    text = error_text(readings(metrics=[{"plugin": "ganglia", "metric": "total_power"}]))
    assert "metrics.0.ganglia.metric" in text


def test_static_model_checks_metrics_against_the_catalogue() -> None:
    text = error_text(
        readings(metrics=[{"plugin": "ganglia", "metric": "total_power"}]), static=True
    )
    assert "belongs to plugin ipmi" in text
    text = error_text(readings(metrics=[{"plugin": "ipmi", "metric": "total_powr"}]), static=True)
    assert "unknown metric" in text and "total_power" in text  # did-you-mean hint


def test_json_round_trip() -> None:
    plan = parse_plan(readings(aggregations=[{"fn": "p95"}], group_by=["node"]))
    again = parse_plan(plan.model_dump_json())
    assert again == plan
    assert again.window is not None and again.window.start == datetime(2022, 6, 1, 8, tzinfo=UTC)
    assert QueryPlan.model_validate_json(plan.model_dump_json()).metrics[0].metric == "total_power"


# --- validation rules -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"window": {"start": "2022-06-01T09:00:00Z", "end": "2022-06-01T09:00:00Z"}}, "not after"),
        ({"window": {"start": "2022-06-01T09:00:00", "end": "2022-06-01T10:00:00"}}, "timezone"),
        ({"aggregations": [{"fn": "avg"}], "group_by": ["job"]}, "group by job/user needs a job"),
        ({"limit": 5}, "limit needs order_by"),
        ({"order_by": [{"key": "power"}]}, "not an output column"),
        ({"metrics": [{"plugin": "weather", "metric": "temp"}]}, "observes Weather"),
        ({"job_window": True}, "job_window needs a job"),
        ({"window": None}, "needs a window"),
        ({"metrics": []}, "at least one metric"),
        ({"group_by": ["node"]}, "group_by needs aggregations"),
        ({"granularity": "hour", "aggregations": [{"fn": "avg"}]}, "granularity"),
        ({"derived": ["cpu_hours"]}, "jobs plans only"),
        ({"entities": [{"kind": "node", "ids": [900], "all": True}]}, "exactly one"),
        ({"entities": [{"kind": "node", "ids": [1200]}]}, "does not exist"),
        (
            {"entities": [{"kind": "node", "ids": [900]}, {"kind": "weather", "all": True}]},
            "cannot be combined",
        ),
        (
            {
                "metrics": [{"plugin": "ganglia", "metric": "os_name"}],
                "aggregations": [{"fn": "avg"}],
            },
            "is text",
        ),
        (
            {"metrics": [{"plugin": "nagios", "metric": "state"}], "aggregations": [{"fn": "avg"}]},
            "meaningless",
        ),
        ({"aggregations": [{"fn": "count", "of": "job"}]}, "count of job"),
        ({"filters": [{"about": "job", "field": "num_nodes", "value": 1}]}, "job filters need"),
    ],
)
def test_nonsense_is_rejected_with_a_clear_message(change: dict[str, Any], message: str) -> None:
    assert message in error_text(readings(**change))


def test_gpu_index_must_match_the_metric() -> None:
    plan = readings(
        metrics=[{"plugin": "ganglia", "metric": "Gpu1_gpu_utilization"}],
        entities=[{"kind": "gpu", "ids": [900], "index": [0]}],
    )
    assert "of gpu 1, not selected" in error_text(plan)
    plan["entities"][0]["index"] = [1]
    assert parse_plan(plan).selector("gpu") is not None


def test_job_filter_types() -> None:
    jobs = {"target": "jobs", "entities": [{"kind": "job", "all": True}], "window": WINDOW}
    bad = {**jobs, "filters": [{"about": "job", "field": "num_nodes", "value": "1"}]}
    assert "compares with integers" in error_text(bad)
    bad = {**jobs, "filters": [{"about": "job", "field": "state", "op": "in", "value": "X"}]}
    assert "non-empty list" in error_text(bad)
    bad = {**jobs, "filters": [{"about": "job", "field": "state", "op": "gt", "value": "X"}]}
    assert "eq, ne and in only" in error_text(bad)


def test_jobs_grouped_by_day_need_a_window_and_the_derived_column() -> None:
    base = {"target": "jobs", "entities": [{"kind": "job", "all": True}], "group_by": ["day"]}
    assert "needs a window" in error_text({**base, "aggregations": [{"fn": "count", "of": "job"}]})
    plan = {**base, "window": WINDOW, "aggregations": [{"fn": "sum", "of": "cpu_hours"}]}
    assert "add the derived quantity" in error_text(plan)


def test_names_cannot_smuggle_sparql() -> None:
    plan = readings(
        metrics=[{"plugin": "vertiv", "metric": "Supply_Air_Temperature"}],
        entities=[{"kind": "crac", "ids": ["CDZ01> } DROP ALL #"]}],
    )
    assert "letters, digits" in error_text(plan)


# --- output columns, buckets ----------------------------------------------------------------


def test_output_columns() -> None:
    raw = parse_plan(readings())
    assert output_columns(raw) == ("node_id", "metric_name", "timestamp", "value")
    agg = parse_plan(
        readings(
            aggregations=[{"fn": "cv"}, {"fn": "max"}],
            group_by=["gpu"],
            metrics=[{"plugin": "ganglia", "metric": "Gpu0_gpu_utilization"}],
        )
    )
    assert output_columns(agg) == ("node_id", "gpu_index", "cv_value", "max_value")


def test_bucket_starts_cover_the_window() -> None:
    w = TimeWindow.model_validate({"start": "2022-06-01T08:30:00Z", "end": "2022-06-03T00:00:00Z"})
    days = bucket_starts(w, "day")
    assert [d.day for d in days] == [1, 2]
    hours = bucket_starts(w, "hour")
    assert hours[0] == datetime(2022, 6, 1, 8, tzinfo=UTC) and len(hours) == 40


# --- the paper's plans ----------------------------------------------------------------------


def test_all_fourteen_paper_questions_load() -> None:
    questions = load_paper_plans()
    assert [q.id for q in questions] == [f"Q{i}" for i in range(1, 15)]
    assert all(q.question and q.plans for q in questions)
    model = plan_model()
    assert all(isinstance(p, model) for q in questions for p in q.plans)
    by_id = {q.id: q for q in questions}
    q7 = by_id["Q7"].plans[0]
    assert q7.job_window and q7.group_by == ["job"]
    assert {a.fn for a in q7.aggregations} >= {"cv"}
    q9 = by_id["Q9"].plans[0]
    assert q9.limit == 3 and q9.order_by[0].key == "duration_h" and q9.order_by[0].desc
    assert len(by_id["Q11"].plans) == 2


def test_paper_plans_match_the_json_schema() -> None:
    validator = jsonschema.Draft202012Validator(plan_json_schema())
    for q in load_paper_plans():
        for plan in q.plans:
            data = json.loads(plan.model_dump_json(exclude_defaults=True))
            assert not list(validator.iter_errors(data)), q.id
