"""A comparison that names no statistic is made on the means, one per entity compared.

'which of nodes 12 and 13 drew more power' once came back as 360 raw readings with no winner,
'did node 900 use more gpu power than node 920' as readings with no word of the comparison, and
'was rack 3 hotter than rack 4' as one mean of both racks taken together. Each is now one mean
per entity (the oracle's, from the Parquet files), and the answer says which is higher.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import retrieval_eval
from oda_analyst import analyst
from oda_analyst.coordinator.service import Coordinator, CoordinatorAnswer
from oda_analyst.reading.read import read_now

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)
CASES = [
    ("which of nodes 12 and 13 drew more power on 1 june 2022 between 10 and 11",
     {"kind": "stats", "metrics": ["ipmi/total_power"], "nodes": [12, 13], "by": ["node"],
      "window": ["2022-06-01T10:00:00Z", "2022-06-01T11:00:00Z"], "fns": ["avg"]}),
    ("was rack 3 hotter than rack 4 on 1 june 2022 from 8 to 9 (inlet temp)",
     {"kind": "stats", "metrics": ["ipmi/ambient"], "nodes": list(range(60, 100)),
      "by": ["rack"], "window": ["2022-06-01T08:00:00Z", "2022-06-01T09:00:00Z"],
      "fns": ["avg"]}),
]  # fmt: skip


@pytest.fixture(scope="module")
def coordinator(coordinator_wiring: dict[str, Any]) -> Coordinator:
    return Coordinator(coordinator_wiring["settings"], retriever=coordinator_wiring["retriever"],
                       codeagent=coordinator_wiring["codeagent"], glossary=analyst.glossary(),
                       reader=read_now)  # fmt: skip


def _ask(coordinator: Coordinator, text: str, out: Path) -> CoordinatorAnswer:
    answer = asyncio.run(coordinator.ask(text, user="analyst", as_of=AS_OF, out_dir=out))
    assert answer.status == "completed", (answer.summary, answer.error)
    return answer


@pytest.mark.parametrize(("text", "expect"), CASES, ids=["nodes", "racks"])
def test_a_comparison_with_no_statistic_compares_the_means(
    text: str, expect: dict[str, Any], coordinator: Coordinator, sample_lake: Path,
    job_table: pl.DataFrame, tmp_path: Path,
) -> None:  # fmt: skip
    answer = _ask(coordinator, text, tmp_path)
    verdict = retrieval_eval.check_answer(answer, expect, sample_lake, job_table)
    assert verdict.ok, verdict.reason
    assert " is higher (" in answer.summary and "compared by its mean" in answer.summary


def test_more_than_a_named_node_is_a_comparison_stated(coordinator: Coordinator,
                                                      tmp_path: Path) -> None:  # fmt: skip
    answer = _ask(coordinator, "did node 900 use more gpu power than node 920 on 1 june 2022 "
                  "from 8 to 9", tmp_path)  # fmt: skip
    assert "Node 920 is higher" in answer.summary, answer.summary


def test_a_statistic_named_is_no_implied_mean(coordinator: Coordinator, tmp_path: Path) -> None:
    answer = _ask(coordinator, "which of nodes 12 and 13 had the higher peak power on 1 june "
                  "2022 between 10 and 11", tmp_path)  # fmt: skip
    assert "compared by its mean" not in answer.summary, answer.summary
