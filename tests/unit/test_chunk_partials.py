"""Chunked max/min/sum merge across every chunk, not the last one.

Found by bench/evaluate.py on the blind set: "top 5 nodes by peak pcie temperature on 1 June"
ran in 3 time chunks and reported each node's maximum of the last chunk (node 77: 57.4 °C, its
day peak 58.2 °C), because a max partial carried no count and a partial of count 0 is taken
for an empty chunk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from oda_analyst.ontology.plan import parse_plan
from oda_analyst.sparql.chunks import PartialTable, plan_chunks

START = datetime(2022, 6, 1, tzinfo=UTC)


@pytest.mark.parametrize(("fn", "want"), [("max", 58.2), ("min", 40.0), ("sum", 294.6)])
def test_every_chunk_counts(fn: str, want: float) -> None:
    plan = parse_plan({
        "target": "readings", "metrics": [{"plugin": "ipmi", "metric": "pcie"}],
        "entities": [{"kind": "node", "all": True}], "group_by": ["node"],
        "aggregations": [{"fn": fn, "of": "value"}],
        "window": {"start": START.isoformat(), "end": (START + timedelta(days=1)).isoformat()},
    })  # fmt: skip
    chunking = plan_chunks(plan, max_span=timedelta(hours=12))
    assert chunking.mode == "partials" and len(chunking.windows) == 2
    chunk = chunking.chunk_plan(chunking.windows[0])
    assert "count" in {a.fn for a in chunk.aggregations}  # every partial says how many
    col = f"{fn}_value"
    table = PartialTable(plan)
    # chunk 1 holds the peak and the low; chunk 2 neither (its values: 57.4 and 61.0 in sum)
    first = {"max": 58.2, "min": 40.0, "sum": 176.2}[fn]
    last = {"max": 57.4, "min": 57.4, "sum": 118.4}[fn]
    table.add(["node_id", "count_value", col], [[77, 3, first]])
    table.add(["node_id", "count_value", col], [[77, 2, last]])
    _, rows = table.rows()
    assert rows == [[77, pytest.approx(want)]]
