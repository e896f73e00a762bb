"""The retrieval dev set (bench/devset/questions.yaml), every question, against the oracle.

Known product defects are strict xfails with their reason, so a fix shows up as an XPASS that
fails the run until the entry is removed. `bench/retrieval_eval.py` prints the same evaluation
as a table with the pass rate per category.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import retrieval_eval

DEV_ITEMS = retrieval_eval.load_items(paper=False)

KNOWN_BUGS: dict[str, str] = {}


def _param(item: retrieval_eval.Item) -> Any:
    if item.id in KNOWN_BUGS:
        return pytest.param(
            item, id=item.id, marks=pytest.mark.xfail(reason=KNOWN_BUGS[item.id], strict=True)
        )
    return pytest.param(item, id=item.id)


def test_devset_is_large_and_varied() -> None:
    assert len(DEV_ITEMS) >= 60
    cats = {i.category for i in DEV_ITEMS}
    assert {"anomaly detection", "GPU utilisation", "job failure", "power", "thermal"} <= cats
    assert len({i.id for i in DEV_ITEMS}) == len(DEV_ITEMS)


@pytest.mark.parametrize("item", [_param(i) for i in DEV_ITEMS])
def test_devset_question(item: retrieval_eval.Item, retriever: Any, sample_lake: Path,
                         job_table: pl.DataFrame) -> None:  # fmt: skip
    outcome = retrieval_eval.run_item(retriever, item, sample_lake, job_table)
    assert outcome.ok, f"{item.id} [{outcome.status}]: {outcome.reason}"
