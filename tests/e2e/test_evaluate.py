"""bench/evaluate.py end to end on a generated lake: three backends, a small set of our own
questions (one each backend should get right, one SoTA#1 cannot read, one nobody may answer),
the tables, the JSON record, the PNG and the summary line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from baseline_lake import write_baseline_lake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import evaluate

SET = """\
version: 1
default_as_of: "2022-06-15T00:00:00Z"
questions:
  - id: P1
    category: power
    text: total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:30:00]
    expect: {kind: readings, metrics: [ipmi/total_power], nodes: [900],
             window: ["2022-06-01T00:00", "2022-06-01T00:30"]}
  - id: P2
    category: power
    text: Retrieve the total power consumption for node 901 on 1 June 2022 from 00:00 to 00:30
    expect: {kind: readings, metrics: [ipmi/total_power], nodes: [901],
             window: ["2022-06-01T00:00", "2022-06-01T00:30"]}
  - id: P3
    category: refusal
    text: What is the flux capacitor charge of node 900 on 1 June 2022 from 00:00 to 00:30?
    expect: {status: rejected}
"""
LAST = re.compile(
    r"^evaluate: set=retrieval nsa=(\d+)/3 sota1=(\d+)/3 sota2=(\d+)/3 "
    r"nsa_hallucinated=(\d+)$"
)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


def test_evaluate_prints_the_tables_and_the_summary(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "set.yaml"
    questions.write_text(SET)
    out = tmp_path / "eval.json"
    code = evaluate.main(
        [
            "--set",
            "retrieval",
            "--questions",
            str(questions),
            "--lake",
            str(lake),
            "--data-dir",
            str(tmp_path / "data"),
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    for title in ("TABLE I:", "TABLE II:", "TABLE III:"):
        assert any(line.startswith(title) for line in printed), title
    found = LAST.match(printed[-1])
    assert found, printed[-1]
    nsa, sota1, sota2, hallucinated = map(int, found.groups())
    assert hallucinated == 0
    record = json.loads(out.read_text())
    classes = {(r["backend"], r["id"]): r["class"] for r in record["rows"]}
    assert len(classes) == 9
    assert classes[("sota1", "P1")] == "correct"  # its own format
    assert classes[("sota1", "P2")] == "failed"  # '1 June 2022' is not [YYYY-MM-DD HH:MM:SS]
    assert classes[("sota2", "P2")] == "correct"  # name match: "total power"
    assert classes[("nsa", "P2")] == "correct"
    assert all(classes[(b, "P3")] in {"correct", "failed"} for b in ("nsa", "sota1", "sota2"))
    assert sota1 == sum(classes[("sota1", q)] == "correct" for q in ("P1", "P2", "P3"))
    assert nsa >= 2 and sota2 >= 1
    # Every answer not counted correct is explained, in the JSON and on one printed line each.
    for b in ("nsa", "sota1", "sota2"):
        wrong = {q for q in ("P1", "P2", "P3") if classes[(b, q)] != "correct"}
        assert {e["id"] for e in record["failures"][b]} == wrong
    (p2,) = [e for e in record["failures"]["sota1"] if e["id"] == "P2"]
    assert p2["class"] == "failed" and "[YYYY-MM-DD HH:MM:SS]" in p2["reason"]
    assert any(line.startswith("  P2     failed") and "[YYYY-MM-DD HH:MM:SS]" in line
               for line in printed)  # fmt: skip
    png = out.with_suffix(".png")
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    merged = evaluate.main(
        [
            "--set",
            "retrieval",
            "--questions",
            str(questions),
            "--merge",
            str(out),
            "--plot",
            str(tmp_path / "merged.png"),
        ]
    )
    again = capsys.readouterr().out.strip().splitlines()
    assert merged == 0 and again[-1] == printed[-1]  # the tables of a record, re-read
