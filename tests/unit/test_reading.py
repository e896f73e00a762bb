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
    # analysis5 V25: the entities first, then 'who had more' (the counts came with no winner)
    said = "user 28190 or user 28271: who had more jobs running during 1-7 june 2022"
    assert _read(said).form == "compare"
    # 'more than' is a threshold, no comparison of the two
    assert _read("which of nodes 12 and 13 drew more than 300 W on june 1").form != "compare"


def test_a_comparison_naming_no_statistic_is_made_on_the_means() -> None:
    # 'drew more power' names no figure: raw readings name no winner, the means do
    reading = _read("which of nodes 12 and 13 drew more power on june 1 2022")
    assert reading.analysis.compared_on_mean and reading.retrieval is not None
    assert reading.retrieval.compares and "average" in reading.retrieval.text
    # 'more … than <an entity>' sets the two side by side; 'more than 300 W' is a threshold
    said = _read("did node 900 use more gpu power than node 920 on 1 june 2022")
    assert said.form == "compare" and said.analysis.compared_on_mean
    for named in ("which of nodes 12 and 13 drew the most power on average on june 1 2022",
                  "which of nodes 12 and 13 drew more power on june 1 2022? line chart",
                  "did node 900 draw more than 300 W on june 1 2022"):  # fmt: skip
        assert not _read(named).analysis.compared_on_mean, named


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
    # the lexicon's synonyms read 'kicked off' as 'started' before the form is read
    said = read(question, AS_OF).retrieval
    assert said is not None
    assert said.form.job_event == event


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


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("line of the ICT power on jun 1", ["line"]),
        ("node 5 power on jun 1 as a line", ["line"]),
        ("line 1 current of panel 3 on jun 1", []),  # a panel's electrical line, not a chart
    ],
)
def test_a_line_alone_is_a_line_chart_but_line_1_is_a_phase(
    question: str, kinds: list[str]
) -> None:
    assert [c.kind for c in _read(question).analysis.charts] == kinds


@pytest.mark.parametrize(
    ("question", "charts"),
    [
        ("plot job 1677361's node power over its run as a line, and its averge", ["line"]),
        ("plot node 5 power over the whole day of jun 1 as a bar chart", ["bar"]),
        ("a histogram and a box plot of node 5 power on jun 1", ["histogram", "box"]),
    ],
)
def test_one_chart_per_kind_however_far_apart_its_words(question: str, charts: list[str]) -> None:
    assert [c.kind for c in _read(question).analysis.charts] == charts


def test_which_one_of_two_named_nodes_asks_for_the_nodes() -> None:
    # it answered with every reading above the level (4,320 rows) instead of the node
    said = read("did node 398 or node 399 ever go above 40 C inlet on june 1? which one",
                AS_OF).retrieval  # fmt: skip
    assert said is not None and said.form.lists_nodes
    one = read("did node 398 ever go above 40 C inlet on june 1?", AS_OF).retrieval
    assert one is not None and not one.form.lists_nodes


def test_a_declined_chart_is_no_chart_and_its_words_are_the_analysiss() -> None:
    # 'no chart needed' asked which chart to draw
    r = read("energy used by node 77 over lunchtime (12-2pm) jun 1, in kWh, no chart needed", AS_OF)
    assert r.analysis.charts == []
    assert [d.text for d in r.analysis.declined] == ["no chart needed"]
    assert "chart" not in r.retrieval_text()


def test_analysis_words_as_operators_write_them() -> None:
    bars = read("which 3 users used the most cpu hours on june 7? horizontal bars are fine", AS_OF)
    assert [c.kind for c in bars.analysis.charts] == ["bar"]
    # a one-letter typo of an analysis word is read (it was a retrieval statistic of one row)
    dual = read("PUE and IT power together on a dual axis chart, noon to 6pm june 1, with both "
                "avrages", AS_OF)  # fmt: skip
    assert [s.name for s in dual.analysis.statistics] == ["mean"] and dual.analysis.over_readings
    # 'against' pairs the scatter's two series: the retrieval never reads it
    pair = read("node 333: node power against socket 0 power on 1 june 2022 as a scatter", AS_OF)
    assert "against" not in pair.retrieval_text()
    high = read("rolling 1-hour mean of PUE over june 1 as a line, how high does it get", AS_OF)
    assert "max" in [s.name for s in high.analysis.statistics]


def test_a_comparative_after_which_asks_the_comparison_not_a_metric() -> None:
    # 'warmer' was read as a bare temperature beside 'inlet temp' and the kind was asked about
    r = read("compare node 398 and node 399 inlet temp over june 1 - which ran warmer and by how "
             "much? line chart", AS_OF)  # fmt: skip
    assert [m.text for m in r.metric_phrases] == ["inlet temp"]
    assert "warmer" in [c.text for c in r.analysis.comparison]
    assert "warmer" not in r.retrieval_text()
    # a threshold's 'more than' stays the retrieval's
    kept = read("which nodes drew more than 300 W of node power on june 1", AS_OF)
    assert "more" in kept.retrieval_text()


def test_words_that_pair_two_series_keep_them_apart_and_bottom_ranks_lowest_first() -> None:
    r = read("how does outside temp relate to humidity across june? scatter plot and the "
             "correlation coefficient", AS_OF)  # fmt: skip
    said = r.retrieval
    assert said is not None
    assert [p.text for p in said.chunking.phrases] == ["outside temp", "humidity"]
    from oda_analyst.reading.rules.cues import read_intent  # noqa: PLC0415

    # 'bottom 3 racks' asked which racks (no ranking was read) and would have ranked highest first
    rank = read_intent("bottom 3 racks by avg cpu user 1 jun 16:00-17:00").rank
    assert rank is not None and (rank.k, rank.desc) == (3, False)


def test_the_extreme_of_a_drawn_grouping_is_the_answers_to_state_not_a_ranking() -> None:
    # 'which rack runs warmest' beside a bar chart of the mean per rack was a top-1 by max: one
    # bar; 'which hour was quietest' beside hourly means a minimum of every reading
    racks = read("bar chart of mean inlet temp per rack on 1 june 9-10, which rack runs warmest",
                 AS_OF)  # fmt: skip
    assert [a.text for a in racks.analysis.answered] == ["which rack runs warmest"]
    assert not racks.rankings and "warmest" not in racks.retrieval_text()
    hours = read("hourly mean gpu 0 utilisation of all nodes on june 1 as a line, which hour "
                 "was quietest?", AS_OF)  # fmt: skip
    assert [a.text for a in hours.analysis.answered] == ["which hour was quietest"]
    # with no chart the ranking is the answer
    ranked = read("mean inlet temp per rack on 1 june 9-10, which rack runs warmest", AS_OF)
    assert not ranked.analysis.answered


def test_an_hour_of_day_profile_of_one_day_is_that_days_hourly_series() -> None:
    one = read("avg idle node count by hour of day on june 1, bar chart; when was the most idle",
               AS_OF)  # fmt: skip
    assert [g.by for g in one.groupings] == ["hour"]
    assert all(s.name != "profile" for s in one.statistics)
    assert [a.text for a in one.analysis.answered] == ["when was the most idle"]
    month = read("hour-of-day profile of outdoor temp over june as a line graph", AS_OF)
    assert [s.name for s in month.statistics] == ["profile"]


def test_a_qualitys_comparative_asks_the_comparison_even_alone() -> None:
    # 'was it windier … or …' named no quantity besides 'windier': no comparison was stated
    calmer = read("was it calmer in the first week of june or the second? bar chart", AS_OF)
    assert [c.text for c in calmer.analysis.comparison] == ["calmer"]
    assert calmer.retrieval is not None and "wind speed" in calmer.retrieval.text


def test_the_extreme_cell_of_a_drawn_grid_is_the_answers_to_state() -> None:
    grid = read("heatmap of mean gpu power per node per hour on 2 june, and the busiest "
                "node-hour's value", AS_OF)  # fmt: skip
    assert [a.text for a in grid.analysis.answered] == ["the busiest node-hour's value"]
    assert "busiest" not in grid.retrieval_text()


def test_a_unit_said_for_the_figures_names_no_quantity() -> None:
    # analysis5 V02: 'the lowest and highest hPa' was refused ('could not use hPa')
    reading = _read("outdoor air pressure 10th–16th May 2022 as a line chart, with the lowest "
                    "and highest hPa")  # fmt: skip
    assert [u.text for u in reading.units] == ["hPa"] and not reading.unused
    assert [m.text for m in reading.metric_phrases] == ["air pressure"]
    assert "hPa" not in reading.retrieval_text()
    # a unit after a number is a threshold's, and a unit alone names no metric beside it
    assert not _read("hours the air pressure was above 1015 hPa on 1 june 2022").units
