"""Chart binding: which result a chart reads and how, from the results' columns alone."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from oda_analyst.codeagent.auditor import audit, blocking
from oda_analyst.coordinator.charts import ChartError, _cap, bind

GLOSSARY = {
    "total_power": ("node power", "W"),
    "ambient": ("inlet temperature", "°C"),
    "Gpu0_gpu_utilization": ("gpu 0 utilisation", "%"),
    "Gpu1_gpu_utilization": ("gpu 1 utilisation", "%"),
    "temp": ("outside temperature", "°C"),
    "s21.cluster_cpu_util": ("cluster cpu utilisation", "%"),
    "s21.cluster_gpu_util": ("cluster gpu utilisation", "%"),
}
READINGS = ["node_id", "metric_name", "timestamp", "value"]


def result(columns: list[str], metrics: list[str], *, rows: list[list[Any]] | None = None,
           count: int = 100, understood: str = "Readings of node power (W) for node 900, "
           "1 Jun 2022 20:00 to 24:00 UTC.", nodes: list[int] | None = None,
           window: tuple[str, str] = ("2022-06-01T20:00:00Z", "2022-06-02T00:00:00Z"),
           ) -> dict[str, Any]:  # fmt: skip
    entities = [{"kind": "node", "ids": nodes}] if nodes is not None else []
    return {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows) if rows is not None else count,
        "csv_handle": None if rows is not None else "h",
        "understood_as": understood,
        "plan": {"metrics": [{"plugin": "x", "metric": m} for m in metrics],
                 "entities": entities, "window": {"start": window[0], "end": window[1]}},
    }  # fmt: skip


def _safe(script: str) -> None:
    ast.parse(script)
    assert blocking(audit(script)) == [], audit(script)


def test_one_node_one_metric_is_one_line_labelled_from_the_skill() -> None:
    job = bind("line", [result(READINGS, ["total_power"], nodes=[900])], GLOSSARY)
    _safe(job.script)
    assert job.inputs == (0,)
    assert "odaplot.line(data='r1.csv', x='timestamp', y='value'" in job.script
    assert "ylabel='Node power', unit='W'" in job.script
    assert "series=" not in job.script
    assert job.outputs[0].title == "Node power for node 900, 1 Jun 2022 20:00 to 24:00 UTC"


def test_two_nodes_are_two_series_and_job_readings_one_line_per_job_with_stats() -> None:
    nodes = bind("line", [result(READINGS, ["Gpu0_gpu_utilization"], nodes=[900, 920])], GLOSSARY)
    assert "series='node_id', series_label='node'" in nodes.script
    assert "ylabel='GPU 0 utilisation', unit='%'" in nodes.script
    stats = result(["job_id", "min_value", "max_value", "avg_value"], ["total_power"],
                   rows=[[1, 2.0, 3.0, 2.5]])  # fmt: skip
    per_job = result(["job_id", "duration_h", *READINGS], ["total_power"])
    job = bind("line", [stats, per_job], GLOSSARY, stats=True)
    _safe(job.script)
    assert job.inputs == (1,)
    assert "series='job_id', series_label='job', stats=True" in job.script


def test_metrics_of_different_units_are_not_one_line() -> None:
    with pytest.raises(ChartError, match="different units"):
        bind("line", [result(READINGS, ["ambient", "total_power"], nodes=[900])], GLOSSARY)


def test_two_metrics_make_a_dual_axis_on_their_own_scales() -> None:
    job = bind("dual_axis", [result(READINGS, ["ambient", "total_power"], nodes=[900])], GLOSSARY)
    _safe(job.script)
    assert "pivot_table(index='timestamp', columns='metric_name', values='value')" in job.script
    assert "left='ambient', right='total_power'" in job.script
    assert "same_scale=False" in job.script
    # each series' figures in its own unit, for the answer to state (analysis2 Y26 drew the
    # chart and stated no figure)
    assert [o.name for o in job.outputs] == ["dual_axis.png", "figures-left.json",
                                             "figures-right.json"]  # fmt: skip
    assert job.script.count("odaplot.series_figures(") == 2


def test_two_periods_make_a_dual_axis_on_one_scale() -> None:
    june = result(["day", "avg_value"], ["temp"], rows=[["2022-06-01", 21.5]],
                  window=("2022-06-01T00:00:00Z", "2022-06-08T00:00:00Z"))  # fmt: skip
    may = result(["day", "avg_value"], ["temp"], rows=[["2022-05-01", 17.2]],
                 window=("2022-05-01T00:00:00Z", "2022-05-08T00:00:00Z"))  # fmt: skip
    job = bind("dual_axis", [june, may], GLOSSARY)
    _safe(job.script)
    assert job.inputs == (0, 1)
    assert "same_scale=True" in job.script and "categorical_x=True" in job.script
    assert "1–7 Jun 2022 compared with 1–7 May 2022" in job.outputs[0].title


def test_cv_per_job_is_a_bar_in_percent() -> None:
    res = result(["job_id", "cv_value", "avg_value"],
                 ["Gpu0_gpu_utilization", "Gpu1_gpu_utilization"], rows=[[1, 0.5, 40.0]],
                 understood="Coefficient of variation and average of gpu 0 utilisation and gpu "
                 "1 utilisation (%) per job for jobs 1, over their whole duration.")  # fmt: skip
    job = bind("bar", [res], GLOSSARY)
    _safe(job.script)
    assert "df['cv_percent'] = 100 * df['cv_value']" in job.script
    assert "values='cv_percent'" in job.script and "unit='%'" in job.script
    assert job.outputs[0].title.startswith("Coefficient of variation of GPU utilisation per job")


def test_per_metric_averages_are_bars_named_in_words() -> None:
    res = result(["metric_name", "avg_value"], ["s21.cluster_cpu_util", "s21.cluster_gpu_util"],
                 rows=[["s21.cluster_cpu_util", 29.0], ["s21.cluster_gpu_util", 30.6]])  # fmt: skip
    job = bind("bar", [res], GLOSSARY)
    assert "'s21.cluster_cpu_util': 'Cluster CPU utilisation'" in job.script
    assert "ylabel='Average cluster utilisation'" in job.script


def test_a_pie_needs_totals_and_readings_are_refused() -> None:
    with pytest.raises(ChartError, match="pie chart"):
        bind("pie", [result(READINGS, ["total_power"], nodes=[900])], GLOSSARY)
    hours = result(["sum_cpu_hours", "sum_gpu_hours", "count_job"], [],
                   rows=[[10.0, 2.0, 7]],
                   window=("2022-06-01T00:00:00Z", "2022-06-01T12:00:00Z"))  # fmt: skip
    job = bind("pie", [hours], GLOSSARY)
    _safe(job.script)
    assert job.outputs[0].title == "CPU hours and GPU hours, 1 Jun 2022 00:00–12:00 UTC (7 jobs)"


def test_a_box_plot_shows_the_ranked_groups_in_rank_order() -> None:
    ranking = result(["user_id", "count_job", "avg_value"], ["total_power"],
                     rows=[[7, 3, 1.0], [5, 2, 2.0]],
                     understood="Average node power (W) and number of jobs per user for jobs, "
                     "the top 2 by number of jobs.",
                     window=("2022-06-01T00:00:00Z", "2022-06-02T00:00:00Z"))  # fmt: skip
    per_job = result(["user_id", "job_id", "avg_value"], ["total_power"],
                     window=("2022-06-01T00:00:00Z", "2022-06-02T00:00:00Z"))  # fmt: skip
    job = bind("box", [ranking, per_job], GLOSSARY)
    _safe(job.script)
    assert job.inputs == (0, 1)
    assert "order=order" in job.script and "df[df['user_id'].isin(names)]" in job.script
    assert job.outputs[0].title == (
        "Average node power per job of the top 2 users by number of jobs, 1 Jun 2022"
    )


def test_a_box_plot_of_readings_is_one_box_per_series_with_its_figures() -> None:
    # 'as a box plot: the two gpu series of node 140, with each one's median': it was refused,
    # a box plot then needed one figure per job
    gpus = result(READINGS, ["Gpu0_gpu_utilization", "Gpu1_gpu_utilization"], nodes=[140])
    job = bind("box", [gpus], GLOSSARY, figures=["median"])
    _safe(job.script)
    assert "df['series'] = df['metric_name'].map(" in job.script
    assert "order=['GPU 0 utilisation', 'GPU 1 utilisation']" in job.script
    assert "odaplot.series_figures(data='/tmp/box.csv', value='value', series='series'" in (
        job.script
    )
    assert "extra=['median']" in job.script and job.script.count("series_figures") == 1
    nodes = bind("box", [result(READINGS, ["total_power"], nodes=[1, 2])], GLOSSARY)
    assert "'node ' + df['node_id'].astype(str)" in nodes.script
    with pytest.raises(ChartError, match="different units"):
        bind("box", [result(READINGS, ["total_power", "ambient"], nodes=[1])], GLOSSARY)


def test_two_windows_of_one_figure_are_one_bar_each() -> None:
    # '8-12 vs 14-18 on jun 1 … bar chart' was refused: no result had a figure per group
    morning, afternoon = (
        result(["avg_value"], ["s21.cluster_cpu_util"], rows=[[v]],
               window=(f"2022-06-01T{a}:00:00Z", f"2022-06-01T{b}:00:00Z"))
        for a, b, v in (("08", "12", 28.5), ("14", "18", 29.6))
    )  # fmt: skip
    job = bind("bar", [morning, afternoon], GLOSSARY)
    _safe(job.script)
    assert job.inputs == (0, 1)
    assert "'category': ['08:00–12:00', '14:00–18:00']" in job.script
    assert "category_label='Period (UTC)'" in job.script
    days = [result(["avg_value"], ["s21.cluster_cpu_util"], rows=[[v]],
                   window=(f"2022-06-0{d}T00:00:00Z", f"2022-06-0{d + 1}T00:00:00Z"))
            for d, v in ((1, 1.0), (3, 2.0))]  # fmt: skip
    assert "'category': ['1–1 Jun 2022', '3–3 Jun 2022']" in bind("bar", days, GLOSSARY).script
    with pytest.raises(ChartError):  # one figure alone is no comparison of periods
        bind("bar", [morning], GLOSSARY)


def test_a_heatmap_of_a_table_per_rack_and_hour_is_a_grid_with_its_extreme_cells() -> None:
    # 'mean node power per rack per hour, heatmap' was refused: only a correlation matrix
    table = result(["rack_id", "hour", "avg_value"], ["total_power"], count=1176)
    job = bind("heatmap", [table], GLOSSARY)
    _safe(job.script)
    assert "odaplot.grid(data='r1.csv', row='rack_id', col='hour', value='avg_value'" in job.script
    assert "row_prefix='rack '" in job.script and "out_json='figures.json'" in job.script
    assert [o.name for o in job.outputs] == ["heatmap.png", "figures.json"]
    with pytest.raises(ChartError, match="one figure per entity and hour or day"):
        bind("heatmap", [result(["rack_id", "avg_value"], ["total_power"])], GLOSSARY)


def test_a_heatmap_needs_several_metrics_and_correlates_minute_means() -> None:
    with pytest.raises(ChartError, match="two or more metrics"):
        bind("heatmap", [result(READINGS, ["total_power"], nodes=[900])], GLOSSARY)
    job = bind("heatmap", [result(READINGS, ["ambient", "total_power"], nodes=[900])], GLOSSARY)
    _safe(job.script)
    assert "dt.floor('1min')" in job.script
    assert "labels=['Inlet temperature', 'Node power']" in job.script


def test_no_rows_no_chart() -> None:
    empty = result(READINGS, ["total_power"], rows=[], nodes=[900])
    with pytest.raises(ChartError, match="no rows"):
        bind("line", [empty], GLOSSARY)


def test_it_power_is_capitalised_in_titles_and_it_the_word_is_not() -> None:
    assert _cap("average it power for the facility") == "Average IT power for the facility"
    assert _cap("it load of the cluster") == "IT load of the cluster"
    assert _cap("power as it rose") == "Power as it rose"


def test_titles_wrap_but_never_inside_a_date() -> None:
    res = result(["metric_name", "avg_value"], ["s21.cluster_cpu_util", "s21.cluster_gpu_util"],
                 rows=[["s21.cluster_cpu_util", 29.0]],
                 understood="Average cluster cpu utilisation and cluster gpu utilisation (%) for "
                 "each metric for the cluster, 1 Jun 2022 15:00 to 16:00 UTC.")  # fmt: skip
    title = bind("bar", [res], GLOSSARY).outputs[0].title
    assert title == (
        "Average cluster CPU utilisation and cluster GPU utilisation for the cluster,\n"
        "1 Jun 2022 15:00 to 16:00 UTC"
    )


def test_a_result_without_a_typed_plan_names_its_metric_in_its_rows() -> None:
    """A baseline's raw-lake result (sota2) has no typed plan: its rows' metric_name labels the
    chart; with neither a plan nor inline rows the chart is refused, not a crash."""
    rows = [[900, "total_power", "2022-06-01T00:00:13Z", 407.0],
            [900, "total_power", "2022-06-01T00:00:33Z", 403.0]]  # fmt: skip
    raw = {"columns": READINGS, "rows": rows, "row_count": 2, "csv_handle": None,
           "explanation": "lake queries: ipmi/total_power of nodes 900",
           "plan": {"lake_plan": ""}}  # fmt: skip
    job = bind("line", [raw], GLOSSARY)
    _safe(job.script)
    assert "ylabel='Node power', unit='W'" in job.script
    with pytest.raises(ChartError, match="names no metric"):
        bind("line", [{**raw, "rows": None, "row_count": 700, "csv_handle": "h"}], GLOSSARY)


def test_a_scatter_puts_the_first_metric_named_up_and_states_its_coefficients() -> None:
    res = result(READINGS, ["total_power", "Gpu0_gpu_utilization"], nodes=[900])
    job = bind("scatter", [res], GLOSSARY)
    _safe(job.script)
    assert job.kind == "scatter" and job.inputs == (0,)
    assert "x='Gpu0_gpu_utilization', y='total_power'" in job.script
    assert "ylabel='Node power'" in job.script and "xunit='%', yunit='W'" in job.script
    title = "Node power against GPU 0 utilisation, 1 Jun 2022 20:00 – 2 Jun 2022 00:00 UTC"
    assert job.outputs[0].title == title
    assert [o.name for o in job.outputs] == ["scatter.png", "scatter.json"]
    with pytest.raises(ChartError, match="exactly two metrics"):
        bind("scatter", [result(READINGS, ["total_power"], nodes=[900])], GLOSSARY)


def test_a_rolling_mean_is_what_the_line_draws_and_states() -> None:
    res = result(READINGS, ["total_power"], nodes=[512])
    job = bind("line", [res], GLOSSARY, figures=("rolling:10",))
    _safe(job.script)
    assert "odaplot.rolled(data='r1.csv', value='value', minutes=10.0)" in job.script
    assert "odaplot.line(data='/tmp/rolled.csv'" in job.script
    assert "odaplot.series_figures(data='/tmp/rolled.csv'" in job.script
    assert "ylabel='Node power (10-minute rolling mean)'" in job.script
    assert job.outputs[0].title.startswith("10-minute rolling mean of node power")
