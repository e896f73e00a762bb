"""'How many hours was node N's inlet above 27 °C': planned as hours above a level, answered the
same on readings and from the pushed-down scan, and checked against Polars on the files.

Real components: the rules and the packaged embeddings for stage 1, the generator's ``tiny``
profile (node 900, 1 June 2022 00:00-01:00) and two real Retrievers on it, one that pushes every
plan down it can (``pushdown_min_readings=0``) and one that never does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import tiny_power_lake
from oda_analyst.config import load_settings
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.reading.read import read
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.service import Retriever
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1
from oda_analyst.retriever.understood import sentence

AS_OF = datetime(2022, 7, 15, tzinfo=UTC)


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None


@pytest.mark.parametrize(
    ("question", "group_by"),
    [
        ("how many hours was node 12's inlet above 27 °C in June 2022", []),
        ("how many hours was each node's inlet above 27 °C in June 2022", ["node"]),
        ("how many hours per day was the inlet of nodes 0, 1 and 20 above 27 °C in June 2022",
         ["node", "day"]),
    ],
)  # fmt: skip
def test_hours_questions_plan_hours_above_the_level(
    metric_index: None, question: str, group_by: list[str]
) -> None:
    outcome = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(outcome, Ready), outcome
    (plan,) = outcome.plans
    assert [(a.fn, a.of) for a in plan.aggregations] == [("hours", "value")]
    assert [(f.op, f.value) for f in plan.filters] == [("gt", 27.0)]
    assert plan.group_by == group_by and [m.metric for m in plan.metrics] == ["ambient"]
    said = sentence(plan)
    assert said.startswith("Number of hours of inlet temperature")
    back = run_stage1(read(said, AS_OF)).outcome  # what it understood reads back the same
    assert isinstance(back, Ready) and back.plans == outcome.plans


def test_a_count_of_readings_stays_a_count(metric_index: None) -> None:
    question = "how many readings of node 12's inlet were above 27 °C in June 2022"
    outcome = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(outcome, Ready), outcome
    assert [(a.fn, a.of) for a in outcome.plans[0].aggregations] == [("count", "value")]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


def test_hours_are_the_same_on_both_paths_and_in_polars(
    metric_index: None, lake: Path, tmp_path: Path
) -> None:
    files = sorted(lake.glob("year_month=22-06/plugin=ipmi_pub/metric=ambient/*.parquet"))
    inlet = pl.concat([pl.read_parquet(f) for f in files]).filter(
        pl.col("node").cast(pl.String) == "900"
    )
    level = round(float(inlet["value"].median()), 1) + 0.05  # type: ignore[arg-type]
    question = (
        f"how many hours was node 900's inlet above {level:g} °C on 1 June 2022 from 00:00 to 01:00"
    )
    answers = []
    for name, min_readings in (("pushed", 0), ("readings", 10**15)):
        settings = load_settings(
            lake=str(lake),
            data_dir=tmp_path / name,
            redis_url=None,
            sparql_endpoint=None,
            pushdown_min_readings=min_readings,
        )
        answers.append(Retriever(settings).query(question, as_of=AS_OF))
    pushed, readings = answers
    assert pushed.status == readings.status == "completed", (pushed.answer, readings.answer)
    assert pushed.results[0]["scan"] is not None and readings.results[0]["scan"] is None
    assert pushed.understood_as == readings.understood_as
    assert pushed.columns == readings.columns == ["hours_value"]
    hours = inlet.filter(pl.col("value") > level).height * 20 / 3600
    assert 0 < hours < 1
    assert pushed.rows == readings.rows == [[hours]]
