"""The rule planner: the Appendix-A request shapes become task lists; anything else is asked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oda_analyst.coordinator.planner import Decomposition, Unclear, chart_kind, decompose, resolve
from oda_analyst.coordinator.vocabulary import load_vocabulary
from oda_analyst.errors import OntologyError

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = {
    q["id"]: q["question"]
    for q in yaml.safe_load((REPO / "ontology/examples/paper_plans.yaml").read_text())["questions"]
}
VOCAB = load_vocabulary(REPO / "ontology" / "analysis.yaml")

EXPECTED = {
    "Q1": ((), ()),
    "Q2": (("line",), ()),
    "Q3": (("line",), ()),
    "Q4": (("histogram",), ()),
    "Q5": (("line",), ()),
    "Q6": (("dual_axis",), ()),
    "Q7": (("bar",), ()),
    "Q8": (("pie",), ()),
    "Q9": (("line",), ("report min/max/avg power",)),
    "Q10": (("bar",), ()),
    "Q11": (("dual_axis",), ()),
    "Q12": (("line",), ()),
    "Q13": (("heatmap",), ()),
    "Q14": (("box",), ()),
}


@pytest.mark.parametrize("qid", sorted(EXPECTED))
def test_appendix_a_shapes(qid: str) -> None:
    found = decompose(QUESTIONS[qid], VOCAB)
    assert isinstance(found, Decomposition)
    charts, reports = EXPECTED[qid]
    assert tuple(c.kind for c in found.charts) == charts
    assert found.reports == reports
    assert found.retrieval == " ".join(QUESTIONS[qid].split())  # the retriever reads it all
    assert found.tasks[0].startswith("retrieve: ")
    assert len(found.tasks) == 1 + len(charts) + len(reports)


def test_refined_request_drops_chart_clauses_and_keeps_reports() -> None:
    found = decompose(QUESTIONS["Q9"], VOCAB)
    assert isinstance(found, Decomposition)
    assert found.refined == (
        "For the top-3 longest single-node jobs on 1 June 2022, retrieve their power "
        "consumption, and report min/max/avg power."
    )
    q2 = decompose(QUESTIONS["Q2"], VOCAB)
    assert isinstance(q2, Decomposition)
    assert q2.refined == (
        "Retrieve the total power consumption for node 900 from 1 June 2022 20:00 to 23:59."
    )


@pytest.mark.parametrize(
    "question",
    [
        "Retrieve the power of node 900 on 1 June 2022 and visualise it",
        "Retrieve power of node 9 on 1 June 2022 and create a sankey diagram",
        "Get the inlet temperature of node 3 on 1 June 2022, then draw something nice",
    ],
)
def test_a_clause_that_names_no_chart_is_asked_about(question: str) -> None:
    found = decompose(question, VOCAB)
    assert isinstance(found, Unclear)
    assert found.field == "analysis"
    assert found.clause in found.message
    assert {c["text"] for c in found.candidates} >= {"line", "histogram", "bar"}


def test_the_answer_to_a_chart_question_resumes_the_plan() -> None:
    asked = decompose("Retrieve the power of node 900 on 1 June 2022 and visualise it", VOCAB)
    assert isinstance(asked, Unclear)
    for answer, kind in (("histogram", "histogram"), ("a bar chart", "bar"), ("7", "line")):
        found = resolve(asked, answer, VOCAB)
        assert isinstance(found, Decomposition), answer
        assert [c.kind for c in found.charts] == [kind]
    again = resolve(asked, "something pretty", VOCAB)
    assert isinstance(again, Unclear) and "something pretty" in again.message


def test_a_retrieval_alone_has_no_analysis_tasks() -> None:
    found = decompose("What was the average inlet temperature of node 900 on 1 June 2022?", VOCAB)
    assert isinstance(found, Decomposition)
    assert found.charts == () and found.reports == ()


def test_a_request_that_starts_with_the_chart() -> None:
    found = decompose("Plot the total power of node 900 on 1 June 2022", VOCAB)
    assert isinstance(found, Decomposition)
    assert [c.kind for c in found.charts] == ["line"]
    assert found.refined == found.retrieval


def test_specific_chart_words_win_over_plot() -> None:
    assert chart_kind("create a dual-axis plot over time", VOCAB) == "dual_axis"
    assert chart_kind("create a box plot of the users", VOCAB) == "box"
    assert chart_kind("plot the time series", VOCAB) == "line"
    assert chart_kind("make a table", VOCAB) is None


def test_a_broken_vocabulary_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "analysis.yaml"
    bad.write_text("verbs: [plot]\ncharts: {spiral: [spiral]}\nreports: []\n")
    with pytest.raises(OntologyError, match="spiral"):
        load_vocabulary(bad)
    (tmp_path / "missing.yaml").unlink(missing_ok=True)
    with pytest.raises(OntologyError, match=r"missing\.yaml"):
        load_vocabulary(tmp_path / "missing.yaml")
