"""The Kubernetes client (controller/kube.py) on the official ``kubernetes_asyncio`` library,
against a small stand-in API server: what it sends (credentials, field manager, patch types),
how the server's answers come back (adopting what exists, a 404 as None, refusals as KubeError
with the server's sentence), and where the library would behave otherwise than the client it
replaced (``$KUBECONFIG`` read at import, a missing or empty file). The real API server:
tests/integration/operator/test_kube_apiserver.py."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from oda_analyst.controller.kube import FIELD_MANAGER, Kube, KubeError
from oda_analyst.controller.login import login
from oda_analyst.errors import ConfigError

TOKEN = "t0ken"


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))  # fmt: skip
    return path


def _status(code: int, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "status": "Failure", "message": message,
                              "code": code}, status=code)  # fmt: skip


def _stand_in(seen: list[dict[str, Any]]) -> web.Application:
    """What an API server answers for the requests below; each request recorded in ``seen``."""
    existing = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "old", "namespace": "ns", "uid": "u-old"}}  # fmt: skip

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen.append({"method": request.method, "path": request.path,
                     "query": dict(request.query), "auth": request.headers.get("Authorization"),
                     "type": request.headers.get("Content-Type"),
                     "body": json.loads(body) if body else None})  # fmt: skip
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized")
        key = (request.method, request.path)
        if key == ("GET", "/api/v1"):
            return web.json_response({"kind": "APIResourceList", "resources": [
                {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
                {"name": "pods", "kind": "Pod", "namespaced": True},
                {"name": "pods/status", "kind": "Pod", "namespaced": True},
            ]})  # fmt: skip
        if key == ("POST", "/api/v1/namespaces/ns/configmaps"):
            obj = json.loads(body)
            if obj["metadata"]["name"] == "old":
                return _status(409, 'configmaps "old" already exists')
            if obj["metadata"]["name"] == "bad":
                return _status(422, 'ConfigMap "bad" is invalid: data[x y]: Invalid value')
            return web.json_response({**obj, "metadata": {**obj["metadata"], "uid": "u1"}},
                                     status=201)  # fmt: skip
        if key == ("GET", "/api/v1/namespaces/ns/configmaps/old"):
            return web.json_response(existing)
        if key == ("GET", "/api/v1/namespaces/ns/pods/secret"):
            return _status(403, 'pods "secret" is forbidden: User "u" cannot get resource')
        if request.method == "PATCH" and request.path.startswith("/api/v1/namespaces/ns/"):
            return web.json_response({"patched": json.loads(body)})
        if key == ("GET", "/api/v1/namespaces/ns/configmaps"):
            return web.json_response({"kind": "ConfigMapList", "items": [existing]})
        if request.path == "/api/v1/namespaces/ns/pods/broken":
            return web.Response(status=500, text="etcd is down")
        return _status(404, "not found")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def _served(scenario: Callable[[str, list[dict[str, Any]]], Awaitable[None]]) -> None:
    async def run() -> None:
        seen: list[dict[str, Any]] = []
        runner = web.AppRunner(_stand_in(seen))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            await scenario(f"http://127.0.0.1:{port}", seen)
        finally:
            await runner.cleanup()

    asyncio.run(run())


def test_requests_carry_the_token_and_the_field_manager_and_answers_keep_their_meaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    async def scenario(server: str, seen: list[dict[str, Any]]) -> None:
        # set after the library was imported: it reads $KUBECONFIG once, at import; we do not
        monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "config", server)))
        kube = Kube.from_environment()
        try:
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "new", "namespace": "ns"}, "data": {"a": "1"}}  # fmt: skip
            made = await kube.create(cm)
            assert made["metadata"]["uid"] == "u1"
            post = next(r for r in seen if r["method"] == "POST")
            assert post["auth"] == f"Bearer {TOKEN}" and post["body"] == cm
            assert post["query"] == {"fieldManager": FIELD_MANAGER}
            # one that exists already is adopted as it is (a restarted operator)
            old = await kube.create({**cm, "metadata": {"name": "old", "namespace": "ns"}})
            assert old["metadata"]["uid"] == "u-old"
            assert [r["path"] for r in seen].count("/api/v1") == 1  # discovery, once
            assert await kube.get("/api/v1/namespaces/ns/configmaps/gone") is None
            assert [o["metadata"]["name"] for o in
                    await kube.list("/api/v1/namespaces/ns/configmaps", labels={"a": "b"})
                    ] == ["old"]  # fmt: skip
            assert seen[-1]["query"] == {"labelSelector": "a=b"}

            applied = await kube.apply(cm)
            assert applied == {"patched": cm}
            assert seen[-1]["path"] == "/api/v1/namespaces/ns/configmaps/new"
            assert seen[-1]["type"] == "application/apply-patch+yaml"
            assert seen[-1]["query"] == {"fieldManager": FIELD_MANAGER, "force": "true"}
            await kube.patch("/api/v1/namespaces/ns/pods/p/status", {"status": {"x": 1}})
            assert seen[-1]["type"] == "application/merge-patch+json"
            assert seen[-1]["query"] == {"fieldManager": FIELD_MANAGER}

            await kube.delete("/api/v1/namespaces/ns/pods/gone")  # already gone: fine
            assert seen[-1]["body"] == {"propagationPolicy": "Background"}
        finally:
            await kube.close()

    _served(scenario)


def test_refusals_are_kube_errors_with_the_servers_own_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    async def scenario(server: str, _seen: list[dict[str, Any]]) -> None:
        monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "config", server)))
        kube = Kube.from_environment()
        try:
            with pytest.raises(KubeError) as forbidden:
                await kube.get("/api/v1/namespaces/ns/pods/secret")
            assert forbidden.value.status == 403
            assert forbidden.value.message == ('GET /api/v1/namespaces/ns/pods/secret: HTTP 403: '
                                               'pods "secret" is forbidden: User "u" cannot get '
                                               'resource')  # fmt: skip
            assert "RBAC" in (forbidden.value.hint or "")
            with pytest.raises(KubeError, match=r"HTTP 422: ConfigMap \"bad\" is invalid") as bad:
                await kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "bad", "namespace": "ns"}})  # fmt: skip
            assert bad.value.status == 422
            with pytest.raises(KubeError, match="HTTP 500: etcd is down"):
                await kube.delete("/api/v1/namespaces/ns/pods/broken")
            with pytest.raises(KubeError, match="serves no Widget in v1") as kind:
                await kube.create({"apiVersion": "v1", "kind": "Widget",
                                   "metadata": {"name": "w", "namespace": "ns"}})  # fmt: skip
            assert kind.value.status == 404
        finally:
            await kube.close()

    _served(scenario)


def test_an_api_server_that_does_not_answer_is_a_kube_error_without_a_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = _kubeconfig(tmp_path / "config", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("KUBECONFIG", str(path))

    async def scenario() -> None:
        kube = Kube.from_environment()
        try:
            with pytest.raises(KubeError, match="did not answer GET /api/v1/nodes") as down:
                await kube.get("/api/v1/nodes")
            assert down.value.status is None
        finally:
            await kube.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("text", "said", "hint"),
    [
        (None, "no such file", "KUBECONFIG"),  # the library: "Expected key current-context"
        ("", "no usable current context", "use-context"),  # the library: a TypeError
        ("apiVersion: v1\nclusters: []\n", "no usable current context", "use-context"),
        ("current-context: gone\ncontexts: []\n", "no usable current context", "use-context"),
    ],
)
def test_a_kubeconfig_that_cannot_be_used_is_a_config_error_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, said: str, hint: str
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "config"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv("KUBECONFIG", str(path))
    with pytest.raises(ConfigError, match=said) as err:
        Kube.from_environment()
    assert str(path) in err.value.message and hint in (err.value.hint or "")


def test_kopf_logs_in_from_the_same_kubeconfig_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With kubernetes_asyncio installed kopf would log in through the library's defaults, which
    read $KUBECONFIG once, at import; the operator's own login handler reads it as it is now."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "config", "https://k:6443")))
    info = asyncio.run(login())
    assert (info.server, info.scheme, info.token) == ("https://k:6443", "Bearer", TOKEN)
    assert info.insecure is False
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no such file"):
        asyncio.run(login())
