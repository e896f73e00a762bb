"""The rule planner: the Appendix-A request shapes become task lists; anything else is asked.

The planner takes the Reading (``oda_analyst.reading``), so these tests read each question with
the real reader first."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from oda_analyst.coordinator.planner import Decomposition, Unclear, decompose, resolve
from oda_analyst.errors import OntologyError
from oda_analyst.reading.model import ChartKind, Reading
from oda_analyst.reading.read import read
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.vocabulary import load_vocabulary

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = {
    q["id"]: q["question"]
    for q in yaml.safe_load((REPO / "ontology/examples/paper_plans.yaml").read_text())["questions"]
}
VOCAB = load_vocabulary(REPO / "ontology" / "analysis.yaml")
AS_OF = datetime(2022, 6, 15, tzinfo=UTC)


def _read(question: str) -> Reading:
    return read(question, AS_OF, vocab=VOCAB)


def chart_kind(text: str) -> ChartKind | None:
    charts = _read(text).analysis.charts
    return charts[0].kind if charts else None


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
    found = decompose(_read(QUESTIONS[qid]))
    assert isinstance(found, Decomposition)
    charts, reports = EXPECTED[qid]
    assert tuple(c.kind for c in found.charts) == charts
    assert found.reports == reports
    assert found.retrieval == " ".join(QUESTIONS[qid].split())  # the retriever reads it all
    assert found.tasks[0].startswith("retrieve: ")
    assert len(found.tasks) == 1 + len(charts) + len(reports)


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("inlet temp of node 17 on 1 june 2022 08:00-09:00, pie chart", ("pie",)),
        ("ambient of nodes 301 and 318 1 june 2022 8-15h as a box plot", ("box",)),
        ("power of node 900 on 1 June 2022 plus a histogram", ("histogram",)),
        ("gpu0 util node 900 1 june 2022 line graph pls", ("line",)),
        ("scatter of gpu0 power vs gpu0 util on node 900 on 1 june 2022", ("scatter",)),
        ("node 900 power 1 june 2022, histogram and a box plot", ("histogram", "box")),
    ],
)
def test_a_chart_named_anywhere_is_a_chart(question: str, kinds: tuple[str, ...]) -> None:
    found = decompose(_read(question))
    assert isinstance(found, Decomposition)
    assert tuple(c.kind for c in found.charts) == kinds


def test_report_clauses_are_kept_and_the_retriever_never_sees_a_chart() -> None:
    reading = _read(QUESTIONS["Q9"])
    found = decompose(reading)
    assert isinstance(found, Decomposition)
    assert found.reports == ("report min/max/avg power",)
    assert "report min/max/avg power" in reading.retrieval_text()
    questions = [QUESTIONS[q] for q in ("Q2", "Q9", "Q12", "Q14")] + [
        "gpu0 util node 900 1 june 2022 08:00-09:00, line graph pls",
        "scatter of gpu0 power vs gpu0 util on node 900 on 1 june 2022",
    ]
    for question in questions:
        reading = _read(question)
        text = reading.retrieval_text()
        # what the retriever's stage 1 reads: the text before its analysis tail
        core = text[: chunk(text, extract_entities(text)).core_end]
        for chart in reading.analysis.charts:
            for part in chart.parts:
                assert not core[part.start : part.end].strip(), (question, part.text)


def test_power_draw_is_no_chart() -> None:
    assert decompose(_read("power draw of node 5 on 1 June 2022")) == Decomposition(
        question="power draw of node 5 on 1 June 2022",
        retrieval="power draw of node 5 on 1 June 2022",
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
    found = decompose(_read(question))
    assert isinstance(found, Unclear)
    assert found.field == "analysis"
    assert found.clause in found.message
    assert {c["text"] for c in found.candidates} >= {"line", "histogram", "bar"}


def test_the_answer_to_a_chart_question_resumes_the_plan() -> None:
    asked = decompose(_read("Retrieve the power of node 900 on 1 June 2022 and visualise it"))
    assert isinstance(asked, Unclear)
    for answer, kind in (("histogram", "histogram"), ("a bar chart", "bar"), ("7", "line")):
        found = resolve(asked, answer, chart_kind)
        assert isinstance(found, Decomposition), answer
        assert [c.kind for c in found.charts] == [kind]
    again = resolve(asked, "something pretty", chart_kind)
    assert isinstance(again, Unclear) and "something pretty" in again.message


def test_a_retrieval_alone_has_no_analysis_tasks() -> None:
    found = decompose(_read("What was the average inlet temperature of node 900 on 1 June 2022?"))
    assert isinstance(found, Decomposition)
    assert found.charts == () and found.reports == ()


def test_a_request_that_starts_with_the_chart() -> None:
    found = decompose(_read("Plot the total power of node 900 on 1 June 2022"))
    assert isinstance(found, Decomposition)
    assert [c.kind for c in found.charts] == ["line"]


def test_specific_chart_words_win_over_plot() -> None:
    assert chart_kind("create a dual-axis plot over time") == "dual_axis"
    assert chart_kind("create a box plot of the users") == "box"
    assert chart_kind("plot the time series") == "line"
    assert chart_kind("make a table") is None


def test_a_broken_vocabulary_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "analysis.yaml"
    bad.write_text(
        "charts: {spiral: [spiral]}\nunspecified: []\nstatistics: {}\n"
        "report_verbs: []\ncomparison: []\ncomparatives: []\n"
    )
    with pytest.raises(OntologyError, match="spiral"):
        load_vocabulary(bad)
    (tmp_path / "missing.yaml").unlink(missing_ok=True)
    with pytest.raises(OntologyError, match=r"missing\.yaml"):
        load_vocabulary(tmp_path / "missing.yaml")


def test_a_correlation_or_rolling_mean_asked_without_a_chart_gets_the_chart_it_needs() -> None:
    """Nothing asked is dropped: a correlation is computed on a scatter's pairs and a rolling
    mean is drawn as a line, so asked alone they bring that chart."""
    found = decompose(_read("correlation between gpu0 power and gpu0 utilisation on node 900 "
                            "on 1 june 2022 from 08:00 to 12:00"))  # fmt: skip
    assert isinstance(found, Decomposition)
    assert [(c.kind, c.clause) for c in found.charts] == [("scatter", "correlation")]
    rolled = decompose(_read("10-min rolling mean of node 512 power on 1 june 2022 09:00-11:00"))
    assert isinstance(rolled, Decomposition)
    assert [c.kind for c in rolled.charts] == ["line"] and rolled.figures == ("rolling:10",)
    drawn = decompose(_read("30 min rolling average of PUE on june 1 line graph pls"))
    assert isinstance(drawn, Decomposition)
    assert [c.kind for c in drawn.charts] == ["line"] and drawn.figures == ("rolling:30",)
    # the window stated in one of several rolling words (it drew a 60-minute mean, silently)
    smoothed = decompose(_read("smooth the site's ICT power on june 1 with a 30 min rolling "
                               "avg, line chart, and tell me the lowest point of the smoothed "
                               "line"))  # fmt: skip
    assert isinstance(smoothed, Decomposition) and smoothed.figures[0] == "rolling:30"
