"""``understood_as`` round-trips: asking the sentence again gives the same plans, for every
question of the dev, paper and held-out sets that stage 1 plans.

Stage 1 runs for real (rules, parser, embeddings); no lake is needed. The questions whose
sentence does not round-trip yet are listed, each with the reason, as known failures
(STYLE: a known failure is named, not skipped silently); a listed one that starts to pass
fails the test too, so the list only shrinks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from fixtures_embeddings import shared_cache_dir
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import load_paper_plans
from oda_analyst.reading.read import read
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1
from oda_analyst.retriever.understood import sentence

DEVSET = Path(__file__).resolve().parents[2] / "bench" / "devset"
SETS = ("questions.yaml", "heldout.yaml", "heldout2.yaml", "heldout3.yaml", "blind4.yaml")
KNOWN = {
    # two plans in one sentence: the second plan's words are read as the first's
    "paper/Q9": "two plans joined by 'then'",
    "paper/Q14": "two plans joined by 'then'",
    "questions.yaml/Q9": "two plans joined by 'then'",
    "questions.yaml/Q14": "two plans joined by 'then'",
    # the metric's only unique synonym says 'legacy', which the grounding does not read
    "questions.yaml/F06": "legacy cluster cpu utilisation",
    # 'hourly mean' reads back as the average per hour (the same numbers for one series)
    "heldout.yaml/H40": "hourly mean vs average per hour",
}


def _questions() -> list[tuple[str, str, datetime]]:
    out = [(f"paper/{q.id}", q.question, datetime(2022, 6, 15, tzinfo=UTC))
           for q in load_paper_plans()]  # fmt: skip
    for name in SETS:
        data = yaml.safe_load((DEVSET / name).read_text())
        default = data["default_as_of"]
        for q in data["questions"]:
            as_of = datetime.fromisoformat(str(q.get("as_of") or default).replace("Z", "+00:00"))
            out.append((f"{name}/{q['id']}", q["text"], as_of))
    return out


QUESTIONS = _questions()


@pytest.fixture(scope="module", autouse=True)
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None


def _said(outcome: Ready) -> str:
    instants = outcome.instants or (None,) * len(outcome.plans)
    return "; then ".join(sentence(p, instant=i) for p, i in zip(outcome.plans, instants,
                                                                strict=True)) + "."  # fmt: skip


@pytest.mark.parametrize(("qid", "text", "as_of"), QUESTIONS, ids=[q[0] for q in QUESTIONS])
def test_understood_as_round_trips(qid: str, text: str, as_of: datetime) -> None:
    first = run_stage1(read(text, as_of)).outcome
    if not isinstance(first, Ready):
        pytest.skip("stage 1 does not plan this question (a clarification or a refusal)")
    said = _said(first)
    again = run_stage1(read(said, as_of)).outcome
    same = (isinstance(again, Ready) and again.plans == first.plans
            and again.instants == first.instants)  # fmt: skip
    if qid in KNOWN:
        assert not same, f"{qid} round-trips now: remove it from KNOWN ({KNOWN[qid]})"
        return
    assert same, f"{said!r} was understood as {again}"
