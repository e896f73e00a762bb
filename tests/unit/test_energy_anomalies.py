"""Energies and anomalies, from the question's words to the answer's sentence: the reader finds
them (k, the side of the mean, a bucket), the planner asks the chart's script to compute them,
the binder refuses what cannot carry them, and the answer states them with units."""

from __future__ import annotations

import ast
from datetime import UTC, datetime

import pytest
from test_coordinator_charts import GLOSSARY, READINGS, result

from oda_analyst.codeagent.auditor import audit, blocking
from oda_analyst.coordinator.charts import ChartError, bind
from oda_analyst.coordinator.figures import (
    anomalies_sentence,
    energy_sentence,
    kwh,
    profile_sentence,
)
from oda_analyst.coordinator.planner import Decomposition, decompose
from oda_analyst.reading.read import read

AS_OF = datetime(2022, 6, 2, tzinfo=UTC)


def _plan(question: str) -> Decomposition:
    found = decompose(read(question, AS_OF))
    assert isinstance(found, Decomposition), found
    return found


@pytest.mark.parametrize(
    ("question", "words", "k", "side"),
    [
        ("flag pcie readings more than 3 std devs above the mean across all nodes 6-7am jun 1",
         "more than 3 std devs above the mean", 3.0, "above"),
        ("node 77 inlet 10-12 jun 1: any readings more than 2 sigma off its own mean?",
         "more than 2 sigma off its own mean", 2.0, "both"),
        ("inlet temp of node 5 on jun 1, readings 2.5 standard deviations below the average",
         "2.5 standard deviations below the average", 2.5, "below"),
        ("outliers in node 5 power on jun 1", "outliers", None, "both"),
    ],
)  # fmt: skip
def test_anomalies_are_read_with_k_and_the_side_of_the_mean(
    question: str, words: str, k: float | None, side: str
) -> None:
    reading = read(question, AS_OF)
    (stat,) = [s for s in reading.analysis.statistics if s.name == "anomalies"]
    assert (stat.text, stat.k, stat.side) == (words, k, side)
    assert words not in reading.retrieval.text  # never a metric or a threshold of the retrieval


def test_a_std_dev_asked_is_still_the_statistic() -> None:
    reading = read("std dev of node power for node 77 on 1 Jun 2022", AS_OF)
    assert not [s for s in reading.statistics if s.name == "anomalies"]
    assert [s.name for s in reading.statistics] == ["std"]


def test_an_anomaly_count_answers_how_many_and_which_nodes_itself() -> None:
    reading = read("flag pcie readings more than 3 std devs above the mean across all nodes "
                   "6-7am jun 1 - how many and which nodes", AS_OF)  # fmt: skip
    assert [a.text for a in reading.analysis.answered] == ["how many", "which nodes"]
    said = reading.retrieval
    assert "how many" not in said.text and "which" not in said.text
    assert not said.form.how_many and not said.form.lists_nodes
    assert _plan(reading.text).figures == ("anomalies:3:above",)


def test_energy_names_the_power_it_integrates_and_takes_the_total_and_the_bucket() -> None:
    reading = read("how much energy did rack 12 use in total between 8 and 12 on june 1", AS_OF)
    assert {s.name for s in reading.analysis.statistics} == {"energy"}
    assert "node power" in reading.retrieval.text and "total" not in reading.retrieval.text
    hourly = read("energy used by the nodes of rack 7 on jun 1 in kWh, hourly bar chart", AS_OF)
    assert "hourly" not in hourly.retrieval.text  # readings, integrated per hour by the analysis
    plan = _plan(hourly.text)
    assert plan.figures == ("energy:hour",) and [c.kind for c in plan.charts] == ["bar"]
    # asked without a chart, the power is drawn and its energy stated beside it
    assert [c.kind for c in _plan(reading.text).charts] == ["line"]


def test_drawn_by_node_900_is_no_grouping_and_a_colon_ends_a_date() -> None:
    reading = read("kWh drawn by node 900's gpus 8:00-15:00 jun 1, line of their power", AS_OF)
    assert reading.groupings == []
    times = read("node 77 inlet between 10 and 12 jun 1: any readings", AS_OF).retrieval.time
    (window,) = times.windows
    assert (window.start, window.end) == (datetime(2022, 6, 1, 10, tzinfo=UTC),
                                          datetime(2022, 6, 1, 12, tzinfo=UTC))  # fmt: skip


def _safe(script: str) -> None:
    ast.parse(script)
    assert blocking(audit(script)) == [], audit(script)


def test_the_charts_compute_energies_and_mark_anomalies() -> None:
    power = [result(READINGS, ["total_power"], nodes=[900, 920])]
    bars = bind("bar", power, GLOSSARY, figures=("energy:hour",))
    _safe(bars.script)
    assert "odaplot.energy_bars(" in bars.script and "bucket='hour'" in bars.script
    assert "extra=['energy:hour']" in bars.script  # the total, for the answer to state
    line = bind("line", power, GLOSSARY, figures=("anomalies:2:both",))
    assert "sigmas=2.0, side='both'" in line.script
    hist = bind("histogram", [result(READINGS, ["ambient"], nodes=[1, 2])], GLOSSARY,
                figures=("anomalies:3:above",))  # fmt: skip
    assert "sigmas=3.0, side='above'" in hist.script and "by='node_id'" in hist.script


def test_an_energy_of_no_power_or_on_a_chart_that_cannot_carry_it_is_refused() -> None:
    inlet = [result(READINGS, ["ambient"], nodes=[5])]
    with pytest.raises(ChartError, match="power integrated over time"):
        bind("line", inlet, GLOSSARY, figures=("energy",))
    power = [result(READINGS, ["total_power"], nodes=[5])]
    with pytest.raises(ChartError, match="energy asked is computed beside"):
        bind("scatter", power, GLOSSARY, figures=("energy",))
    with pytest.raises(ChartError, match="anomalies asked is computed beside"):
        bind("bar", power, GLOSSARY, figures=("anomalies:3:both",))


def test_the_answer_states_energy_and_anomalies_with_units() -> None:
    assert kwh(41.36) == "41.36 kWh"
    assert kwh(19735.2) == "19,735.2 kWh (19.74 MWh)"
    text = energy_sentence({"total_kwh": 306.3, "series_count": 20, "by": "node_id",
                            "bucket": "hour", "by_bucket": {"2022-06-01 05:00": 21.86,
                                                            "2022-06-01 12:00": 9.22}})  # fmt: skip
    assert text.startswith("Energy in total over the 20 nodes: 306.3 kWh.")
    assert "Highest hour: 2022-06-01 05:00 UTC (21.86 kWh)" in text
    found = {"k": 3.0, "side": "above", "mean": 39.29, "std": 2.33, "count": 360,
             "readings": 176400, "by": "node_id", "by_series": {"77": 180, "398": 180},
             "high": 46.28, "low": None}  # fmt: skip
    said = anomalies_sentence(found, "°C", "PCIe temperature")
    assert "360 of 176,400 readings lie more than 3 standard deviations above the mean" in said
    assert "beyond 46.28 °C" in said and "on 2 nodes: node 77 (180), node 398 (180)" in said


def test_a_profile_is_read_drawn_and_stated() -> None:
    reading = read("hour of day profile of outdoor temp across june, line chart. which hour's "
                   "warmest on avg?", datetime(2022, 7, 1, tzinfo=UTC))  # fmt: skip
    (stat,) = [s for s in reading.analysis.statistics if s.name == "profile"]
    assert stat.cycle == "hour_of_day"
    assert [a.text for a in reading.analysis.answered] == ["which hour's warmest"]
    assert "warmest" not in reading.retrieval.text and "hour" not in reading.retrieval.text
    (window,) = reading.retrieval.time.windows  # 'across june' is the month
    assert (window.start, window.end) == (datetime(2022, 6, 1, tzinfo=UTC),
                                          datetime(2022, 7, 1, tzinfo=UTC))  # fmt: skip
    weekly = _plan("humidity by day of week across may, bar chart; most humid weekday?")
    assert weekly.figures == ("profile:weekday",) and [c.kind for c in weekly.charts] == ["bar"]
    job = bind("line", [result(READINGS, ["total_power"], nodes=[5])], GLOSSARY,
               figures=("profile:hour_of_day",))  # fmt: skip
    _safe(job.script)
    assert "odaplot.profile(" in job.script and "cycle='hour_of_day'" in job.script
    assert job.outputs[0].title.startswith("Mean node power per hour of the day (UTC) for node 900")
    with pytest.raises(ChartError, match="profile asked is computed beside"):
        bind("pie", [result(READINGS, ["total_power"], nodes=[5])], GLOSSARY,
             figures=("profile:weekday",))  # fmt: skip
    said = profile_sentence({"cycle": "weekday", "means": {"Monday": 61.2, "Tuesday": 70.4},
                             "highest": ["Tuesday", 70.4], "lowest": ["Monday", 61.2],
                             "readings": 4464}, "%", "outdoor humidity")  # fmt: skip
    assert said == (
        "Mean outdoor humidity per day of the week, over 4,464 readings: Monday "
        "61.2%; Tuesday 70.4%. Highest on Tuesday (70.4%); lowest on Monday (61.2%)."
    )


def test_a_day_by_hour_heatmap_is_an_hour_of_day_profile_per_day() -> None:
    # analysis9 I13: 'day x hour of day' left 'x' unread, 'warmest' became a max retrieval, and
    # a profile could be drawn only as a line or bars
    question = ("outdoor temp 1-7 june as a heatmap, day x hour of day; which cell is warmest "
                "and at what mean?")  # fmt: skip
    reading = read(question, datetime(2022, 7, 5, 9, tzinfo=UTC))
    assert not reading.unused
    assert [a.text for a in reading.analysis.answered] == ["which cell is warmest"]
    plan = _plan(question)
    assert plan.figures == ("profile:hour_of_day",)
    assert [c.kind for c in plan.charts] == ["heatmap"]
    job = bind("heatmap", [result(READINGS, ["total_power"], nodes=[5])], GLOSSARY,
               figures=plan.figures)  # fmt: skip
    _safe(job.script)
    assert "odaplot.day_hour_grid(" in job.script
    assert job.outputs[0].title.startswith("Mean node power per day and hour of the day")
    # analysis2 Y31: 'hottest cell?' of a grid per rack per hour was an unread word
    reading = read("heatmap of avg pcie temp per rack per hour, racks 0-9, 8am to 4pm jun 1; "
                   "hottest cell?", datetime(2022, 7, 5, 9, tzinfo=UTC))  # fmt: skip
    assert not reading.unused
    assert [a.text for a in reading.analysis.answered] == ["hottest cell"]
    # a correlation heatmap still needs two metrics, a weekday profile no day-by-hour grid
    with pytest.raises(ChartError, match="heatmap"):
        bind("heatmap", [result(READINGS, ["total_power"], nodes=[5])], GLOSSARY)
    with pytest.raises(ChartError, match="heatmap"):
        bind("heatmap", [result(READINGS, ["total_power"], nodes=[5])], GLOSSARY,
             figures=("profile:weekday",))  # fmt: skip


def test_each_figure_names_the_retrieval_and_the_recipe_that_made_it() -> None:
    from oda_analyst.coordinator.graph import figure_provenance  # noqa: PLC0415

    power = result(READINGS, ["total_power"], nodes=[900, 920])
    power["sparql"] = "SELECT ?node_id ..."
    job = bind("bar", [power], GLOSSARY, figures=("energy:hour",))
    found = figure_provenance(job, [power])
    (source,) = found["retrievals"]
    assert source["input"] == "r1.csv" and source["sparql"] == "SELECT ?node_id ..."
    assert source["understood_as"].startswith("Readings of node power")
    assert [c.split("(")[0] for c in found["recipes"]] == ["odaplot.energy_bars",
                                                            "odaplot.series_figures"]  # fmt: skip
    assert "extra=['energy:hour']" in found["recipes"][1]
