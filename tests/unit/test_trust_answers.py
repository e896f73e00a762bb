"""The trust contract on a real generated lake: no data is not zero, answers are fresh, windows
never reach past the reference time, and every completed answer says what it understood.

Real components: the synthetic generator's ``tiny`` profile (node 900, 1 June 2022 00:00-01:00),
the real Retriever with its embedded store under a temporary data folder, the real embeddings.
Expected values are read from the Parquet files with Polars, not through the product.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from fixtures_embeddings import shared_cache_dir
from oda_analyst.config import load_settings
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.service import Retriever

AS_OF = datetime(2022, 6, 15, tzinfo=UTC)
AVG_Q = "average node power of node 900 on 1 June 2022 from 00:00 to 01:00"


def _lake(root: Path, seed: int) -> Path:
    spec = build_spec("tiny", nodes="900", plugins="ipmi", metrics="total_power,ambient", seed=seed)
    generate(spec, root)
    return root


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return _lake(tmp_path / "lake", seed=1)


@pytest.fixture
def retriever(lake: Path, tmp_path: Path, metric_index: None) -> Retriever:
    settings = load_settings(lake=str(lake), data_dir=tmp_path / "data", redis_url=None,
                             sparql_endpoint=None)  # fmt: skip
    return Retriever(settings)


def _mean_power(lake: Path) -> float:
    files = str(lake / "year_month=22-06/plugin=ipmi_pub/metric=total_power/*.parquet")
    df = pl.read_parquet(files, hive_partitioning=False)
    return float(df.filter(pl.col("node").cast(pl.String) == "900")["value"].mean())  # type: ignore[arg-type]


def test_an_average_over_a_window_without_readings_is_no_data_not_zero(retriever: Retriever
                                                                        ) -> None:  # fmt: skip
    # June's partition exists, but it holds no reading on 3 June
    got = retriever.query("average node power of node 900 on 3 June 2022 from 00:00 to 01:00",
                          as_of=AS_OF)  # fmt: skip
    assert got.status == "completed"
    assert got.rows == []
    assert got.results[0]["no_data"].startswith("no data for ipmi/total_power")
    assert "no data" in got.answer and "0.0" not in got.answer


def test_a_month_the_lake_lacks_is_a_clear_no_data_answer_not_a_failed_scan(
    retriever: Retriever,
) -> None:
    got = retriever.query("average node power of node 900 on 1 July 2022 from 00:00 to 01:00",
                          as_of=datetime(2022, 8, 1, tzinfo=UTC))  # fmt: skip
    assert got.status == "completed", got.answer
    assert got.rows == []
    assert "the lake holds months" in got.results[0]["no_data"]


def test_an_answer_reflects_the_lake_as_it_is_now(retriever: Retriever, lake: Path) -> None:
    first = retriever.query(AVG_Q, as_of=AS_OF)
    assert first.status == "completed"
    assert first.rows is not None
    assert first.rows[0][0] == pytest.approx(_mean_power(lake))
    shutil.rmtree(lake)
    _lake(lake, seed=2)  # the same path, other data
    again = retriever.query(AVG_Q, as_of=AS_OF)
    assert again.rows is not None
    assert again.rows[0][0] == pytest.approx(_mean_power(lake))
    assert again.rows[0][0] != pytest.approx(first.rows[0][0])
    assert again.results[0]["vkg"]["cached"] is False


def test_the_same_question_on_an_unchanged_lake_reuses_its_graph(retriever: Retriever) -> None:
    retriever.query(AVG_Q, as_of=AS_OF)
    again = retriever.query(AVG_Q, as_of=AS_OF)
    assert again.results[0]["vkg"]["cached"] is True


def test_a_window_reaching_past_the_reference_time_is_cut_there_with_a_warning(
    retriever: Retriever,
) -> None:
    got = retriever.query("node power of node 900 today from 00:00 to 02:00",
                          as_of=datetime(2022, 6, 1, 0, 30, tzinfo=UTC))  # fmt: skip
    assert got.status == "completed"
    assert any("cut at 2022-06-01 00:30" in w for w in got.warnings)
    assert got.rows
    assert max(r[2] for r in got.rows) < "2022-06-01T00:30"


def test_a_window_after_the_reference_time_is_refused(retriever: Retriever) -> None:
    got = retriever.query("node power of node 900 on 2 June 2022 from 00:00 to 01:00",
                          as_of=datetime(2022, 6, 1, 0, 30, tzinfo=UTC))  # fmt: skip
    assert got.status == "rejected"
    assert "after the reference time" in got.answer


def test_a_completed_answer_says_what_it_understood(retriever: Retriever) -> None:
    got = retriever.query(AVG_Q, as_of=AS_OF)
    want = "Average node power (W) for node 900, 1 Jun 2022 00:00 to 01:00 UTC."
    assert got.understood_as == want
    assert got.answer.startswith(want.rstrip(".") + ": 1 row.")
    assert " W." in got.answer  # the figure is shown with its unit


def test_clarification_keeps_every_earlier_answer_across_rounds_and_restarts(
    lake: Path, tmp_path: Path, metric_index: None
) -> None:
    settings = load_settings(lake=str(lake), data_dir=tmp_path / "data", redis_url=None,
                             sparql_endpoint=None)  # fmt: skip
    asked = Retriever(settings).query("was it running hot on 1 June 2022 from 00:00 to 01:00?",
                                      as_of=AS_OF)  # fmt: skip
    fields = []
    for answer in ("inlet temperature", "above 20 °C", "node 900"):
        assert asked.status == "clarification", asked.answer
        assert asked.clarification is not None
        fields.append(asked.clarification.field)
        # a new process for every round: only the checkpoint store carries the answers over
        asked = Retriever(settings).clarify(asked.request_id, answer)
    assert fields == ["metric", "threshold", "entity"]
    assert asked.status == "completed", asked.answer
    assert asked.plan is not None
    assert asked.plan["metrics"] == [{"plugin": "ipmi", "metric": "ambient"}]
    assert asked.plan["filters"] == [{"about": "value", "op": "gt", "value": 20.0}]
    assert asked.plan["entities"] == [{"kind": "node", "ids": [900], "all": False}]
