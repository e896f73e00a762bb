"""The 'Reported:' line of an answer that asked to report statistics ('report min/max/avg')."""

from __future__ import annotations

from oda_analyst.coordinator.summary import MAX_REPORTED_ROWS, report_lines


def test_each_row_is_reported_with_its_figures_as_every_other_figure_is_stated() -> None:
    result = {"columns": ["node_id", "min_value", "max_value", "avg_value", "cv_value"],
              "unit": "W", "rows": [[408, 275.1, 287.640015, 281.25, 0.0123],
                                    [12, 1_600_000.0, 1_700_000.0, 1_650_000.0, 0.02]]}  # fmt: skip
    assert report_lines(result) == [
        # '.4g' wrote 287.6 for a peak reading of 287.64 and '1.6e+06' for 1.6 million
        "node 408: min 275.1 W, max 287.64 W, avg 281.25 W, cv 0.0123",
        "node 12: min 1,600,000 W, max 1,700,000 W, avg 1,650,000 W, cv 0.02",
    ]


def test_a_table_too_long_to_read_or_without_statistics_is_not_reported() -> None:
    many = {"columns": ["node_id", "avg_value"], "unit": "W",
            "rows": [[i, 1.0] for i in range(MAX_REPORTED_ROWS + 1)]}  # fmt: skip
    assert report_lines(many) == []
    readings = {"columns": ["node_id", "timestamp", "value"], "rows": [[1, "t", 2.0]]}
    assert report_lines(readings) == []
