"""The retrieval part of the paper's 14 questions (Appendix A), with no model, on the `sample` lake.

Each answer is compared with an independent Polars computation (``bench/devset/oracle.py``:
its docstring states the definitions and the comparison rules; the expectations are the
``paper:`` section of ``bench/devset/questions.yaml``). Also: vague phrasings are clarified, not
guessed; nonsense is rejected with a clear message; a clarification survives a restart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import retrieval_eval
from devset import oracle

PAPER_IDS = [f"Q{i}" for i in range(1, 15)]

# Known product bugs: strict xfails, so a fix turns them into failures to remove from here.
KNOWN_BUGS: dict[str, str] = {}


def _check(item: retrieval_eval.Item, answer: Any, lake: Path, table: pl.DataFrame) -> None:
    verdict = retrieval_eval.check_answer(answer, item.expect, lake, table)
    assert verdict.ok, f"{item.id}: {verdict.reason}"


@pytest.mark.parametrize(
    "qid",
    [
        pytest.param(q, marks=pytest.mark.xfail(reason=KNOWN_BUGS[q], strict=True))
        if q in KNOWN_BUGS
        else q
        for q in PAPER_IDS
        if q != "Q6"
    ],
)
def test_paper_question(qid: str, retriever: Any, items: dict[str, Any], sample_lake: Path,
                        job_table: pl.DataFrame) -> None:  # fmt: skip
    item = items[qid]
    answer = retriever.query(item.text, as_of=item.as_of)
    _check(item, answer, sample_lake, job_table)


def test_q6_clarifies_temperature_then_answers(retriever: Any, items: dict[str, Any],
                                               sample_lake: Path, job_table: pl.DataFrame
                                               ) -> None:  # fmt: skip
    """Designed behaviour: with no model, "temperature" names a kind of metric, so the retriever
    may ask which one; answering "ambient" resumes the request, and power is grounded too."""
    item = items["Q6"]
    answer = retriever.query(item.text, as_of=item.as_of)
    if answer.status == "clarification":
        assert answer.clarification.field == "metric"
        assert "ambient" in {c["metric"] for c in answer.clarification.candidates}
        answer = retriever.clarify(answer.request_id, "ambient")
    _check(item, answer, sample_lake, job_table)
    metrics = {m["metric"] for m in answer.results[0]["plan"]["metrics"]}
    assert metrics == {"ambient", "total_power"}


def test_vague_temperature_asks_with_candidates(retriever: Any) -> None:
    answer = retriever.query("the temperature of node 900 on 1 June 2022")
    assert answer.status == "clarification", answer.answer
    names = {c["metric"] for c in answer.clarification.candidates}
    assert "ambient" in names and len(names) > 1


def test_vague_power_of_big_nodes_asks_not_guesses(retriever: Any) -> None:
    answer = retriever.query("power of the big nodes on 1 June 2022")
    assert answer.status == "clarification", answer.answer
    assert answer.rows is None and not answer.results
    assert answer.clarification.question


def test_nonsense_metric_is_rejected_naming_the_phrase(retriever: Any) -> None:
    answer = retriever.query("the flux capacitor reading of node 900 on 1 June 2022")
    assert answer.status == "rejected"
    assert "flux capacitor" in answer.answer.lower()
    assert answer.error is not None and answer.error["hint"]


_ASK = """
import json, sys
from datetime import datetime
from oda_analyst.config import load_settings
from oda_analyst.retriever.service import Retriever
r = Retriever(load_settings())
if sys.argv[1] == "query":
    a = r.query(sys.argv[2], as_of=datetime.fromisoformat(sys.argv[3]))
else:
    a = r.clarify(sys.argv[2], sys.argv[3])
print(json.dumps(a.model_dump(mode="json")))
"""


def _process(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _ASK, *args], env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_clarification_survives_a_restart(sample_lake: Path, tmp_path: Path,
                                          job_table: pl.DataFrame) -> None:  # fmt: skip
    """One process asks and exits; a new process answers the clarification by request id."""
    env = {**os.environ, "ODA_LAKE": str(sample_lake), "ODA_DATA_DIR": str(tmp_path / "data")}
    env.pop("ODA_REDIS_URL", None)
    env.pop("ODA_LLM_BASE_URL", None)
    asked = _process(["query", "the temperature of node 900 on 1 June 2022 from 10:00 to 11:00",
                      "2022-06-15T00:00:00+00:00"], env)  # fmt: skip
    assert asked["status"] == "clarification", asked["answer"]
    done = _process(["clarify", asked["request_id"], "ambient"], env)
    assert done["status"] == "completed", done["answer"]
    expected = oracle.expected(
        {"kind": "readings", "metrics": ["ipmi/ambient"], "nodes": [900],
         "window": ["2022-06-01T10:00", "2022-06-01T11:00"]},
        sample_lake, job_table,
    )  # fmt: skip
    cols, rows = retrieval_eval.result_rows(done["results"][0])
    verdict = expected.check(cols, rows)
    assert verdict.ok, verdict.reason
