"""The answer's text under its understood-as line: what that line and the chart already say is
not said again."""

from __future__ import annotations

from oda_analyst.webui.answers import brief, view
from oda_analyst.webui.pages import chat

UNDERSTOOD = (
    "Readings of gpu 0 utilisation (%) for nodes 900 and 920, 1 Jun 2022 08:00 to 15:00 UTC."
)
CHART = "GPU 0 utilisation for nodes 900 and 920, 1 Jun 2022 08:00 to 15:00 UTC"
SUMMARY = f"{UNDERSTOOD.rstrip('.')}: 2,520 rows. Chart: {CHART}."


def test_the_understood_sentence_and_the_chart_title_are_not_repeated() -> None:
    assert brief(SUMMARY, UNDERSTOOD, [CHART]) == "2,520 rows."


def test_a_question_in_lower_case_reads_as_a_sentence() -> None:
    asked = "which metric do you mean by 'temperature'?"
    assert brief(asked, None, []) == "Which metric do you mean by 'temperature'?"


def test_other_summaries_are_kept_whole() -> None:
    assert brief("Node 900 was the hottest at 31.2 °C.", UNDERSTOOD, []) == (
        "Node 900 was the hottest at 31.2 °C."
    )
    # The chart's title is only dropped when that chart is on the page.
    assert brief(SUMMARY, UNDERSTOOD, []) == f"2,520 rows. Chart: {CHART}."
    assert brief(SUMMARY, None, [CHART]) == f"{UNDERSTOOD.rstrip('.')}: 2,520 rows."
    # Nothing left would be worse than a repeat.
    assert brief(f"{UNDERSTOOD.rstrip('.')}:", UNDERSTOOD, []) == f"{UNDERSTOOD.rstrip('.')}:"


def test_view_carries_the_brief_and_keeps_the_summary() -> None:
    shown = view(
        {
            "status": "completed",
            "summary": SUMMARY,
            "understood_as": UNDERSTOOD,
            "artifacts": [
                {"path": "/srv/a/chart1-line.png", "media_type": "image/png", "title": CHART},
                {"path": "/srv/a/r.csv", "media_type": "text/csv", "title": UNDERSTOOD},
            ],
            "trace": "/srv/traces/" + "0f" * 16 + ".json",
        }
    )
    assert shown["brief"] == "2,520 rows."
    assert shown["summary"] == SUMMARY
    assert shown["trace_id"] == "0f" * 16


def test_only_an_empty_conversation_says_what_to_ask() -> None:
    empty = chat("alice", [], None, [])
    assert "class='empty'" in empty and "SPARQL" in empty
    busy = chat("alice", [], None, [{"id": "m", "role": "user", "text": "q"}])
    assert "class='empty'" not in busy
