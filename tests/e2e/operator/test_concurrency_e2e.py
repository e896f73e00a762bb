"""Queries at once through a real API server: the operator sends them to the analyst side by
side (no lock around the pipeline), two namespaces and two users, each answer checked against
Polars on the lake; and a query beyond a bound waits, saying so in its status, until a place is
free. Timing is not asserted here (bench/operator_concurrency.py measures it): what shows the
queries ran at once is that each one's model was asked at the same moment as the others'.

Each query names its own model endpoint (``spec.model``), a scripted OpenAI-compatible server on
loopback. A server holds its query's first model call back until the others' first calls have
arrived too (a barrier): only pipelines running at the same time can all be inside it at once.
Then it answers with an outage, so the rules answer, as they do for an unreachable model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from test_operator_e2e import _bucket, _check_answer, _reasons

import retrieval_eval
from k8s_node import wait_for
from kube_cluster import Cluster
from kube_fixtures import GROUP, Api
from operator_runner import operator_in_process
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.timeout(1500)

AS_OF = "2022-06-15T00:00:00Z"
FINISHED = {"Completed", "Failed", "Rejected"}
AT_ONCE = 4  # within the default bounds (4 per user, 16 per namespace)
# How long a first model call waits for the others: under the model client's read timeout
# (120 s), so that a call it gave up on cannot stay counted while the pipelines run one by one.
MEET_S = 100.0
HOLD_S = 900.0  # the bound test's held call (its analyst's read timeout is raised above it)


class FirstCalls:
    """The first model call of each query: how many were in flight together at most."""

    def __init__(self, parties: int) -> None:
        self.meet = threading.Barrier(parties, timeout=MEET_S)
        self.lock = threading.Lock()
        self.inside = 0
        self.peak = 0
        self.arrived = 0

    def responder(self) -> Any:
        first = threading.Event()

        def respond(_: dict[str, Any]) -> ScriptStep:
            if not first.is_set():
                first.set()
                with self.lock:
                    self.inside += 1
                    self.arrived += 1
                    self.peak = max(self.peak, self.inside)
                try:
                    self.meet.wait()
                except threading.BrokenBarrierError:
                    pass  # the others never came: the peak says so
                finally:
                    with self.lock:
                        self.inside -= 1
            return ScriptStep.error(503, "scripted outage")

        return respond


@contextmanager
def models(count: int, responders: list[Any]) -> Iterator[list[ScriptedOpenAIServer]]:
    with ExitStack() as stack:
        yield [stack.enter_context(ScriptedOpenAIServer(default=responders[i],
                                                        model=f"model-{i}"))
               for i in range(count)]  # fmt: skip


def _question(node: int) -> str:
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
    text = item.text.replace("node 900", f"node {node}")
    assert text != item.text
    return text


def _expect(node: int) -> dict[str, Any]:
    return {"kind": "readings", "metrics": ["ipmi/total_power"], "nodes": [node],
            "window": ["2022-06-01T20:00", "2022-06-02T00:00"]}  # fmt: skip


def _apply(cluster: Cluster, ns: str, name: str, node: int, user: str,
           server: ScriptedOpenAIServer) -> None:  # fmt: skip
    body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": name},
            "spec": {"question": _question(node), "user": user, "referenceTime": AS_OF,
                     "analysis": "none",
                     "model": {"baseUrl": server.base_url, "name": server.model}}}  # fmt: skip
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(body))


def _finished(api: Api, ns: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = api.query(ns, name)
        return obj if ((obj or {}).get("status") or {}).get("phase") in FINISHED else None

    found: dict[str, Any] = wait_for(done, timeout=1200, what=f"{name} to finish", every=1)
    return found


def test_queries_of_two_namespaces_and_two_users_are_answered_at_the_same_time(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, s3: str,
    s3_lake: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    first = FirstCalls(AT_ONCE)
    spaces = [namespaces("t-k-"), namespaces("t-k-")]
    plan = [(spaces[i % 2], f"c{i}", 910 + i, ("alice", "bob")[i // 2 % 2])
            for i in range(AT_ONCE)]  # fmt: skip
    with models(AT_ONCE, [first.responder() for _ in range(AT_ONCE)]) as servers:
        for (ns, name, node, user), server in zip(plan, servers, strict=True):
            _apply(cluster, ns, name, node, user, server)
        done = [_finished(api, ns, name) for ns, name, _, _ in plan]
    assert first.arrived == AT_ONCE
    assert first.peak == AT_ONCE, f"at most {first.peak} of {AT_ONCE} queries ran at once"
    client = _bucket(s3)
    for (_, name, node, _), obj in zip(plan, done, strict=True):
        status = obj["status"]
        assert status["phase"] == "Completed", (name, status.get("message"))
        assert f"node {node}" in status["understoodAs"]
        assert not status.get("admission"), status.get("admission")  # nobody had to wait
        _check_answer(client, status, SimpleNamespace(expect=_expect(node)), s3_lake[1],
                      tmp_path)  # fmt: skip


def test_a_query_beyond_the_users_bound_waits_and_says_so_until_a_place_is_free(
    cluster: Cluster, api: Api, crds: None, node: Any, namespaces: Any, s3: str,
    s3_lake: tuple[str, Path], operator_env: dict[str, str], tmp_path: Path,
) -> None:  # fmt: skip
    """One query of alice at a time (ODA_OPERATOR_MAX_QUERIES_PER_USER=1): the second waits
    while the first is held inside the analyst (its model call), with status.admission and a
    Queued event saying why, and goes on once the first is done; bob is not held up."""
    ns = namespaces("t-bp-")
    release = threading.Event()
    asked = threading.Event()

    def held(_: dict[str, Any]) -> ScriptStep:
        if not asked.is_set():
            asked.set()
            release.wait(timeout=HOLD_S)
        return ScriptStep.error(503, "scripted outage")

    def outage(_: dict[str, Any]) -> ScriptStep:
        return ScriptStep.error(503, "scripted outage")

    env = {**operator_env, "ODA_OPERATOR_MAX_QUERIES_PER_USER": "1",
           "ODA_LLM_TIMEOUT_S": str(HOLD_S + 60)}  # fmt: skip
    with operator_in_process(env, ns), models(3, [held, outage, outage]) as servers:
        try:
            _apply(cluster, ns, "first", 920, "alice", servers[0])
            wait_for(asked.is_set, timeout=900, what="the first query's model call")
            _apply(cluster, ns, "second", 921, "alice", servers[1])
            queued = wait_for(lambda: _status(api, ns, "second").get("admission"), timeout=300,
                              what="the second to queue")  # fmt: skip
            assert queued["state"] == "Queued", queued
            assert "alice" in queued["reason"] and "PER_USER" in queued["reason"], queued
            _apply(cluster, ns, "third", 922, "bob", servers[2])
            bob = _finished(api, ns, "third")  # not held up by alice's bound
            assert bob["status"]["phase"] == "Completed", bob["status"].get("message")
            assert _phase(api, ns, "second") != "Completed"
        finally:
            release.set()
        done = {name: _finished(api, ns, name) for name in ("first", "second")}
    for name, node_id in (("first", 920), ("second", 921)):
        status = done[name]["status"]
        assert status["phase"] == "Completed", (name, status.get("message"))
        _check_answer(_bucket(s3), status, SimpleNamespace(expect=_expect(node_id)),
                      s3_lake[1], tmp_path)  # fmt: skip
    assert done["second"]["status"]["admission"]["state"] == "Admitted"
    assert "Queued" in _reasons(api, ns, "second")
    assert "Queued" not in _reasons(api, ns, "first")


def _status(api: Api, ns: str, name: str) -> dict[str, Any]:
    return dict((api.query(ns, name) or {}).get("status") or {})


def _phase(api: Api, ns: str, name: str) -> str | None:
    return _status(api, ns, name).get("phase")
