"""vLLM scale-to-zero, the pure decisions (on the real API server:
tests/integration/operator/test_model_scale_apiserver.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from oda_analyst.config import Settings
from oda_analyst.controller.model_scale import (
    LABEL_LAST_USED,
    is_idle,
    model_of,
    readiness,
    use_patch,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _dep(replicas: int, ready: int = 0, *, last: datetime | None = None, generation: int = 2,
         observed: int = 2) -> dict[str, Any]:  # fmt: skip
    labels = {LABEL_LAST_USED: str(int(last.timestamp()))} if last else {}
    return {"metadata": {"name": "m", "generation": generation, "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "readyReplicas": ready}}  # fmt: skip


def test_readiness_needs_a_ready_replica_of_the_current_generation() -> None:
    assert readiness(_dep(0)) == "down"
    assert readiness(_dep(1, 0)) == "starting"
    assert readiness(_dep(1, 1, generation=3, observed=2)) == "starting"
    assert readiness(_dep(1, 1)) == "ready"


def test_idle_counts_from_the_last_use_or_creation() -> None:
    assert is_idle(_dep(1, 1, last=NOW - timedelta(seconds=901)), NOW, 900)
    assert not is_idle(_dep(1, 1, last=NOW - timedelta(seconds=899)), NOW, 900)
    assert not is_idle(_dep(0, last=NOW - timedelta(days=1)), NOW, 900)  # already down
    assert is_idle(_dep(1, 1), NOW, 900)  # never used since creation, 12 h ago


def test_a_use_starts_a_stopped_server_and_stamps_rarely() -> None:
    start = use_patch(_dep(0, last=NOW - timedelta(hours=1)), NOW, 900)
    # a label, not an annotation: a Deployment's generation moves with its annotations
    assert start == {"metadata": {"labels": {LABEL_LAST_USED: str(int(NOW.timestamp()))}},
                     "spec": {"replicas": 1}}  # fmt: skip
    assert use_patch(_dep(1, 1, last=NOW - timedelta(seconds=10)), NOW, 900) is None
    stamp = use_patch(_dep(1, 1, last=NOW - timedelta(seconds=120)), NOW, 900)
    assert stamp is not None and "spec" not in stamp


def test_model_of_prefers_the_query_s_own_model() -> None:
    with_model = Settings(llm_base_url="http://vllm:8000/v1", llm_model="qwen")
    rules_only = Settings(llm_base_url=None, llm_model=None)
    own = {"spec": {"model": {"baseUrl": "http://x/v1", "name": "llama"}}}
    assert model_of(own, rules_only) == "llama"
    assert model_of({"spec": {}}, with_model) == "qwen"
    assert model_of({"spec": {}}, rules_only) is None
