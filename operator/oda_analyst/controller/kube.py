"""The operator's and the analyst's Kubernetes API client: the official ``kubernetes_asyncio``
(the asyncio port of ``kubernetes``: kopf's handlers and the analyst's server are coroutines on
one event loop, which the blocking client would stall), configured by the library. In a pod, the
service account (its token read again as it rotates); elsewhere the current context of
``$KUBECONFIG`` (or ``~/.kube/config``): tokens, client certificates, exec plugins.

kopf watches and posts events itself; this is for the objects the operator creates and the
status it writes, addressed by their REST path (``path_of``) through the library's ``ApiClient``,
so a new kind, built in or custom, needs no code here. Every write names the field manager
``oda-analyst``:

- ``create`` is idempotent by name: an object that exists already is returned as it is. That is
  what makes a restarted operator adopt what it made before instead of duplicating it, keeps a
  shared VKGCache its first owner and an answered AnalystQuery its spec, and needs no more than
  the ``create`` verb the RBAC grants on pods, config maps, policies and jobs. (A server-side
  apply would overwrite an existing object, a pod's immutable spec would refuse it, and it
  needs ``patch``.)
- ``apply`` is a server-side apply: the fields given are this manager's, set as given.
- ``patch`` is a JSON merge patch: part of an object or of its status, the rest left as it is.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.incluster_config import SERVICE_TOKEN_FILENAME
from kubernetes_asyncio.stream import WsApiClient

from oda_analyst.errors import ConfigError, OdaError

FIELD_MANAGER = "oda-analyst"
STDIN, STDOUT, STDERR, ERROR = 0, 1, 2, 3  # the channels of v4.channel.k8s.io
EXEC_CHUNK = 1 << 16  # bytes of stdin per websocket message
_KUBECONFIG_HINT = "set KUBECONFIG, or run the operator in the cluster"


class KubeError(OdaError):
    """The API server refused a request or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, "check the operator's RBAC (crds/rbac.yaml) and the API server")
        self.status = status


def kubeconfig_path() -> Path:
    """``$KUBECONFIG`` as it is now (the library reads it once, when it is imported)."""
    return Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")


def _group_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def path_of(api_version: str, plural: str, namespace: str | None, name: str | None = None,
            sub: str | None = None) -> str:  # fmt: skip
    """The REST path of a collection or an object (``sub``: status, binding …)."""
    parts = [_group_path(api_version)]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


def credentials_source() -> Path | None:
    """None in a pod with a service account, else the kubeconfig (its current context checked
    now: a ConfigError at start rather than at the first call)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and Path(SERVICE_TOKEN_FILENAME).exists():
        return None
    path = kubeconfig_path()
    if not path.is_file():  # the library's word for it is "Expected key current-context"
        raise ConfigError(f"cannot read the kubeconfig {path}: no such file",
                          hint=_KUBECONFIG_HINT)  # fmt: skip
    try:
        _contexts, current = config.list_kube_config_contexts(str(path))
    except (config.ConfigException, OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"the kubeconfig {path} has no usable current context: {exc}",
                          hint="kubectl config use-context NAME") from None  # fmt: skip
    if not current:
        raise ConfigError(f"the kubeconfig {path} has no current context",
                          hint="kubectl config use-context NAME")  # fmt: skip
    return path


async def load_configuration(kubeconfig: Path | None) -> Configuration:
    """The library's configuration from ``kubeconfig`` (None: the pod's service account)."""
    configuration = Configuration()
    try:
        if kubeconfig is None:
            load = config.load_incluster_config
            load(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            await config.load_kube_config(config_file=str(kubeconfig),
                                          client_configuration=configuration,
                                          persist_config=False)  # fmt: skip
    except (config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = kubeconfig or "the pod's service account"
        raise KubeError(f"cannot use the credentials of {where}: {exc}") from None
    return configuration


@dataclass(frozen=True)
class Exec:
    """What one command run by exec in a container said: its output, its exit code (None when
    the API server's status gave none) and that status's message."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    message: str = ""


def exec_status(raw: bytes) -> tuple[int | None, str]:
    """The exit code and message of the Status the error channel carries at the end (pure)."""
    try:
        status = json.loads(raw or b"{}")
    except ValueError:
        return None, raw.decode("utf-8", "replace")
    if not isinstance(status, dict) or status.get("status") == "Success":
        return (0, "") if isinstance(status, dict) else (None, str(status))
    message = str(status.get("message") or "")
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), message
            except (TypeError, ValueError):
                break
    return None, message


class Kube:
    """Async client; one per operator process (``await kube.close()`` at the end). The library
    configures it at the first call: ``kubeconfig`` None is the pod's service account."""

    def __init__(self, *, kubeconfig: Path | None = None, timeout: float = 30.0) -> None:
        self._kubeconfig = kubeconfig
        self._timeout = timeout
        self._client: ApiClient | None = None
        self._lock = asyncio.Lock()
        self._plurals: dict[tuple[str, str], str] = {}

    @classmethod
    def from_environment(cls) -> Kube:
        """In-cluster first, then the kubeconfig's current context (checked here, at start)."""
        return cls(kubeconfig=credentials_source())

    async def _api(self) -> ApiClient:
        async with self._lock:
            if self._client is None:
                self._client = ApiClient(await load_configuration(self._kubeconfig))
            return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _call(self, method: str, path: str, what: str, *, body: Any = None,
                    query: list[tuple[str, str]] | None = None,
                    content_type: str | None = None) -> Any:  # fmt: skip
        api = await self._api()
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            return await api.call_api(path, method, query_params=query or [],
                                      header_params=headers, body=body,
                                      response_types_map={200: "object", 201: "object",
                                                          202: "object"},
                                      auth_settings=["BearerToken"],
                                      _return_http_data_only=True,
                                      _request_timeout=self._timeout)  # fmt: skip
        except ApiException as exc:
            raise KubeError(f"{what}: HTTP {exc.status}: {_message(exc)}",
                            status=exc.status) from None  # fmt: skip
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeError(f"the API server did not answer {what}: "
                            f"{exc or type(exc).__name__}") from None  # fmt: skip

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self._call("GET", path, f"GET {path}")
        except KubeError as err:
            if err.status == 404:
                return None
            raise
        return found

    async def list(self, path: str, *, labels: dict[str, str] | None = None
                   ) -> list[dict[str, Any]]:  # fmt: skip
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in labels.items()))] \
            if labels else None  # fmt: skip
        body = await self._call("GET", path, f"LIST {path}", query=query)
        items: list[dict[str, Any]] = body.get("items") or []
        return items

    async def _path(self, obj: dict[str, Any], *, with_name: bool = False) -> str:
        """An object's collection (or its own) path; the kind's plural from the API server's
        discovery, once per group version."""
        api_version, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
        if (api_version, kind) not in self._plurals:
            found = await self._call("GET", _group_path(api_version), f"discover {api_version}")
            for r in found.get("resources") or []:
                if "/" not in r["name"]:
                    self._plurals[api_version, r["kind"]] = r["name"]
        plural = self._plurals.get((api_version, kind))
        if plural is None:
            raise KubeError(f"the API server serves no {kind} in {api_version}", status=404)
        return path_of(api_version, plural, meta.get("namespace"),
                       meta["name"] if with_name else None)  # fmt: skip

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``; when one of that name exists already, return the existing one."""
        what = f"create {obj['kind']} {obj['metadata']['name']}"
        try:
            made: dict[str, Any] = await self._call(
                "POST", await self._path(obj), what, body=obj,
                query=[("fieldManager", FIELD_MANAGER)],
            )  # fmt: skip
        except KubeError as err:
            if err.status != 409:
                raise
            found = await self.get(await self._path(obj, with_name=True))
            if found is None:  # deleted meanwhile
                raise
            return found
        return made

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply: the fields of ``obj`` become this manager's, set as given (taken
        over from another manager that set them: a controller's own objects)."""
        applied: dict[str, Any] = await self._call(
            "PATCH", await self._path(obj, with_name=True),
            f"apply {obj['kind']} {obj['metadata']['name']}", body=obj,
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            content_type="application/apply-patch+yaml",
        )  # fmt: skip
        return applied

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (works for custom resources and their status alike)."""
        patched: dict[str, Any] = await self._call(
            "PATCH", path, f"PATCH {path}", body=body,
            query=[("fieldManager", FIELD_MANAGER)],
            content_type="application/merge-patch+json",
        )  # fmt: skip
        return patched

    async def exec(self, namespace: str, pod: str, container: str, command: Sequence[str], *,
                   stdin: bytes | None = None, timeout: float = 120.0) -> Exec:  # fmt: skip
        """Run ``command`` in ``container`` of ``pod`` through the API server (the pods/exec
        subresource over a websocket, v4.channel.k8s.io, as ``kubectl exec`` and ``kubectl
        cp`` do): ``stdin`` is sent and never closed (the protocol cannot say end of input:
        the command must know its length), stdout and stderr are read to the end."""
        configuration = (await self._api()).configuration
        query: list[tuple[str, Any]] = [("container", container), ("command", list(command)),
                                        ("stdout", "true"), ("stderr", "true"),
                                        ("stdin", "true" if stdin is not None else "false"),
                                        ("tty", "false")]  # fmt: skip
        out, err, status = bytearray(), bytearray(), b""
        what = f"exec in {namespace}/{pod}/{container}"
        ws_api = WsApiClient(configuration)
        try:
            connect = await ws_api.call_api(
                path_of("v1", "pods", namespace, pod, "exec"), "GET", query_params=query,
                header_params={}, auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=timeout,
            )  # fmt: skip
            async with asyncio.timeout(timeout), connect as ws:
                if stdin:
                    for at in range(0, len(stdin), EXEC_CHUNK):
                        await ws.send_bytes(bytes([STDIN]) + stdin[at : at + EXEC_CHUNK])
                async for msg in ws:
                    if msg.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                        break
                    data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
                    if not data:
                        continue
                    channel, body = data[0], data[1:]
                    if channel == STDOUT:
                        out += body
                    elif channel == STDERR:
                        err += body
                    elif channel == ERROR:
                        status += body
        except aiohttp.WSServerHandshakeError as exc:
            raise KubeError(f"{what}: HTTP {exc.status}: {exc.message}",
                            status=exc.status) from None  # fmt: skip
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeError(f"the API server did not answer {what}: "
                            f"{exc or type(exc).__name__}") from None  # fmt: skip
        finally:
            await ws_api.close()
        code, message = exec_status(bytes(status))
        return Exec(bytes(out), bytes(err), code, message)

    async def delete(self, path: str, *, background: bool = True) -> None:
        body = {"propagationPolicy": "Background" if background else "Foreground"}
        try:
            await self._call("DELETE", path, f"DELETE {path}", body=body)
        except KubeError as err:
            if err.status not in (404, 409):
                raise


def _message(exc: ApiException) -> str:
    """The API server's own sentence (its Status object's message), else what it sent."""
    try:
        status = json.loads(exc.body or "")
    except (ValueError, TypeError):
        status = None
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return str(exc.body or exc.reason or "no answer")
