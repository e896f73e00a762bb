"""'show me node 12' asks what about node 12, and the answer completes the question.

Found on the sixth blind set: it completed with `count_node = 1` (the number of nodes it named),
a number that answers nothing the user asked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

AS_OF = datetime(2022, 6, 2, 9, tzinfo=UTC)


def test_a_bare_node_is_a_clarification_and_its_answer_completes_the_question(
    retriever: Any,
) -> None:
    asked = retriever.query("show me node 12", as_of=AS_OF)
    assert asked.status == "clarification"
    assert "node 12" in asked.answer
    answered = retriever.clarify(asked.request_id, "inlet temperature yesterday")
    assert answered.status == "completed", answered.answer
    assert answered.understood_as.startswith("Readings of inlet temperature (°C) for node 12")
    assert "1 Jun 2022 00:00 to 2 Jun 2022 00:00 UTC" in answered.understood_as


def test_counting_and_locating_named_nodes_still_answer(retriever: Any) -> None:
    assert retriever.query("what rack is node 245 in", as_of=AS_OF).status == "completed"
    assert retriever.query("how many nodes are in rack 3", as_of=AS_OF).status == "completed"


def test_a_bare_rack_is_a_clarification_and_its_answer_completes_the_question(
    retriever: Any,
) -> None:
    # blind7 T65: 'what about rack 12' completed with count_node = 20
    asked = retriever.query("what about rack 12", as_of=AS_OF)
    assert asked.status == "clarification"
    assert "rack 12" in asked.answer
    answered = retriever.clarify(asked.request_id, "average node power yesterday")
    assert answered.status == "completed", answered.answer
    assert "rack 12" in answered.understood_as
    assert "1 Jun 2022 00:00 to 2 Jun 2022 00:00 UTC" in answered.understood_as


def test_a_window_alone_is_a_clarification_whose_answer_keeps_the_window(retriever: Any) -> None:
    # blind8 U74: 'give me the numbers for yesterday' was refused as naming no metric
    asked = retriever.query("give me the numbers for yesterday", as_of=AS_OF)
    assert asked.status == "clarification"
    answered = retriever.clarify(asked.request_id, "average node power of node 12")
    assert answered.status == "completed", answered.answer
    assert "1 Jun 2022 00:00 to 2 Jun 2022 00:00 UTC" in answered.understood_as
