"""A small async Kubernetes API client (httpx): create, get, list, patch, delete.

kopf watches and posts events itself; this is for the objects the operator creates and the
status it writes. Credentials: in a pod, the service account's token and CA; elsewhere the
current context of ``$KUBECONFIG`` (or ``~/.kube/config``), token or client certificates.
``create`` is idempotent by name (an object that exists already is returned as it is), which
is what makes a restarted operator adopt what it made before instead of duplicating it.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from oda_analyst.errors import ConfigError, OdaError

_SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(OdaError):
    """The API server refused a request or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, "check the operator's RBAC (crds/rbac.yaml) and the API server")
        self.status = status


@dataclass(frozen=True)
class Credentials:
    server: str
    token: str | None = None
    ca_file: str | None = None
    cert: tuple[str, str] | None = None
    insecure: bool = False


def _materialise(data_b64: str, suffix: str) -> str:
    handle, path = tempfile.mkstemp(prefix="oda-kube-", suffix=suffix)
    with os.fdopen(handle, "wb") as fh:
        fh.write(base64.b64decode(data_b64))
    return path


def load_credentials() -> Credentials:
    """In-cluster first, then the kubeconfig's current context."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if host and (_SA / "token").exists():
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return Credentials(f"https://{host}:{port}", token=(_SA / "token").read_text().strip(),
                           ca_file=str(_SA / "ca.crt"))  # fmt: skip
    path = Path(os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")))
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"cannot read the kubeconfig {path}: {exc}",
            hint="set KUBECONFIG, or run the operator in the cluster",
        ) from None
    try:
        ctx_name = config["current-context"]
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
    except (KeyError, StopIteration, TypeError):
        raise ConfigError(f"the kubeconfig {path} has no usable current context",
                          hint="kubectl config use-context NAME") from None  # fmt: skip
    ca = cluster.get("certificate-authority")
    if cluster.get("certificate-authority-data"):
        ca = _materialise(cluster["certificate-authority-data"], ".crt")
    cert = None
    if user.get("client-certificate-data") and user.get("client-key-data"):
        cert = (_materialise(user["client-certificate-data"], ".crt"),
                _materialise(user["client-key-data"], ".key"))  # fmt: skip
    elif user.get("client-certificate") and user.get("client-key"):
        cert = (user["client-certificate"], user["client-key"])
    return Credentials(cluster["server"], token=user.get("token"), ca_file=ca, cert=cert,
                       insecure=bool(cluster.get("insecure-skip-tls-verify")))  # fmt: skip


def path_of(api_version: str, plural: str, namespace: str | None, name: str | None = None,
            sub: str | None = None) -> str:  # fmt: skip
    """The REST path of a collection or an object (``sub``: status, binding …)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


_PLURALS = {"Pod": "pods", "ConfigMap": "configmaps", "Job": "jobs", "Event": "events",
            "NetworkPolicy": "networkpolicies", "Secret": "secrets", "Node": "nodes",
            "AnalystQuery": "analystqueries", "VKGCache": "vkgcaches",
            "CustomResourceDefinition": "customresourcedefinitions",
            "Namespace": "namespaces"}  # fmt: skip


def path_for(obj: dict[str, Any], *, with_name: bool = False) -> str:
    meta = obj["metadata"]
    return path_of(obj["apiVersion"], _PLURALS[obj["kind"]], meta.get("namespace"),
                   meta["name"] if with_name else None)  # fmt: skip


class Kube:
    """Async client; one per operator process (``await kube.close()`` at the end)."""

    def __init__(self, creds: Credentials, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {creds.token}"} if creds.token else {}
        verify: Any = False if creds.insecure else (creds.ca_file or True)
        self._http = httpx.AsyncClient(base_url=creds.server, headers=headers, verify=verify,
                                       cert=creds.cert, timeout=timeout)  # fmt: skip

    @classmethod
    def from_environment(cls) -> Kube:
        return cls(load_credentials())

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, *, json: Any = None,
                    params: dict[str, str] | None = None,
                    content_type: str | None = None) -> httpx.Response:  # fmt: skip
        headers = {"Content-Type": content_type} if content_type else None
        try:
            return await self._http.request(method, path, json=json, params=params,
                                            headers=headers)  # fmt: skip
        except httpx.HTTPError as exc:
            raise KubeError(f"the API server did not answer {method} {path}: {exc}") from None

    @staticmethod
    def _check(response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code >= 300:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise KubeError(f"{what}: HTTP {response.status_code}: {message}",
                            status=response.status_code)  # fmt: skip
        body: dict[str, Any] = response.json()
        return body

    async def get(self, path: str) -> dict[str, Any] | None:
        response = await self._send("GET", path)
        if response.status_code == 404:
            return None
        return self._check(response, f"GET {path}")

    async def list(self, path: str, *, labels: dict[str, str] | None = None
                   ) -> list[dict[str, Any]]:  # fmt: skip
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels \
            else None  # fmt: skip
        body = self._check(await self._send("GET", path, params=params), f"LIST {path}")
        items: list[dict[str, Any]] = body.get("items", [])
        return items

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``; when one of that name exists already, return the existing one."""
        path = path_for(obj)
        response = await self._send("POST", path, json=obj)
        if response.status_code == 409:
            found = await self.get(path_for(obj, with_name=True))
            if found is not None:
                return found
        return self._check(response, f"create {obj['kind']} {obj['metadata']['name']}")

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (works for custom resources and their status alike)."""
        response = await self._send("PATCH", path, json=body,
                                    content_type="application/merge-patch+json")  # fmt: skip
        return self._check(response, f"PATCH {path}")

    async def delete(self, path: str, *, background: bool = True) -> None:
        body = {"propagationPolicy": "Background" if background else "Foreground"}
        response = await self._send("DELETE", path, json=body)
        if response.status_code not in (404, 409):
            self._check(response, f"DELETE {path}")
