"""Alerts end to end: Debian's Prometheus fires a rule, Debian's Alertmanager posts it to the
operator's webhook receiver, the receiver creates an AnalystQuery from the chart's shipped
template on the real API server, the operator (KopfRunner) answers it, and the answer is linked
back: annotations on the query and a POST to the configured answer webhook.

Prometheus' alert starts now, and the test lake holds June 2022: that query's honest answer is
"no data for that window". A second alert, posted to the same receiver as Alertmanager would
with a window in June 2022, is answered with figures, checked against Polars on the lake files.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from minio import Minio

from alerting import Sink, alertmanager, free_port, prometheus
from k8s_node import wait_for
from kube_fixtures import GROUP, S3_KEY, S3_SECRET, Api
from oda_analyst.controller.alerts import (
    ANN_ALERT_NAME,
    ANN_ANSWER,
    ANN_ANSWER_URI,
    ANN_LINKED,
    LABEL_ALERT,
)
from operator_runner import operator_in_process

pytestmark = pytest.mark.timeout(1200)

REPO = Path(__file__).resolve().parents[3]
TEMPLATES = REPO / "charts" / "oda-analyst" / "files" / "alert-templates.yaml"
TERMINAL = {"Completed", "Failed", "Rejected"}


def _alert_queries(api: Api, ns: str) -> list[dict[str, Any]]:
    items = api.items(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/analystqueries")
    return [q for q in items if LABEL_ALERT in (q["metadata"].get("labels") or {})]


def _finished_and_linked(api: Api, ns: str, name: str) -> dict[str, Any] | None:
    obj = api.query(ns, name)
    ann = (obj or {}).get("metadata", {}).get("annotations") or {}
    return obj if ANN_LINKED in ann else None


def _receiver_up(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _result_values(s3: str, uri: str) -> list[float]:
    client = Minio(s3.removeprefix("http://"), access_key=S3_KEY, secret_key=S3_SECRET,
                   secure=False)  # fmt: skip
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    resp = client.get_object(bucket, key)
    try:
        rows = list(csv.DictReader(io.StringIO(resp.read().decode())))
    finally:
        resp.close()
        resp.release_conn()
    return sorted(round(float(r["value"]), 3) for r in rows)


def test_prometheus_alert_becomes_a_completed_query_linked_back(
    cluster: Any, api: Api, crds: None, node: Any, namespaces: Any, s3: str,
    s3_lake: tuple[str, Path], operator_env: dict[str, str], tmp_path: Path,
) -> None:  # fmt: skip
    from devset import oracle  # noqa: PLC0415 (bench/ joins sys.path in the e2e conftest)

    ns = namespaces("t-a-")
    port = free_port()
    receiver = f"http://127.0.0.1:{port}"
    with Sink() as sink:
        env = {**operator_env,
               "ODA_OPERATOR_ALERTS_PORT": str(port), "ODA_OPERATOR_ALERTS_HOST": "127.0.0.1",
               "ODA_OPERATOR_ALERT_TEMPLATES": str(TEMPLATES),
               "ODA_OPERATOR_ALERTS_NAMESPACE": ns, "ODA_OPERATOR_ALERTS_USER": "oncall",
               "ODA_OPERATOR_ALERTS_WEBHOOK": sink.url}  # fmt: skip
        with operator_in_process(env, ns):
            wait_for(lambda: _receiver_up(f"{receiver}/healthz"), timeout=120,
                     what="the operator's alert receiver")  # fmt: skip
            rules = [
                {"alert": "NodeHighInletTemperature", "expr": "vector(1)", "for": "0s",
                 "labels": {"node": "900", "severity": "warning"}},
                {"alert": "DiskFull", "expr": "vector(1)", "for": "0s",
                 "labels": {"node": "901"}},  # no template: acknowledged, nothing created
            ]  # fmt: skip
            fired_at = datetime.now(UTC)
            with alertmanager(tmp_path, f"{receiver}/alerts") as am, \
                    prometheus(tmp_path, am, rules):  # fmt: skip
                (aq,) = wait_for(lambda: _alert_queries(api, ns), timeout=180,
                                 what="an AnalystQuery made from the Prometheus alert")  # fmt: skip
                name = aq["metadata"]["name"]
                done = wait_for(lambda: _finished_and_linked(api, ns, name), timeout=600,
                                what=f"{name} finished and its answer linked", every=1)  # fmt: skip
                # Alertmanager and Prometheus kept sending meanwhile: still one query
                assert [q["metadata"]["name"] for q in _alert_queries(api, ns)] == [name]

            spec, status, ann = done["spec"], done["status"], done["metadata"]["annotations"]
            assert status["phase"] == "Completed", status.get("message")
            assert ann[ANN_ALERT_NAME] == "NodeHighInletTemperature"
            assert spec["user"] == "oncall"
            assert spec["question"].startswith("Retrieve the inlet temperature of node 900 from [")
            assert "node 900" in status["understoodAs"]
            assert "inlet temperature" in status["understoodAs"]
            # the window ends when the webhook arrived, a few seconds after the rule fired
            reference = datetime.fromisoformat(spec["referenceTime"].replace("Z", "+00:00"))
            assert 0 <= (reference - fired_at).total_seconds() < 600
            assert "no data" in status["answer"]  # the lake holds 2022; honest, not zero
            assert ann[ANN_ANSWER] == status["answer"][:1000]
            posted = [b for b in sink.bodies if b["query"]["name"] == name]
            assert len(posted) == 1 and posted[0]["phase"] == "Completed"
            assert posted[0]["alertname"] == "NodeHighInletTemperature"

            # An alert as Alertmanager posts it, for a window the lake holds (07:30–09:00 UTC).
            # node 904: the e2e tests share one graph store; no other test builds this graph
            alert = {"status": "firing", "labels": {"alertname": "NodeHighInletTemperature",
                                                    "node": "904"},
                     "annotations": {}, "startsAt": "2022-06-01T08:30:00Z",
                     "endsAt": "2022-06-01T09:00:00Z", "generatorURL": "http://prom/x",
                     "fingerprint": "0123456789abcdef"}  # fmt: skip
            payload = {"version": "4", "status": "firing", "receiver": "oda", "alerts": [alert]}
            first = httpx.post(f"{receiver}/alerts", json=payload, timeout=30).json()
            (made,) = first["created"]
            again = httpx.post(f"{receiver}/alerts", json=payload, timeout=30).json()
            assert again["created"] == [] and again["duplicate"] == [made]
            past = wait_for(lambda: _finished_and_linked(api, ns, made), timeout=600,
                            what=f"{made} finished and its answer linked", every=1)  # fmt: skip
    status = past["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert past["metadata"]["annotations"][ANN_ANSWER_URI] == status["answerUri"]
    csv_uri = next(u for u in status["artifacts"] if u.endswith("/result.csv"))
    want = oracle.series(s3_lake[1], "ipmi", "ambient", oracle.utc("2022-06-01T07:30:00Z"),
                         oracle.utc("2022-06-01T09:00:00Z"), nodes=[904])  # fmt: skip
    assert len(want) > 0
    assert _result_values(s3, csv_uri) == sorted(round(v, 3) for v in want["value"].to_list())
