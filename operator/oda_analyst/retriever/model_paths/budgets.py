"""Token budgets of the model-backed stages: a prompt bound and a completion bound per stage.

``max_tokens`` goes on every request of the stage, so a runaway model (one that never closes its
JSON, or repeats itself until the context is full) costs a small, known amount: at ~30 tokens/s
on two CPU cores, the largest bound below is ~20 s. ``prompt_tokens`` is the most the stage's
prompt may take (reflection and repair turns included), measured on a real tokenizer by the
integration tests; a stage that outgrows it is a regression, not a model problem. The bounds
count what the server bills, its own preamble included (llama-cpp-python's
chatml-function-calling format adds ~550 tokens to every prompt).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageBudget:
    prompt_tokens: int
    """The most tokens the stage's prompt may take, every turn of its conversation included."""
    max_tokens: int
    """The completion bound sent with each of the stage's calls."""


STAGE_BUDGETS: dict[str, StageBudget] = {
    # {"windows": [{"start": ..., "end": ..., "text": ...}] x2, "status": ..., "message": ...}
    "time": StageBudget(prompt_tokens=2_400, max_tokens=200),
    # {"metric": true, "cardinality": "single", "confidence": 0.9}
    "intent": StageBudget(prompt_tokens=1_400, max_tokens=48),
    # {"subqueries": [a few copies of a question], "confidence": ...}
    "decompose": StageBudget(prompt_tokens=1_400, max_tokens=240),
    # {"plugin": "ipmi_pub", "confidence": 0.9}
    "plugin": StageBudget(prompt_tokens=2_400, max_tokens=48),
    # {"sparql": one SELECT of ~20 lines}
    "sparql": StageBudget(prompt_tokens=7_600, max_tokens=640),
    # {"confidence": ..., three short lists}
    "completeness": StageBudget(prompt_tokens=2_200, max_tokens=200),
    # {"sparql": the reviewed query, changed in SELECT/GROUP BY only}
    "repair": StageBudget(prompt_tokens=3_800, max_tokens=640),
}


def max_tokens(stage: str) -> int:
    """The completion bound of ``stage``."""
    return STAGE_BUDGETS[stage].max_tokens
