"""SoTA#1's strict timestamps read by our parser: '[start] to [end]' is one window.

Found by bench/evaluate.py: our analyst read "from [2022-06-01 00:00:00] to [2022-06-01
00:30:00]" as two instants and completed with two nearest readings — an answer to another
question (classed hallucinated)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.rules.timeparse import parse_time

AS_OF = datetime(2022, 6, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:30:00]",
        "power of node 900 from (2022-06-01 00:00:00) to (2022-06-01 00:30:00)",
        "power of node 900 from [2022-06-01 00:00:00]-[2022-06-01 00:30:00]",
        "power of node 900 from 2022-06-01 00:00:00 to 2022-06-01 00:30:00",
    ],
)
def test_bracketed_ends_make_one_window(text: str) -> None:
    parsed = parse_time(text, as_of=AS_OF)
    assert [(w.start, w.end) for w in parsed.windows] == [
        (datetime(2022, 6, 1, 0, 0, tzinfo=UTC), datetime(2022, 6, 1, 0, 30, tzinfo=UTC))
    ]
