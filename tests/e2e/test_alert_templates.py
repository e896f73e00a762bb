"""Every question the shipped alert templates ask, as an alert would fill it, is understood and
answered by the retriever on the `sample` lake — with the node, job or rack and the window the
alert gave — and, where the dev set's oracle can express it, with the right figures. A template
the analyst cannot read would start analyses that only ever fail; this catches it when either
the templates or the understanding change."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import retrieval_eval
from oda_analyst.controller.alerts import Webhook, load_templates, plan

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "charts" / "oda-analyst" / "files" / "alert-templates.yaml"
# 08:30 start, ended 09:00: with each template's look-back the window opens 07:30 (60 min) or
# 08:00 (30 min), all on 1 June 2022, which the sample lake holds.
STARTS, ENDS = "2022-06-01T08:30:00Z", "2022-06-01T09:00:00Z"
LATER = datetime(2022, 6, 15, tzinfo=UTC)


def _window(minutes: int) -> list[str]:
    return [f"2022-06-01T{'07:30' if minutes == 60 else '08:00'}", "2022-06-01T09:00"]


# (alert name, labels, the expectation in the dev set's terms or None, words understood_as shows)
CASES: list[tuple[str, dict[str, str], dict[str, Any] | None, list[str]]] = [
    ("NodeHighInletTemperature", {"node": "900"},
     {"kind": "readings", "metrics": ["ipmi/ambient"], "nodes": [900], "window": _window(60)},
     ["inlet temperature", "node 900", "07:30 to 09:00"]),
    ("NodeHighInletTemperature", {"rack": "5"}, None, ["inlet temperature", "rack 5"]),
    ("NodePowerSpike", {"node": "901"},
     {"kind": "readings", "metrics": ["ipmi/total_power"], "nodes": [901],
      "window": _window(30)},
     ["node power", "node 901", "08:00 to 09:00"]),
    ("NodePowerSpike", {"slurm_job_id": "1006295"}, None, ["node power", "job 1006295"]),
    ("NodePowerSpike", {"rack": "5"}, None, ["node power", "rack 5"]),
    ("GPUStuckAtZero", {"node": "900"}, None, ["GPU 0 utilisation", "node 900"]),
    ("GPUStuckAtZero", {"job_id": "1006295"}, None, ["GPU 0 utilisation", "job 1006295"]),
    ("JobFailureBurst", {},
     # a burst of failures: the jobs that ended FAILED in the window (the job-state convention)
     {"kind": "job_list", "event": "end", "filters": {"states": ["FAILED"]},
      "window": _window(60)},
     ["FAILED", "07:30 to 09:00"]),
]  # fmt: skip


def _question(alertname: str, labels: dict[str, str]) -> tuple[str, datetime]:
    alert = {"status": "firing", "labels": {"alertname": alertname, **labels},
             "startsAt": STARTS, "endsAt": ENDS, "fingerprint": "f" * 16}  # fmt: skip
    (p,) = plan(Webhook.model_validate({"alerts": [alert]}), load_templates(TEMPLATES),
                namespace="ops", user="am", now=LATER)  # fmt: skip
    assert p.query is not None, p.skipped
    spec = p.query["spec"]
    return spec["question"], datetime.fromisoformat(spec["referenceTime"].replace("Z", "+00:00"))


def test_every_shipped_template_question_is_asked_here() -> None:
    """Each template question (told apart by its text before the first placeholder) is the
    one some case below gets; the all-nodes fallback reads ~10^5 readings and is left out."""
    shipped = load_templates(TEMPLATES).templates
    asked = [(name, _question(name, labels)[0]) for name, labels, _, _ in CASES]

    def covered(name: str, q: str) -> bool:
        return any(n == name and a.startswith(q.split("{", maxsplit=1)[0]) for n, a in asked)

    missing = [(name, q) for name, t in shipped.items() for q in t.questions
               if "all nodes" not in q and not covered(name, q)]  # fmt: skip
    assert not missing, f"template questions no case here asks: {missing}"


@pytest.mark.parametrize(("alertname", "labels", "expect", "words"), CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1])or 'none'}" for c in CASES])  # fmt: skip
def test_template_question_is_answered(retriever: Any, sample_lake: Path, job_table: Any,
                                       alertname: str, labels: dict[str, str],
                                       expect: dict[str, Any] | None,
                                       words: list[str]) -> None:  # fmt: skip
    question, as_of = _question(alertname, labels)
    answer = retriever.query(question, as_of=as_of)
    assert answer.status == "completed", f"{question}: {answer.answer[:300]}"
    for word in words:
        assert word in (answer.understood_as or ""), (question, answer.understood_as)
    assert answer.row_count, f"{question}: no rows ({answer.answer[:200]})"
    if expect is not None:
        verdict = retrieval_eval.check_answer(answer, expect, sample_lake, job_table)
        assert verdict.ok, f"{question}: {verdict.reason}"
