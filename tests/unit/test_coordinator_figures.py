"""The figures an analysis answer states in words (pure: from rows and recipe JSON)."""

from __future__ import annotations

from oda_analyst.coordinator.figures import (
    fmt,
    periods_sentence,
    recipe_sentence,
    table_sentence,
)


def test_numbers_are_rounded_for_a_person() -> None:
    # hundredths below 100,000: four significant figures turned a peak reading of 287.64 W
    # into 287.6 and a median of 1,111.5 W into 1,112 (analysis6 U17, analysis7 N03)
    assert [fmt(v) for v in (1018.4715277, 345500.0, 882.44, 41.25, 0.83123, -3.5, 287.640015,
                             1.1943, 1111.5, 123456.7)] == [
        "1,018.47", "345,500", "882.44", "41.25", "0.8312", "-3.5", "287.64", "1.194",
        "1,111.5", "123,457",
    ]  # fmt: skip


def test_a_two_node_comparison_names_the_winner_and_by_how_much() -> None:
    figures = {"series": "node_id", "label": "node power", "unit": "W", "groups": {
        "12": {"count": 720, "min": 700.0, "max": 1020.0, "avg": 882.4},
        "13": {"count": 720, "min": 900.0, "max": 1200.0, "avg": 1035.0},
    }}  # fmt: skip
    text = recipe_sentence(figures, compare=True)
    assert text is not None
    assert "node 12: min 700 W, mean 882.4 W, max 1,020 W (720 readings)" in text
    assert "Node 13 is higher (mean 1,035 W against 882.4 W: +152.6 W, +17.29 %)" in text
    assert "higher" not in (recipe_sentence(figures, compare=False) or "")


def test_one_series_is_named_once() -> None:
    figures = {"series": None, "label": "node power", "unit": "W", "groups": {
        "all": {"count": 540, "min": 403.0, "max": 668.0, "avg": 537.5},
    }}  # fmt: skip
    assert recipe_sentence(figures, compare=False) == (
        "Node power: min 403 W, mean 537.5 W, max 668 W (540 readings)."
    )


def test_a_statistic_asked_of_several_series_is_also_stated_of_them_all() -> None:
    # analysis5 V03 'inlet temps across rack 7, box plot, median too': each node's median was
    # stated, the rack's never
    figures = {"series": "node_id", "label": "inlet temperature", "unit": "°C", "groups": {
        "140": {"count": 540, "min": 23.0, "max": 24.0, "avg": 23.47, "median": 23.5},
        "144": {"count": 540, "min": 25.2, "max": 26.0, "avg": 25.62, "median": 25.6},
    }, "pooled": {"count": 1080, "min": 23.0, "max": 26.0, "avg": 24.55,
                  "median": 24.3}}  # fmt: skip
    text = recipe_sentence(figures, compare=False)
    assert text is not None and text.endswith(
        "All 2 nodes together: min 23 °C, mean 24.55 °C, max 26 °C, median 24.3 °C "
        "(1,080 readings)."
    )


def test_a_keyed_table_is_stated_with_its_ends_and_a_long_one_by_its_ends() -> None:
    small = {"columns": ["user_id", "sum_cpu_hours", "count_job"], "unit": None,
             "rows": [[25000, 345500.13, 800], [28919, 188977.5, 394],
                      [7, 36960.2, 20]]}  # fmt: skip
    assert table_sentence(small, compare=False) == (
        "User 25000: sum cpu hours 345,500 h, count job 800; user 28919: sum cpu hours 188,978 h, "
        "count job 394; user 7: sum cpu hours 36,960.2 h, count job 20. Total over the 3 users: "
        "sum cpu hours 571,438 h, count job 1,214. Highest sum cpu hours: user 25000 "
        "(345,500 h); lowest: user 7 (36,960.2 h)."
    )
    pair = {"columns": ["rack_id", "avg_value"], "unit": "W", "rows": [[3, 452.3], [39, 1338.3]]}
    assert table_sentence(pair, compare=True) == (
        "Rack 3: avg 452.3 W; rack 39: avg 1,338.3 W. Rack 39 is higher (avg 1,338.3 W against "
        "452.3 W: +886 W, +195.89 %)."
    )
    hours = {"columns": ["hour", "avg_value"], "unit": "kW",
             "rows": [[f"2022-06-01T{h:02d}:00:00Z", 800.0 + (h == 9) * 62.7 - (h == 3) * 40]
                      for h in range(24)]}  # fmt: skip
    text = table_sentence(hours, compare=False)
    assert text is not None and text.startswith("24 groups; the highest and lowest three by avg")
    assert "2022-06-01 09:00 UTC: avg 862.7 kW" in text and "03:00 UTC: avg 760 kW" in text
    # one node's GPUs: each row is named by its GPU (it read 'node 140' four times)
    gpus = {"columns": ["node_id", "gpu_index", "median_value"], "unit": "W",
            "rows": [[140, 0, 39.19], [140, 1, 39.36], [140, 3, 39.7]]}  # fmt: skip
    assert table_sentence(gpus, compare=False) == (
        "GPU 0 of node 140: median 39.19 W; GPU 1 of node 140: median 39.36 W; GPU 3 of node "
        "140: median 39.7 W. Highest median: GPU 3 of node 140 (39.7 W); lowest: GPU 0 of node "
        "140 (39.19 W)."
    )
    readings = {"columns": ["node_id", "timestamp", "value"], "rows": [[1, "t", 2.0]] * 3}
    assert table_sentence(readings, compare=False) is None  # a series is the recipe's to state


def test_a_scatter_states_both_coefficients_and_n() -> None:
    text = recipe_sentence({"pearson": 0.8312, "spearman": 0.79, "n": 240,
                            "grid": "1-minute means", "x": "GPU 0 utilisation",
                            "y": "GPU 0 power"}, compare=False)  # fmt: skip
    assert text == ("Correlation of GPU 0 power with GPU 0 utilisation: Pearson r = 0.83, "
                    "Spearman \u03c1 = 0.79, over 240 paired 1-minute means.")  # fmt: skip


def test_a_figure_near_one_keeps_four_significant_figures() -> None:
    assert [fmt(v) for v in (1.19440, 9.8765, 1.0)] == ["1.194", "9.877", "1"]  # a PUE of 1.194


def test_two_windows_of_one_figure_are_compared_in_words() -> None:
    def one(start: str, end: str, value: float) -> dict[str, object]:
        return {"columns": ["avg_value"], "rows": [[value]], "unit": "%",
                "plan": {"window": {"start": start, "end": end}}}  # fmt: skip

    morning = one("2022-06-01T08:00:00Z", "2022-06-01T12:00:00Z", 28.56)
    afternoon = one("2022-06-01T14:00:00Z", "2022-06-01T18:00:00Z", 29.59)
    assert periods_sentence([morning, afternoon]) == (
        "2022-06-01 14:00–18:00 UTC is higher (avg 29.59% against 28.56%: +1.03%, +3.606 %)."
    )
    # windows of whole days keep their dates (analysis6 U26: 'may 2022 vs june 2022' named
    # June '2022-06-01 00:00–00:00 UTC')
    may = one("2022-05-01T00:00:00Z", "2022-06-01T00:00:00Z", 18.28)
    june = one("2022-06-01T00:00:00Z", "2022-07-01T00:00:00Z", 23.46)
    assert periods_sentence([may, june]).startswith(  # type: ignore[union-attr]
        "2022-06-01 00:00 to 2022-07-01 00:00 UTC is higher (avg 23.46% against 18.28%"
    )
    # one window, or a table of groups, is not a comparison of periods
    assert periods_sentence([morning]) is None
    assert periods_sentence([morning, morning]) is None
    grouped = {"columns": ["node_id", "avg_value"], "rows": [[1, 2.0]], "unit": "W"}
    assert periods_sentence([morning, grouped]) is None


def test_a_heatmap_states_its_highest_and_lowest_cells() -> None:
    figures = {"grid": {"highest": ["rack 30", "06:00", 1392.89], "lowest": ["rack 41", "13:00",
                                                                            413.9],
                        "cells": 1176, "col": "Hour (UTC)"},
               "label": "Average node power", "unit": "W"}  # fmt: skip
    assert recipe_sentence(figures, compare=False) == (
        "Highest average node power: rack 30 at 06:00 UTC (1,392.9 W); lowest: rack 41 at "
        "13:00 UTC (413.9 W), over 1,176 cells."
    )
    # a table per rack per hour names each row by both keys
    table = {"columns": ["rack_id", "hour", "avg_value"], "unit": "W",
             "rows": [[3, "2022-06-01T09:00:00Z", 900.0], [4, "2022-06-01T09:00:00Z", 950.0],
                      [3, "2022-06-01T10:00:00Z", 1000.0]]}  # fmt: skip
    text = table_sentence(table, compare=False)
    assert text is not None and "Highest avg: rack 3 at 2022-06-01 10:00 UTC (1,000 W)" in text


def test_a_cv_is_stated_as_a_ratio_and_in_percent() -> None:
    # analysis6 U07: a CV has no unit (it was left out of the figures stated)
    figures = {"groups": {"all": {"count": 1200, "min": 50.0, "max": 180.0, "avg": 100.0,
                                  "p99": 174.0, "cv": 0.481}},
               "label": "socket 0 power", "unit": "W"}  # fmt: skip
    text = recipe_sentence(figures, compare=False)
    assert text is not None and "p99 174 W, CV 0.481 (48.1 %)" in text


def test_a_count_of_readings_is_no_figure_in_their_unit() -> None:
    # analysis6 U28: 'count_value = 1440 kW' (a number of readings given the power's unit)
    from oda_analyst.retriever.answer import summarise  # noqa: PLC0415

    result = {"understood_as": "Number of readings of IT power (kW)", "explanation": "",
              "row_count": 1, "rows": [[1440, 822.8]], "columns": ["count_value", "avg_value"],
              "unit": "kW", "csv": None}  # fmt: skip
    text = summarise([result])
    assert "1440 kW" not in text and "count_value = 1440," in text
    assert "avg_value = 822.8 kW" in text


def test_the_nodes_of_one_job_are_a_node_list_and_its_length() -> None:
    # blind14 Z47: 'node count, and which nodes' read 'node 966: count job 1' eight times
    rows = [[n, 1] for n in (966, 968, 970)]
    text = table_sentence({"columns": ["node_id", "count_job"], "rows": rows}, compare=False)
    assert text == "3 nodes: 966, 968, 970 (one of the jobs asked on each)."
    many = [[n, 1] for n in range(30)]
    text = table_sentence({"columns": ["node_id", "count_job"], "rows": many}, compare=False)
    assert text is not None and text.startswith("30 nodes: 0, 1,") and "and 6 more" in text
    # jobs that shared nodes keep their counts per node
    shared = [[966, 2], [968, 1]]
    text = table_sentence({"columns": ["node_id", "count_job"], "rows": shared}, compare=False)
    assert text is not None and "count job 2" in text
