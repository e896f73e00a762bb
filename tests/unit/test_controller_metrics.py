"""The operator's own metrics (controller/metrics.py): what each recording function counts, the
queue depth read from the admission at scrape time, queries by phase, and /metrics served on its
port in the Prometheus text format. The registry is the process's, so each test compares what
it changed (before and after), never absolute values."""

from __future__ import annotations

import asyncio
import importlib
import socket
import urllib.request
from types import ModuleType
from typing import Any

import kopf
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oda_analyst.config import Settings
from oda_analyst.controller import metrics, names
from oda_analyst.controller.admission import Admission, Bounds
from oda_analyst.controller.identity import Policy


def _value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _reconciles(kind: str, outcome: str) -> float:
    return _value("oda_operator_reconciles_total", kind=kind, outcome=outcome)


def test_a_handler_run_is_counted_by_how_it_ended() -> None:
    before = {o: _reconciles("unit", o) for o in ("done", "waiting", "failed", "error")}
    timed = _value("oda_operator_reconcile_duration_seconds_count", kind="unit")
    with metrics.reconcile("unit"):
        pass
    with pytest.raises(kopf.TemporaryError), metrics.reconcile("unit"):
        raise kopf.TemporaryError("waiting for a pod", delay=1)
    with pytest.raises(kopf.PermanentError), metrics.reconcile("unit"):
        raise kopf.PermanentError("bad spec")
    with pytest.raises(RuntimeError), metrics.reconcile("unit"):
        raise RuntimeError("the API server went away")
    for outcome, count in before.items():
        assert _reconciles("unit", outcome) == count + 1, outcome
    assert _value("oda_operator_reconcile_duration_seconds_count", kind="unit") == timed + 4


def test_queries_are_counted_by_their_last_phase_until_deleted() -> None:
    def count(phase: str) -> float:
        return _value("oda_operator_queries", phase=phase)

    pending, completed = count(names.PENDING), count(names.COMPLETED)
    metrics.query_phase("uid-a", None)  # seen before its first status
    metrics.query_phase("uid-b", names.RETRIEVING)
    assert count(names.PENDING) == pending + 1
    metrics.query_phase("uid-a", names.COMPLETED)
    assert (count(names.PENDING), count(names.COMPLETED)) == (pending, completed + 1)
    metrics.forget_query("uid-a")
    metrics.forget_query("uid-b")
    metrics.forget_query("never-seen")
    assert count(names.COMPLETED) == completed
    # every phase is there, at 0 when no query is in it: alerts need no absent() guard
    for phase in (names.WAITING, names.FAILED, names.REJECTED, names.BUILDING):
        assert metrics.REGISTRY.get_sample_value("oda_operator_queries", {"phase": phase}) \
            is not None  # fmt: skip


def test_durations_pods_and_webhook_decisions() -> None:
    done = _value("oda_operator_query_duration_seconds_count", phase=names.COMPLETED)
    slow = _value("oda_operator_query_duration_seconds_bucket", phase=names.COMPLETED, le="60.0")
    metrics.query_finished(names.COMPLETED, 42.0)
    assert _value("oda_operator_query_duration_seconds_count", phase=names.COMPLETED) == done + 1
    assert _value("oda_operator_query_duration_seconds_bucket", phase=names.COMPLETED,
                  le="60.0") == slow + 1  # fmt: skip
    pods = _value("oda_operator_pods_launched_total", kind="analysis")
    metrics.pod_launched("analysis")
    assert _value("oda_operator_pods_launched_total", kind="analysis") == pods + 1


def _webhooks() -> ModuleType:
    """The webhook handlers, imported into a registry of their own: in kopf's default registry
    they would join every in-process operator the session starts later (which then has
    admission handlers and no admission server, and never becomes ready)."""
    # the login handler the webhooks module imports belongs in the default registry: import it
    # there first (a module registers its handlers once, where it is first imported)
    importlib.import_module("oda_analyst.controller.login")
    saved = kopf.get_default_registry()
    kopf.set_default_registry(kopf.OperatorRegistry())
    try:
        return importlib.import_module("oda_analyst.controller.webhooks")
    finally:
        kopf.set_default_registry(saved)


def _spec(fields: dict[str, Any]) -> kopf.Spec:
    return kopf.Spec(kopf.Body({"spec": fields}))


def _decisions() -> dict[tuple[str, str], float]:
    pairs = [("stamp-user", d) for d in ("stamped", "kept", "refused")]
    pairs += [("check-query", d) for d in ("allowed", "refused")]
    return {p: _value("oda_operator_webhook_decisions_total", webhook=p[0], decision=p[1])
            for p in pairs}  # fmt: skip


def test_the_webhook_handlers_count_their_decisions() -> None:
    hooks: Any = _webhooks()
    memo: Any = {"identity": Policy(trusted_creators=frozenset({"admin"}),
                                    model_urls=frozenset({"http://vllm:8000/v1"}))}  # fmt: skip
    before = _decisions()
    patch: dict[str, Any] = {}
    hooks.stamp_user(spec=_spec({"question": "q"}), userinfo={"username": "alice"}, patch=patch,
               memo=memo, operation="CREATE")  # fmt: skip
    assert patch == {"spec": {"user": "alice"}}
    hooks.stamp_user(spec=_spec({"user": "bob"}), userinfo={"username": "bob"}, patch={},
               memo=memo, operation="CREATE")  # fmt: skip
    with pytest.raises(kopf.AdmissionError):
        hooks.stamp_user(spec=_spec({"user": "alice"}), userinfo={"username": "bob"}, patch={},
                   memo=memo, operation="CREATE")  # fmt: skip
    hooks.check_query(spec=_spec({"user": "a"}), subresource=None, memo=memo, operation="CREATE")
    with pytest.raises(kopf.AdmissionError):
        hooks.check_query(spec=_spec({"user": "a", "model": {"baseUrl": "https://x.example/v1",
                                                           "name": "m"}}),
                    subresource=None, memo=memo, operation="CREATE")  # fmt: skip
    after = _decisions()
    assert {k: after[k] - before[k] for k in before} == {
        ("stamp-user", "stamped"): 1, ("stamp-user", "kept"): 1, ("stamp-user", "refused"): 1,
        ("check-query", "allowed"): 1, ("check-query", "refused"): 1,
    }  # fmt: skip


def test_queue_depth_is_the_admissions_at_scrape_time() -> None:
    async def scenario() -> tuple[float, float, float]:
        admission = Admission(Bounds(cluster=1, namespace=1, user=1))
        metrics.watch_admission(admission)
        hold, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with admission.slot("a", "ns", "alice", _nothing):
                hold.set()
                await release.wait()

        async def second() -> None:
            async with admission.slot("b", "ns", "bob", _nothing):
                pass

        tasks = [asyncio.create_task(first())]
        await hold.wait()
        tasks.append(asyncio.create_task(second()))
        await asyncio.sleep(0.05)  # b is queued behind a
        during = (_value("oda_operator_queue_depth"), _value("oda_operator_queries_admitted"))
        release.set()
        await asyncio.gather(*tasks)
        return *during, _value("oda_operator_queue_depth")

    waiting, admitted, after = asyncio.run(scenario())
    assert (waiting, admitted, after) == (1.0, 1.0, 0.0)


async def _nothing(_why: str, _ahead: int) -> None:
    return None


def test_metrics_are_served_on_their_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    metrics.serve(port, "127.0.0.1")
    metrics.serve(port, "127.0.0.1")  # a second module's start-up: served once
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        metrics.stop()
    found = {f.name for f in text_string_to_metric_families(text)}
    assert {"oda_operator_reconciles", "oda_operator_reconcile_duration_seconds",
            "oda_operator_queue_depth", "oda_operator_queries", "oda_operator_pods_launched",
            "oda_operator_webhook_decisions", "oda_operator_query_duration_seconds",
            "process_cpu_seconds"} <= found  # fmt: skip
    # the analyst's metrics are not the operator's: its own registry only
    assert not any(name.startswith("oda_requests") for name in found)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    metrics.serve(None)  # no port: nothing served, nothing raised


def test_the_operator_names_its_peering_from_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two releases' operators must not share one peering object (each would pause the other's
    # replicas): the name is a setting the chart fills per release, names.PEERING its default.
    assert Settings().operator_peering == names.PEERING
    monkeypatch.setenv("ODA_OPERATOR_PEERING", "rel-oda-analyst-oda")
    assert Settings().operator_peering == "rel-oda-analyst-oda"
