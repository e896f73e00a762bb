"""An operator killed while the analyst is answering its query: the operator started again asks
the analyst for the same answer (named by the query and its round), which the analyst is still
working out, and gets that one answer: the pipeline ran once (no model call made twice), the
query completes once, with the right figures.

The analyst is a process of its own here (as in the chart: a Deployment the operator's crash
does not touch), so its count of answers worked out (``/healthz``) is this test's alone. The
query's model endpoint (``spec.model``) is a scripted server on loopback that holds the first
model call until the first operator is dead and the second has asked again: the kill falls in
the middle of retrieval, not before or after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml
from test_operator_e2e import _bucket, _check_answer, _reasons

import retrieval_eval
from analyst_runner import analyst_process
from k8s_node import wait_for
from kube_cluster import Cluster
from kube_fixtures import GROUP, Api
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.timeout(1500)

AS_OF = "2022-06-15T00:00:00Z"
FINISHED = {"Completed", "Failed", "Rejected"}
HOLD_S = 600.0


def _operator(env: dict[str, str], log: Path, pattern: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", pattern,
            "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _answers(url: str) -> int:
    return int(httpx.get(f"{url}/healthz", timeout=10).json()["answers"])


def test_an_operator_killed_mid_retrieval_gets_the_one_answer_the_analyst_works_out(
    analyst_env: dict[str, str], crds: None, operator_kubeconfig: Path, cluster: Cluster,
    api: Api, namespaces: Any, node: Any, s3: str, s3_lake: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    ns = namespaces("t-res-")
    held, release = threading.Event(), threading.Event()

    def respond(_: dict[str, Any]) -> ScriptStep:
        if not held.is_set():
            held.set()
            release.wait(timeout=HOLD_S)
        return ScriptStep.error(503, "scripted outage")

    env = {**os.environ, **analyst_env, "ODA_LLM_TIMEOUT_S": str(HOLD_S + 60)}
    log = tmp_path / "operator.log"
    with ScriptedOpenAIServer(default=respond, model="held-model") as model, \
            analyst_process(env, tmp_path / "analyst.log") as url:  # fmt: skip
        operator_env = {**env, "KUBECONFIG": str(operator_kubeconfig),
                        "ODA_OPERATOR_PIPELINE_URL": url}  # fmt: skip
        proc = _operator(operator_env, log, "t-res-*")
        try:
            spec = {
                "question": _question(940),
                "user": "alice",
                "referenceTime": AS_OF,
                "analysis": "none",
                "model": {"baseUrl": model.base_url, "name": model.model},
            }
            body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
                    "metadata": {"name": "q"}, "spec": spec}  # fmt: skip
            cluster.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(body))
            wait_for(held.is_set, timeout=900, what="the query's first model call (retrieval)")
            phase = ((api.query(ns, "q") or {}).get("status") or {}).get("phase")
            assert phase == "Retrieving", phase
            assert _answers(url) == 1
            asked = _reasons(api, ns, "q").count("Retrieving")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc = _operator(operator_env, log, "t-res-*")
            # the new operator asks again while the first answer is still held
            wait_for(lambda: _reasons(api, ns, "q").count("Retrieving") > asked, timeout=300,
                     what="the new operator to ask for the answer again")  # fmt: skip
            release.set()
            obj = wait_for(lambda: _finished(api, ns, "q"), timeout=900, what="q to finish",
                           every=1)  # fmt: skip
            worked_out = _answers(url)
        finally:
            release.set()
            _stop(proc)
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert worked_out == 1, f"the analyst worked the answer out {worked_out} times"
    expect = {"kind": "readings", "metrics": ["ipmi/total_power"], "nodes": [940],
              "window": ["2022-06-01T20:00", "2022-06-02T00:00"]}  # fmt: skip
    _check_answer(_bucket(s3), status, SimpleNamespace(expect=expect), s3_lake[1], tmp_path)
    assert _reasons(api, ns, "q").count("Completed") == 1


def _question(node: int) -> str:
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
    return str(item.text).replace("node 900", f"node {node}")


def _finished(api: Api, ns: str, name: str) -> dict[str, Any] | None:
    obj = api.query(ns, name)
    return obj if ((obj or {}).get("status") or {}).get("phase") in FINISHED else None
