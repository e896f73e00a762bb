"""A job state in the question is used by the plan, or the question is refused.

Found on the sixth blind set: "nodes hit by node_fail jobs yesterday" completed with Slurm's
count of down nodes, because the words 'node_fail' were claimed as a job-state span whether or
not any plan filtered jobs by state. Now only a plan with a state filter claims them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

AS_OF = datetime(2022, 6, 2, 9, tzinfo=UTC)


def test_a_job_state_is_used_by_the_plan_or_the_question_is_refused(retriever: Any) -> None:
    # 'NODE_FAIL' names jobs now: a word the rules do not read is what gets quoted back, and
    # Slurm's count of down nodes never answers it
    answer = retriever.query("nodes affected by NODE_FAIL jobs yesterday", as_of=AS_OF)
    assert answer.status == "rejected", answer.understood_as
    assert "'affected'" in answer.answer


def test_the_nodes_of_jobs_in_a_state_are_nodes(retriever: Any) -> None:
    # it listed the jobs themselves (one row per job) for a question that asks for nodes
    answer = retriever.query("nodes of NODE_FAIL jobs yesterday", as_of=AS_OF)
    assert answer.status == "completed", answer.answer
    assert "NODE_FAIL" in answer.understood_as and "per node" in answer.understood_as
    assert answer.columns[0] == "node_id" and answer.rows


def test_a_job_state_a_plan_filters_by_completes(retriever: Any) -> None:
    answer = retriever.query("how many jobs ended in NODE_FAIL yesterday", as_of=AS_OF)
    assert answer.status == "completed", answer.answer
    assert "NODE_FAIL" in answer.understood_as
