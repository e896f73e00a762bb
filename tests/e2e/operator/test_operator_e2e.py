"""AnalystQuery through a real API server: kubectl apply → the operator (KopfRunner) → the
builder Job and the sandbox pod on the test node → Completed, with the answer checked against an
independent Polars computation on the same lake files (bench/devset/oracle.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml
from minio import Minio
from prometheus_client.parser import text_string_to_metric_families

import retrieval_eval
from k8s_node import NodeAgent, wait_for
from kube_cluster import Cluster
from kube_fixtures import ARTIFACT_BUCKET, GROUP, S3_KEY, S3_SECRET, Api
from oda_analyst.config import get_settings
from oda_analyst.controller.manifests import get_vkg_cache
from oda_analyst.controller.port import GraphNeed
from oda_analyst.coordinator.service import CoordinatorAnswer
from oda_analyst.retriever.answer import AnswerPayload
from oda_analyst.vkg.cache import VKGCache, vkg_graph_iri
from oda_analyst.vkg.factory import open_store
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.timeout(1200)

AS_OF = "2022-06-15T00:00:00Z"
PENDING_PHASES = {"Pending", "BuildingVKG", "Retrieving", "Analysing"}


def _items() -> dict[str, Any]:
    return {i.id: i for i in retrieval_eval.load_items()}


def _manifest(name: str, question: str, **spec: Any) -> str:
    body = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "AnalystQuery",
        "metadata": {"name": name},
        "spec": {"question": question, "user": "alice", "referenceTime": AS_OF, **spec},
    }
    return yaml.safe_dump(body)


def _phase(api: Api, ns: str, name: str) -> str | None:
    obj = api.query(ns, name)
    return ((obj or {}).get("status") or {}).get("phase")


def _until_phase(api: Api, ns: str, name: str, phases: set[str], timeout: float = 900
                 ) -> dict[str, Any]:  # fmt: skip
    def reached() -> dict[str, Any] | None:
        obj = api.query(ns, name)
        phase = ((obj or {}).get("status") or {}).get("phase")
        return obj if phase in phases else None

    found: dict[str, Any] = wait_for(reached, timeout=timeout, what=f"{name} to reach {phases}",
                                     every=1)  # fmt: skip
    return found


def _bucket(s3: str) -> Minio:
    return Minio(s3.removeprefix("http://"), access_key=S3_KEY, secret_key=S3_SECRET,
                 secure=False)  # fmt: skip


def _object(client: Minio, uri: str) -> bytes:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    resp = client.get_object(bucket, key)
    try:
        return bytes(resp.read())
    finally:
        resp.close()
        resp.release_conn()


def _check_answer(client: Minio, status: dict[str, Any], item: Any, lake: Path,
                  tmp: Path) -> None:  # fmt: skip
    """The answer in the bucket against the oracle, with the result table read from the
    bucket too (not from the operator's own data folder)."""
    from devset import oracle  # noqa: PLC0415 (bench/ joins sys.path in the e2e conftest)

    data = json.loads(_object(client, status["answerUri"]))
    # The coordinator's answer when the query asked for analysis, else the retriever's.
    shape: Any = CoordinatorAnswer if "conversation_id" in data else AnswerPayload
    answer = shape.model_validate(data)
    csv_uri = next((u for u in status["artifacts"] if u.endswith("/result.csv")), None)
    if csv_uri is not None and answer.results and answer.results[0].get("rows") is None:
        local = tmp / f"result-{len(list(tmp.iterdir()))}.csv"
        local.write_bytes(_object(client, csv_uri))
        answer.results[0]["csv"] = str(local)
    verdict = retrieval_eval.check_answer(answer, item.expect, lake, oracle.jobs(lake))
    assert verdict.ok, verdict.reason


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The operator's /metrics: (sample name, its labels) -> value."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def _grew(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _reasons(api: Api, ns: str, name: str) -> list[str]:
    return [
        e["reason"]
        for e in sorted(api.events(ns, name), key=lambda e: e.get("firstTimestamp") or "")
    ]


def test_appendix_a_question_completes_with_answer_artefacts_and_events(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, node: NodeAgent, s3: str,
    s3_lake: tuple[str, Path], tmp_path: Path, metrics_port: int,
) -> None:  # fmt: skip
    """Q2 (total power of node 900, 20:00–23:59, plot the time series)."""
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    before = _scrape(metrics_port)
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=_manifest("q2", item.text))
    obj = _until_phase(api, ns, "q2", {"Completed", "Failed", "Rejected"})
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert "power" in status["understoodAs"].lower() and "node 900" in status["understoodAs"]
    assert "SELECT" in status["sparql"]
    client = _bucket(s3)
    _check_answer(client, status, item, s3_lake[1], tmp_path)

    # The operator's own files, the sandbox pod's summary, and what the coordinator made: the
    # chart the code agent drew through MCP and the script that drew it.
    prefix = f"s3://{ARTIFACT_BUCKET}/queries/{ns}/q2/"
    assert all(uri.startswith(prefix) for uri in status["artifacts"])
    mine = sorted(u.rsplit("/", 1)[1] for u in status["artifacts"] if "/coordinator/" not in u)
    assert mine == ["answer.json", "result.csv", "summary.json"]
    drawn = [u for u in status["artifacts"] if "/coordinator/" in u]
    charts = [u for u in drawn if u.endswith(".png")]
    assert len(charts) == 1 and charts[0].rsplit(".", 1)[0] + ".py" in drawn, drawn
    png = _object(client, charts[0])
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    told = json.loads(_object(client, status["answerUri"]))
    assert told["dispatches"].get("codeagent.execute", 0) >= 1, told["dispatches"]
    assert told["dispatches"].get("retriever.query") == 1
    summary = json.loads(_object(client, next(u for u in status["artifacts"]
                                              if u.endswith("summary.json"))))  # fmt: skip
    table = _object(client, next(u for u in status["artifacts"] if u.endswith("result.csv")))
    values = [float(line.rsplit(",", 1)[1]) for line in table.decode().splitlines()[1:]]
    assert summary["900"]["count"] == status["rowCount"] == len(values)
    assert summary["900"]["max"] == pytest.approx(max(values))
    assert len(status["rows"]) == min(50, len(values))

    # kopf posts events in the background: the last one may trail the status a little.
    reasons = wait_for(lambda: (r := _reasons(api, ns, "q2")) and "Completed" in r and r,
                       timeout=60, what="the Completed event")  # fmt: skip
    for step in ("Understood", "VKGCache", "Retrieving", "Retrieved", "Analysing", "Analysed",
                 "Completed"):  # fmt: skip
        assert step in reasons, reasons
    assert reasons.count("Completed") == 1

    caches = api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches")
    assert len(caches) == 1 and caches[0]["status"]["phase"] == "Ready"
    assert caches[0]["status"]["triples"] > 0
    assert caches[0]["metadata"]["name"] in status["vkgCache"]
    assert {"Built"} <= set(_reasons(api, ns, caches[0]["metadata"]["name"]))
    ran = [r for r in node.started() if r["namespace"] == ns]
    assert sorted(r["name"].rsplit("-", 1)[0] for r in ran if "build" in r["name"])
    analysis = [r for r in ran if r["name"].endswith("-analysis")]
    assert len(analysis) == 1 and analysis[0]["runtimeClassName"] == "gvisor"
    # the analyst's sandbox pod: no publisher, no network (its files went through the API)
    assert analysis[0]["containers"] == ["sandbox", "io"] and analysis[0]["network"] == "none"

    listed = cluster.kubectl("get", "oda", "-n", ns).stdout
    assert "q2" in listed and "Completed" in listed and caches[0]["metadata"]["name"] in listed

    # The operator's /metrics counted it: the query's handler runs (waits for the graph among
    # them), the builder Job it launched (the sandbox pods are the analyst's), the query
    # Completed and its time to get there, nothing queued now.
    after = _scrape(metrics_port)
    assert _grew(before, after, "oda_operator_reconciles_total", kind="query", outcome="done") >= 1
    assert _grew(before, after, "oda_operator_reconciles_total", kind="query",
                 outcome="waiting") >= 1  # fmt: skip
    assert _grew(before, after, "oda_operator_reconciles_total", kind="cache", outcome="done") >= 1
    assert _grew(before, after, "oda_operator_reconcile_duration_seconds_count", kind="query") >= 2
    assert _grew(before, after, "oda_operator_pods_launched_total", kind="vkg-builder") == 1
    assert _grew(before, after, "oda_operator_pods_launched_total", kind="analysis") == 0
    assert _grew(before, after, "oda_operator_query_duration_seconds_count",
                 phase="Completed") == 1  # fmt: skip
    assert _grew(before, after, "oda_operator_queries", phase="Completed") >= 1
    assert after[("oda_operator_queue_depth", ())] == 0


def test_clarification_round_trip(operator: Any, cluster: Cluster, api: Api, namespaces: Any,
                                  s3: str, s3_lake: tuple[str, Path], tmp_path: Path
                                  ) -> None:  # fmt: skip
    """Q6 asks which 'temperature'; the answer patched into spec resumes it to Completed."""
    item = _items()["Q6"]
    ns = namespaces("t-k-")
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=_manifest("q6", item.text))
    obj = _until_phase(api, ns, "q6", {"WaitingForClarification", "Completed", "Failed",
                                       "Rejected"})  # fmt: skip
    status = obj["status"]
    assert status["phase"] == "WaitingForClarification", status.get("message")
    ask = status["clarification"]
    assert ask["field"] == "metric" and ask["question"]
    assert "ambient" in {c["metric"] for c in ask["candidates"]}
    assert not api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches")
    time.sleep(3)  # a paused query stays paused
    assert _phase(api, ns, "q6") == "WaitingForClarification"

    cluster.kubectl("patch", "analystquery", "q6", "-n", ns, "--type=merge", "-p",
                    json.dumps({"spec": {"clarifications": [item.clarify]}}))  # fmt: skip
    obj = _until_phase(api, ns, "q6", {"Completed", "Failed", "Rejected"})
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert status.get("clarification") is None
    assert status["asked"][0]["field"] == "metric"
    _check_answer(_bucket(s3), status, item, s3_lake[1], tmp_path)
    reasons = wait_for(lambda: (r := _reasons(api, ns, "q6")) and "Completed" in r and r,
                       timeout=60, what="the Completed event")  # fmt: skip
    assert reasons.index("ClarificationNeeded") < reasons.index("Completed")


def _operator_process(env: dict[str, str], log: Path, pattern: str, *, standalone: bool = True
                      ) -> subprocess.Popen[bytes]:  # fmt: skip
    argv = [sys.executable, "-m", "kopf", "run", *(["--standalone"] if standalone else []),
            "--namespace", pattern, "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    # a /metrics port of its own: the module's in-process operator holds the one in os.environ,
    # and an operator that cannot serve its metrics never starts
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return subprocess.Popen(argv, env={**os.environ, **env, "ODA_OPERATOR_METRICS_PORT": str(port)},
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)  # fmt: skip


def test_operator_killed_mid_query_completes_exactly_once(
    operator_env: dict[str, str], crds: None, operator_kubeconfig: Path, cluster: Cluster,
    api: Api, namespaces: Any, node: NodeAgent, s3: str, s3_lake: tuple[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    """SIGKILL the operator while the analysis pod waits for the node; a new operator joins
    the analyst's run of it (no second pod), and the query completes once. Both operators run
    as processes with the service account of deploy/operator-rbac.yaml, so its RBAC is tested
    too."""
    item = _items()["Q2"]
    ns = namespaces("t-r-")
    log = tmp_path / "operator.log"
    env = {**operator_env, "KUBECONFIG": str(operator_kubeconfig)}
    proc = _operator_process(env, log, "t-r-*")
    try:
        node.hold("-analysis")
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=_manifest("q2r", item.text))
        first = _until_phase(api, ns, "q2r", {"Analysing", "Completed", "Failed"})
        assert first["status"]["phase"] == "Analysing", first["status"].get("message")
        # the analyst makes the pod once the operator has asked it (just after Analysing)
        wait_for(lambda: [p for p in api.items(f"/api/v1/namespaces/{ns}/pods")
                          if p["metadata"]["name"].endswith("-analysis")],
                 timeout=120, what="the analysis pod")  # fmt: skip
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc = _operator_process(env, log, "t-r-*")
        time.sleep(5)  # the new operator resumes while the node still holds the pod back
        node.hold()
        obj = _until_phase(api, ns, "q2r", {"Completed", "Failed", "Rejected"})
        assert obj["status"]["phase"] == "Completed", obj["status"].get("message")
        _check_answer(_bucket(s3), obj["status"], item, s3_lake[1], tmp_path)
        pods = api.items(f"/api/v1/namespaces/{ns}/pods")
        assert len([p for p in pods if p["metadata"]["name"].endswith("-analysis")]) == 1
        assert len([r for r in node.started() if r["namespace"] == ns
                    and r["name"].endswith("-analysis")]) == 1  # fmt: skip
        made = [c["metadata"]["name"] for c in api.items(
            f"/api/v1/namespaces/{ns}/configmaps", **{"oda-analyst.dev/query": "q2r"})]  # fmt: skip
        assert made == []  # the sandbox pods' files went through the API's exec, not ConfigMaps
        # the chart's one run in the user's pod: one pod
        assert len([p for p in pods if "-code-" in p["metadata"]["name"]]) == 1
        time.sleep(3)
        assert _reasons(api, ns, "q2r").count("Completed") == 1
        cluster.kubectl("delete", "analystquery", "q2r", "-n", ns, "--timeout=60s")
    finally:
        node.hold()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_scheduled_query_runs_twice(operator: Any, cluster: Cluster, api: Api, namespaces: Any,
                                    s3: str, s3_lake: tuple[str, Path], tmp_path: Path
                                    ) -> None:  # fmt: skip
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    cluster.kubectl("apply", "-n", ns, "-f", "-",
                    input=_manifest("every", item.text, schedule="* * * * * */15",
                                    historyLimit=5, analysis="none"))  # fmt: skip

    def two_done() -> list[dict[str, Any]]:
        runs = api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/analystqueries",
                         **{"oda-analyst.dev/scheduled-by": "every"})  # fmt: skip
        done = [r for r in runs if (r.get("status") or {}).get("phase") == "Completed"]
        return done if len(done) >= 2 else []

    done = wait_for(two_done, timeout=600, what="two completed runs", every=2)
    times = {r["spec"]["referenceTime"] for r in done}
    assert len(times) == len(done)
    for run in done[:2]:
        assert run["metadata"]["ownerReferences"][0]["name"] == "every"
        _check_answer(_bucket(s3), run["status"], item, s3_lake[1], tmp_path)
    parent = api.query(ns, "every")
    assert parent is not None and parent["status"]["phase"] == "Scheduled"
    assert parent["status"]["runs"] >= 2
    caches = api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches")
    assert len(caches) == 1  # the runs share one graph
    cluster.kubectl("delete", "analystquery", "every", "-n", ns, "--timeout=60s")


def test_liveness_endpoint(operator: Any, liveness_port: int) -> None:
    body = wait_for(lambda: _probe(liveness_port), timeout=60, what="the liveness endpoint")
    assert body.get("pipeline") is True


def _probe(port: int) -> dict[str, Any] | None:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def test_vkg_cache_expires_by_ttl_and_drops_its_graph(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, oxigraph: str
) -> None:  # fmt: skip
    """A VKGCache unread for its TTL is deleted by the operator, and its finalizer drops the
    named graph from the shared store. Its last read is filed ten minutes back in the store
    (where the operator's timer reads it), rather than the test waiting out the TTL."""
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=_manifest("q2t", item.text,
                                                                   analysis="none"))  # fmt: skip
    _until_phase(api, ns, "q2t", {"Completed"})
    path = f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches"
    (cache,) = api.items(path)
    name, graph = cache["metadata"]["name"], cache["status"]["namedGraph"]
    assert _graph_count(oxigraph, graph) > 0
    cluster.kubectl("patch", "vkgc", name, "-n", ns, "--type=merge", "-p",
                    json.dumps({"spec": {"ttlSeconds": 60}}))  # fmt: skip
    time.sleep(5)  # two gc ticks: read a moment ago, it is kept
    assert api.get(f"{path}/{name}") is not None
    past = datetime.now(UTC) - timedelta(minutes=10)
    read = VKGCache(open_store(get_settings()), 100, clock=lambda: past).lookup(
        cache["spec"]["key"], user=cache["spec"]["owner"]
    )
    assert read is not None and read.last_access == past
    wait_for(lambda: api.get(f"{path}/{name}") is None, timeout=120,
             what="the VKGCache to expire", every=1)  # fmt: skip
    assert "Evicted" in _reasons(api, ns, name)
    assert _graph_count(oxigraph, graph) == 0


def _graph_count(endpoint: str, graph: str) -> int:
    query = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}"
    r = httpx.post(f"{endpoint}/query", data={"query": query},
                   headers={"Accept": "application/sparql-results+json"}, timeout=60)  # fmt: skip
    r.raise_for_status()
    return int(r.json()["results"]["bindings"][0]["n"]["value"])


def _prebuilt(key: str, at: datetime) -> None:
    """A graph in the shared store, filed by the retriever's cache as read at ``at`` (what a
    builder Job leaves behind; its VKGCache then goes Ready without a Job)."""
    store = open_store(get_settings())
    triples = b'<urn:oda:test:s> <urn:oda:test:p> "1" .\n'
    VKGCache(store, 100, clock=lambda: at).get_or_build(
        key, lambda graph: store.load_ntriples(graph, triples), owner="alice",
        allowed_users=("*",))  # fmt: skip


def _apply_cache(api: Api, ns: str, key: str, lake: str) -> str:
    need = GraphNeed(key=key, request={}, lake=lake, fingerprint="test")
    body = get_vkg_cache(need, namespace=ns, owner="alice")
    api.http.post(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches",
                  json=body).raise_for_status()  # fmt: skip
    return str(body["metadata"]["name"])


def test_vkg_caches_beyond_the_bound_go_least_recently_read_first_but_never_in_use(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, node: NodeAgent,
    oxigraph: str, s3_lake: tuple[str, Path],
) -> None:  # fmt: skip
    """Capacity 2 per namespace (operator_env). Q2's cache is the least recently read of three
    while Q2 waits in Analysing, so the next one goes instead; once Q2 completed, its cache is
    the first to go."""
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    path = f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches"
    node.hold("-analysis")
    try:
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=_manifest("q2l", item.text))
        held = _until_phase(api, ns, "q2l", {"Analysing", "Completed", "Failed"})
        assert held["status"]["phase"] == "Analysing", held["status"].get("message")
        (busy,) = (c["metadata"]["name"] for c in api.items(path))
        soon = datetime.now(UTC) + timedelta(minutes=1)
        keys = [uuid.uuid4().hex + "0" * 8 for _ in range(3)]
        for i, key in enumerate(keys):
            _prebuilt(key, soon + timedelta(minutes=i))
        older, newer = (_apply_cache(api, ns, k, s3_lake[0]) for k in keys[:2])
        graph = vkg_graph_iri(keys[0])
        assert _graph_count(oxigraph, graph) == 1
        wait_for(lambda: api.get(f"{path}/{older}") is None, timeout=120,
                 what=f"{older} to be evicted", every=1)  # fmt: skip
        assert "Evicted" in _reasons(api, ns, older)
        assert _graph_count(oxigraph, graph) == 0  # its finalizer dropped the graph
        time.sleep(5)  # two Ready caches now: nothing more goes
        assert {c["metadata"]["name"] for c in api.items(path)} == {busy, newer}
    finally:
        node.hold()
    done = _until_phase(api, ns, "q2l", {"Completed", "Failed", "Rejected"})
    assert done["status"]["phase"] == "Completed", done["status"].get("message")
    assert "GraphEvicted" not in _reasons(api, ns, "q2l")
    latest = _apply_cache(api, ns, keys[2], s3_lake[0])
    wait_for(lambda: api.get(f"{path}/{busy}") is None, timeout=120,
             what=f"{busy}, no longer read by a running query, to be evicted", every=1)  # fmt: skip
    assert {c["metadata"]["name"] for c in api.items(path)} == {newer, latest}


_RESUMED = "Resuming operations"  # kopf's log line when a replica starts handling


def _peers(api: Api, ns: str) -> dict[str, Any]:
    found = api.get(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings/oda-analyst") or {}
    return dict(found.get("status") or {})


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_two_replicas_under_peering_handle_a_query_exactly_once_and_fail_over(
    operator_env: dict[str, str], crds: None, operator_kubeconfig: Path, cluster: Cluster,
    api: Api, namespaces: Any, node: NodeAgent, s3: str, s3_lake: tuple[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    """Two operators (no --standalone, the RBAC's service account) share the namespace's
    KopfPeering: the first started is active, the second stands by and takes no part in the
    query; once the first stops, the second completes the next query."""
    item = _items()["Q2"]
    ns = namespaces("t-p-")
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
               "metadata": {"name": "oda-analyst", "namespace": ns}}  # fmt: skip
    api.http.post(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings",
                  json=peering).raise_for_status()  # fmt: skip
    env = {**operator_env, "KUBECONFIG": str(operator_kubeconfig)}
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    first = _operator_process(env, logs[0], "t-p-*", standalone=False)
    second: subprocess.Popen[bytes] | None = None
    try:
        # A replica starts paused (peering is mandatory) and resumes once it saw no peer
        # above it: the first does, the second never does while the first runs.
        wait_for(lambda: _RESUMED in logs[0].read_text(), timeout=180,
                 what="the first replica to become active")  # fmt: skip
        second = _operator_process(env, logs[1], "t-p-*", standalone=False)
        wait_for(lambda: len(_peers(api, ns)) == 2, timeout=180, what="the second replica's peer")
        priorities = [p["priority"] for p in _peers(api, ns).values()]
        assert len(set(priorities)) == 2  # a tie would freeze both

        cluster.kubectl("apply", "-n", ns, "-f", "-",
                        input=_manifest("q2p", item.text, analysis="none"))  # fmt: skip
        done = _until_phase(api, ns, "q2p", {"Completed", "Failed", "Rejected"})
        assert done["status"]["phase"] == "Completed", done["status"].get("message")
        _check_answer(_bucket(s3), done["status"], item, s3_lake[1], tmp_path)
        time.sleep(3)
        assert _reasons(api, ns, "q2p").count("Completed") == 1
        assert _reasons(api, ns, "q2p").count("Understood") == 1
        builds = [r for r in node.started() if r["namespace"] == ns and "build" in r["name"]]
        assert len(builds) == 1
        assert "q2p" in logs[0].read_text()
        assert "q2p" not in logs[1].read_text()
        assert _RESUMED not in logs[1].read_text()

        _stop(first)  # a clean stop withdraws its peer: the standby resumes at once
        wait_for(lambda: _RESUMED in logs[1].read_text(), timeout=120,
                 what="the second replica to take over")  # fmt: skip
        cluster.kubectl("apply", "-n", ns, "-f", "-",
                        input=_manifest("q2q", item.text, analysis="none"))  # fmt: skip
        taken = _until_phase(api, ns, "q2q", {"Completed", "Failed", "Rejected"})
        assert taken["status"]["phase"] == "Completed", taken["status"].get("message")
        assert "q2q" in logs[1].read_text()
        for name in ("q2p", "q2q"):
            cluster.kubectl("delete", "analystquery", name, "-n", ns, "--timeout=60s")
    finally:
        _stop(first)
        if second is not None:
            _stop(second)


def test_a_baseline_backend_answers_the_retrieval_alone(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, node: NodeAgent, s3: str,
    s3_lake: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    """backend: sota1 (the paper's EXASAGE Query Tool, exact names and bracketed times): the
    baseline's answer from the lake in S3, with no graph of ours and no analysis pod."""
    ns = namespaces("t-k-")
    question = "total_power of node 900 from [2022-06-01 20:00:00] to [2022-06-01 22:00:00]"
    cluster.kubectl("apply", "-n", ns, "-f", "-",
                    input=_manifest("s1", question, backend="sota1"))  # fmt: skip
    obj = _until_phase(api, ns, "s1", {"Completed", "Failed", "Rejected"})
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    expect = {"kind": "readings", "metrics": ["ipmi/total_power"], "nodes": [900],
              "window": ["2022-06-01T20:00", "2022-06-01T22:00"]}  # fmt: skip
    _check_answer(_bucket(s3), status, SimpleNamespace(expect=expect), s3_lake[1], tmp_path)
    assert status["requestId"].startswith("sota1")
    assert not api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/vkgcaches")
    assert not [r for r in node.started() if r["namespace"] == ns]
    assert sorted(u.rsplit("/", 1)[1] for u in status["artifacts"]) == ["answer.json",
                                                                        "result.csv"]  # fmt: skip


def test_an_unreachable_model_override_is_said_in_status_and_the_rules_answer(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, s3: str,
    s3_lake: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    model = {"baseUrl": url, "name": "gone"}
    cluster.kubectl("apply", "-n", ns, "-f", "-",
                    input=_manifest("q2m", item.text, analysis="none", model=model))  # fmt: skip
    obj = _until_phase(api, ns, "q2m", {"Completed", "Failed", "Rejected"})
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert status["model"]["reachable"] is False and status["model"]["baseUrl"] == url
    assert "127.0.0.1" in status["model"]["message"]
    assert any("model" in w for w in status["warnings"]), status["warnings"]
    _check_answer(_bucket(s3), status, item, s3_lake[1], tmp_path)
    reasons = wait_for(lambda: (r := _reasons(api, ns, "q2m")) and "Completed" in r and r,
                       timeout=60, what="the Completed event")  # fmt: skip
    assert "ModelUnreachable" in reasons


def test_a_model_override_is_what_the_querys_stages_ask(
    operator: Any, cluster: Cluster, api: Api, namespaces: Any, s3: str,
    s3_lake: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    """The operator names no model; spec.model points at a scripted OpenAI-compatible server
    on loopback, which sees this query's model calls under the override's model name (its
    replies are outages, so the rules answer; what it would say is not under test)."""
    item = _items()["Q2"]
    ns = namespaces("t-k-")
    with ScriptedOpenAIServer(default=lambda _: ScriptStep.error(503, "scripted outage"),
                              model="override-model") as server:  # fmt: skip
        model = {"baseUrl": server.base_url, "name": server.model}
        manifest = _manifest("q2o", item.text, analysis="none", model=model)
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=manifest)
        obj = _until_phase(api, ns, "q2o", {"Completed", "Failed", "Rejected"})
        bodies = server.chat_bodies
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert status["model"]["reachable"] is True
    assert bodies and {b["model"] for b in bodies} == {"override-model"}
    _check_answer(_bucket(s3), status, item, s3_lake[1], tmp_path)
