"""The reader: one pass over a question into typed spans, each quoting the question."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.reading.model import Reading, Span, check_quotes
from oda_analyst.reading.read import read

AS_OF = datetime(2022, 6, 15, 12, tzinfo=UTC)


def _read(question: str) -> Reading:
    reading = read(question, AS_OF)
    check_quotes(reading)  # every span the reader makes quotes the question
    return reading


def test_a_percentile_names_its_p() -> None:
    for question, p in (("p95 inlet temp across all nodes 8-9am june 1 + histogram", 95.0),
                        ("the 99th percentile of node 5 power on 1 june 2022", 99.0)):  # fmt: skip
        stats = [s for s in _read(question).statistics if s.name == "percentile"]
        assert [s.p for s in stats] == [p], question


def test_a_rolling_window_is_the_statistics_never_a_time_window() -> None:
    reading = _read("10-min rolling mean of node 17 total power on june 1, line graph pls")
    rolling = [s for s in reading.statistics if s.name == "rolling"]
    assert [(s.window_minutes, s.text) for s in rolling] == [(10.0, "10-min rolling mean")]
    assert [s.name for s in reading.analysis.statistics] == ["rolling"]
    assert "10-min" not in reading.retrieval_text()  # the retriever would read 'last 10 min'
    assert all("min" not in t.text for t in reading.times)
    assert not any(s.name == "min" for s in reading.statistics)


def test_a_ranking_says_what_it_ranks_by() -> None:
    (rank,) = _read("top 5 racks by avg power on 1 june, bar chart").rankings
    assert (rank.direction, rank.k, rank.by) == ("top", 5, "avg power")
    (low,) = _read("bottom-3 nodes by peak inlet temperature on 1 June 2022").rankings
    assert (low.direction, low.k, low.by) == ("bottom", 3, "peak inlet temperature")


@pytest.mark.parametrize(
    ("question", "by"),
    [
        ("inlet temperature per rack 1 june 2022 08:00-09:00 as a box plot", "rack"),
        ("mean power for every node on 1 June 2022", "node"),
        ("jobs each day from 1 to 5 June 2022", "day"),
        ("hourly mean power of node 5 on 1 June 2022", "hour"),
    ],
)
def test_per_each_every_is_a_grouping(question: str, by: str) -> None:
    assert [g.by for g in _read(question).groupings] == [by]


def test_which_of_two_nodes_is_a_comparison() -> None:
    assert _read("which of nodes 12 and 13 drew more power on average on june 1?").form == "compare"
    assert _read("How many nodes are there in M100?").form == "how_many"
    assert _read("was node 300 above 30 C at noon on 1 June 2022?").form == "yes_no"


def test_a_correlation_is_the_analysis_and_not_a_metric() -> None:
    reading = _read("does gpu0 power track gpu0 util on node 900 1 june 8-12h? scatter + corr pls")
    assert [c.kind for c in reading.analysis.charts] == ["scatter"]
    assert {s.name for s in reading.analysis.statistics} == {"correlation"}
    kept = reading.retrieval_text()
    assert "track" not in kept and "corr" not in kept and "scatter" not in kept
    assert [m.text for m in reading.metric_phrases] == ["power", "util"]


@pytest.mark.parametrize(
    "question",
    ["power draw of node 5 on 1 June 2022", "power distribution units of rack 3 on 1 June 2022"],
)
def test_everyday_words_that_look_like_charts_are_not_charts(question: str) -> None:
    assert _read(question).analysis.charts == []


def test_a_chart_without_a_kind_is_kept_for_asking() -> None:
    (chart,) = _read("node 900 power on 1 June 2022, visualise it").analysis.charts
    assert chart.kind is None and chart.text == "visualise"


def test_a_forged_span_is_refused() -> None:
    reading = _read("power of node 900 on 1 June 2022, pie chart")
    forged = reading.model_copy(update={"metric_phrases": [Span(start=0, end=5, text="inlet")]})
    with pytest.raises(UsageError, match="quote the question"):
        check_quotes(forged)
    outside = reading.model_copy(update={"unused": [Span(start=90, end=99, text="x")]})
    with pytest.raises(UsageError, match="outside the question"):
        check_quotes(outside)


def test_a_reading_travels_as_json_and_back() -> None:
    reading = _read("scatter of gpu0 power vs gpu0 util on node 900 on 1 june 2022 8-12h")
    again = Reading.model_validate_json(reading.model_dump_json())
    assert again == reading
    assert "analysis" in Reading.model_json_schema()["properties"]


def test_concurrent_reads_equal_sequential_ones() -> None:
    questions = [
        "p95 inlet temp across all nodes 8-9am june 1 + histogram",
        "top 5 racks by avg power on 1 june, bar chart",
        "does gpu0 power track gpu0 util on node 900 1 june 8-12h? scatter + corr pls",
        "inlet temperature per rack 1 june 2022 08:00-09:00 as a box plot",
        "which of nodes 12 and 13 drew more power on average on june 1?",
    ] * 8
    sequential = [read(q, AS_OF) for q in questions]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(lambda q: read(q, AS_OF), questions))
    assert concurrent == sequential


@pytest.mark.parametrize(
    ("question", "event"),
    [
        ("how many jobs kicked off on 5 June 2022", "started"),
        ("jobs that got going on the 2nd", "started"),
        ("how many jobs got started on 4 June", "started"),
        ("what is going on with the jobs of user 7 on 4 June", None),
    ],
)
def test_two_word_job_events(question: str, event: str | None) -> None:
    from oda_analyst.reading.rules import form  # noqa: PLC0415

    assert form.read_form(form.words_of(question)).job_event == event


def test_statistics_of_drawn_readings_are_the_analysis() -> None:
    """'p95 … plus a histogram' was refused ('no result holds individual readings') or
    completed without its histogram: one retrieval of the readings serves both."""
    from oda_analyst.coordinator.planner import Decomposition, decompose  # noqa: PLC0415

    reading = _read("p95 inlet temp over every node 8-9am june 1 plus a histogram")
    assert reading.analysis.over_readings
    assert "p95" not in reading.retrieval_text()
    found = decompose(reading)
    assert isinstance(found, Decomposition) and found.figures == ("p95",)
    grouped = _read("avg node power per rack 12:00-13:00 1 june as a bar chart")
    assert not grouped.analysis.over_readings and "avg" in grouped.retrieval_text()
    lined = _read("mean and max gpu0 util of node 900 on 1 June 2022 8-12h, line graph")
    assert lined.analysis.over_readings
    planned = decompose(lined)
    # min, mean and max of every drawn series are always stated: nothing more to compute
    assert isinstance(planned, Decomposition) and planned.figures == ()


@pytest.mark.parametrize(
    ("question", "charts"),
    [
        ("Retrieve the power of node 900 on 1 June 2022 and plot the time series", ["line"]),
        ("inlet temperature of all nodes on 1 June 2022 and create a histogram", ["histogram"]),
        ("the power of node 900 on 1 June 2022", []),
        ("power of node 900 on 1 June 2022, visualise it", ["chart"]),
    ],
)
def test_what_a_question_asks_beyond_the_retrieval_is_plain_json(
    question: str, charts: list[str]
) -> None:
    asked = read(question, AS_OF).asked()
    assert asked["charts"] == charts
    assert json.loads(json.dumps(asked)) == asked


def test_reading_a_question_never_imports_torch() -> None:
    """spaCy's thinc imports torch when it is installed (~4 s of a one-shot ask here); the blank
    pipeline never runs a torch layer, so the reader loads spaCy with torch hidden."""
    code = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from oda_analyst.reading.read import read\n"
        "read('p95 power of node 4 on 1 june 8-9, box plot', datetime(2022, 6, 13, tzinfo=UTC))\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    "question",
    [
        "scatter of node 5 gpu0 power vs gpu0 utilisation on june 1 8-9 with r",
        "node 5 inlet temp vs its power on june 1 8-9, pearson r pls",
    ],
)
def test_an_r_asks_for_the_correlation(question: str) -> None:
    assert "correlation" in [s.name for s in read(question, AS_OF).analysis.statistics]
