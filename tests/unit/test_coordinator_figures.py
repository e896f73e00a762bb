"""The figures an analysis answer states in words (pure: from rows and recipe JSON)."""

from __future__ import annotations

from oda_analyst.coordinator.figures import fmt, recipe_sentence, table_sentence


def test_numbers_are_rounded_for_a_person() -> None:
    assert [fmt(v) for v in (1018.4715277, 345500.0, 882.44, 41.25, 0.83123, -3.5)] == [
        "1,018", "345,500", "882.4", "41.25", "0.8312", "-3.5",
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


def test_a_keyed_table_is_stated_with_its_ends_and_a_long_one_by_its_ends() -> None:
    small = {"columns": ["user_id", "sum_cpu_hours", "count_job"], "unit": None,
             "rows": [[25000, 345500.13, 800], [28919, 188977.5, 394],
                      [7, 36960.2, 20]]}  # fmt: skip
    assert table_sentence(small, compare=False) == (
        "User 25000: sum cpu hours 345,500 h, count job 800; user 28919: sum cpu hours 188,978 h, "
        "count job 394; user 7: sum cpu hours 36,960 h, count job 20. Total over the 3 users: "
        "sum cpu hours 571,438 h, count job 1,214. Highest sum cpu hours: user 25000 "
        "(345,500 h); lowest: user 7 (36,960 h)."
    )
    pair = {"columns": ["rack_id", "avg_value"], "unit": "W", "rows": [[3, 452.3], [39, 1338.3]]}
    assert table_sentence(pair, compare=True) == (
        "Rack 3: avg 452.3 W; rack 39: avg 1,338 W. Rack 39 is higher (avg 1,338 W against "
        "452.3 W: +886 W, +195.9 %)."
    )
    hours = {"columns": ["hour", "avg_value"], "unit": "kW",
             "rows": [[f"2022-06-01T{h:02d}:00:00Z", 800.0 + (h == 9) * 62.7 - (h == 3) * 40]
                      for h in range(24)]}  # fmt: skip
    text = table_sentence(hours, compare=False)
    assert text is not None and text.startswith("24 groups; the highest and lowest three by avg")
    assert "2022-06-01 09:00 UTC: avg 862.7 kW" in text and "03:00 UTC: avg 760 kW" in text
    readings = {"columns": ["node_id", "timestamp", "value"], "rows": [[1, "t", 2.0]] * 3}
    assert table_sentence(readings, compare=False) is None  # a series is the recipe's to state


def test_a_scatter_states_both_coefficients_and_n() -> None:
    text = recipe_sentence({"pearson": 0.8312, "spearman": 0.79, "n": 240,
                            "grid": "1-minute means", "x": "GPU 0 utilisation",
                            "y": "GPU 0 power"}, compare=False)  # fmt: skip
    assert text == ("Correlation of GPU 0 power with GPU 0 utilisation: Pearson r = 0.83, "
                    "Spearman \u03c1 = 0.79, over 240 paired 1-minute means.")  # fmt: skip
