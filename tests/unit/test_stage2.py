"""Stage 2's chunking decision: a window is split only when its raw readings exceed the budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.retriever.stages.stage2 import Stage2
from oda_analyst.vkg.request import GroundedRequest


def _stage2(max_readings: int) -> Stage2:
    none: Any = None
    return Stage2(lake=none, store=none, cache=none, out_dir=Path("."), row_limit=10,
                  max_readings=max_readings)  # fmt: skip


def _request(days: int, **kw: Any) -> GroundedRequest:
    start = datetime(2022, 6, 1, tzinfo=UTC)
    return GroundedRequest(start=start, end=start + timedelta(days=days), **kw)


def test_small_windows_run_whole() -> None:
    req = _request(7, metrics=(("weather", "temp"),))  # 1,008 readings
    assert _stage2(2_000_000).chunk_span(req) is None


def test_large_windows_are_cut_to_the_budget() -> None:
    # all nodes, total_power every 20 s: 4,233,600 readings a day
    req = _request(2, all_nodes=True, metrics=(("ipmi", "total_power"),))
    span = _stage2(2_000_000).chunk_span(req)
    assert span is not None
    per_chunk = 980 * span.total_seconds() / 20
    assert per_chunk <= 2_000_000
    assert span >= timedelta(hours=1)


@pytest.mark.parametrize("nodes", [(900,), (900, 920)])
def test_estimate_scales_with_the_nodes(nodes: tuple[int, ...]) -> None:
    req = _request(30, nodes=nodes, metrics=(("ipmi", "total_power"),))
    budget = 100_000 * len(nodes)
    span = _stage2(budget).chunk_span(req)
    assert span is not None
    per_chunk = len(nodes) * span.total_seconds() / 20
    assert budget - len(nodes) / 20 <= per_chunk <= budget
