"""controller/kube.py (the official ``kubernetes_asyncio`` client) on the real API server (1.20):
creating is idempotent by name and adopts what exists as it is; a server-side apply records the
field manager ``oda-analyst`` and takes back a field another manager changed since (it forces:
the operator's own objects); a merge patch of the status leaves the rest;
the custom resources take a partial apply (only annotations, as alert_link.py sends)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kube_cluster import Cluster
from kube_fixtures import Api
from oda_analyst.controller import names
from oda_analyst.controller.kube import FIELD_MANAGER, Kube, KubeError, path_of

pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def ns(cluster: Cluster) -> Iterator[str]:
    name = f"t-kube-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields") or []}


def test_create_adopts_apply_owns_patch_merges(
    crds: None, cluster: Cluster, api: Api, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "inputs", "namespace": ns}, "data": {"a": "1"}}  # fmt: skip
    query = {"apiVersion": names.API_VERSION, "kind": names.QUERY_KIND,
             "metadata": {"name": "q", "namespace": ns},
             "spec": {"question": "total power of node 900", "user": "alice"}}  # fmt: skip
    q_path = path_of(names.API_VERSION, names.QUERY_PLURAL, ns, "q")

    async def scenario() -> None:
        kube = Kube.from_environment()
        try:
            made = await kube.create(cm)
            assert made["metadata"]["uid"] and made["data"] == {"a": "1"}
            assert _managers(made) == {(FIELD_MANAGER, "Update")}
            # a second create (a restarted operator) adopts it as it is: nothing overwritten
            again = await kube.create({**cm, "data": {"a": "2"}})
            assert again["metadata"]["uid"] == made["metadata"]["uid"]
            assert again["data"] == {"a": "1"}

            # server-side apply: the fields given are ours, set as given
            applied = await kube.apply({**cm, "data": {"a": "3", "b": "4"}})
            assert applied["data"] == {"a": "3", "b": "4"}
            assert (FIELD_MANAGER, "Apply") in _managers(applied)
            # a field another manager changed since (kubectl edit) is taken back, not refused
            edit = {"Content-Type": "application/merge-patch+json"}
            api.http.patch(f"/api/v1/namespaces/{ns}/configmaps/inputs",
                           params={"fieldManager": "kubectl-edit"}, headers=edit,
                           json={"data": {"a": "x"}}).raise_for_status()  # fmt: skip
            applied = await kube.apply({**cm, "data": {"a": "3", "b": "4"}})
            assert applied["data"] == {"a": "3", "b": "4"}

            # a custom resource takes a partial apply: only annotations (alert_link.py)
            await kube.create(query)
            ann = {"oda-analyst.dev/x": "1"}
            linked = await kube.apply({"apiVersion": names.API_VERSION, "kind": names.QUERY_KIND,
                                       "metadata": {"name": "q", "namespace": ns,
                                                    "annotations": ann}})  # fmt: skip
            assert linked["metadata"]["annotations"] == ann
            assert linked["spec"]["question"] == "total power of node 900"
            # the status is merged, the spec and the annotations left as they are
            await kube.patch(q_path + "/status", {"status": {"phase": "Pending"}})
            await kube.patch(q_path + "/status", {"status": {"stage": "input-validation"}})
            got = await kube.get(q_path)
            assert got is not None and got["status"]["phase"] == "Pending"
            assert got["status"]["stage"] == "input-validation"
            assert got["metadata"]["annotations"] == ann

            with pytest.raises(KubeError) as bad:  # the server's own sentence, typed
                await kube.create({**query, "metadata": {"name": "bad", "namespace": ns},
                                   "spec": {"user": "alice"}})  # fmt: skip
            assert bad.value.status == 422 and "question" in bad.value.message
            await kube.delete(q_path)
            await kube.delete(q_path)  # gone already: fine
            assert await kube.get(q_path) is None
        finally:
            await kube.close()

    asyncio.run(scenario())
    stored = api.get(f"/api/v1/namespaces/{ns}/configmaps/inputs")
    assert stored is not None and stored["data"] == {"a": "3", "b": "4"}
