"""The pipeline port over HTTP: the operator's client of the analyst Deployment's service.

The analyst (``oda-analyst serve --pipeline-port``, ``oda_analyst.pipeline.http``) runs stage 1,
retrieval, the coordinator and the code agent; the operator only sends the query's question and
what it knows of it, and files what comes back. Every call is a coroutine on kopf's loop, so
queries wait on the analyst side by side. An analyst that cannot be reached, or says it is full
(503), is ``AnalystUnavailableError``: the reconcile waits and asks again, the query is not
failed for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from oda_analyst.controller import port_wire as wire
from oda_analyst.controller.port import (
    Analysis,
    Ask,
    GraphInfo,
    ModelEndpoint,
    Retrieved,
    Understood,
)
from oda_analyst.errors import OdaError

T = TypeVar("T")
_HINT = "kubectl get pods -l app.kubernetes.io/component=analyst; the query goes on once it answers"


class AnalystUnavailableError(OdaError):
    """The analyst did not take the call (unreachable, starting, or full): ask again later."""

    code = "analyst_unavailable"

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message, _HINT)
        self.retry_after_s = retry_after_s


class AnalystCallError(OdaError):
    """The analyst took the call and failed it (its message says why)."""

    code = "analyst_failed"


class HttpPipeline:
    """``Pipeline`` by HTTP to ``base_url`` (the analyst's Service)."""

    def __init__(self, base_url: str, *, timeout_s: float = 3600.0,
                 headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:  # fmt: skip
        # A retrieval with charts runs for minutes: the read timeout is the query's, the
        # connect timeout short (a missing analyst is said at once).
        timeout = httpx.Timeout(timeout_s, connect=10.0)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
        self.base_url = base_url.rstrip("/")
        # headers: the release's token, which the analyst asks of every call but /healthz
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, limits=limits,
                                       headers=dict(headers or {}),
                                       transport=transport)  # fmt: skip

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = await self._http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise AnalystUnavailableError(
                f"the analyst at {self.base_url} cannot be reached: {type(exc).__name__}"
                + (f" ({exc})" if str(exc) else "")
            ) from None
        if response.status_code in (502, 503, 504):
            retry = response.headers.get("retry-after")
            raise AnalystUnavailableError(
                f"the analyst at {self.base_url} is busy or starting (HTTP "
                f"{response.status_code}): {_message(response)}",
                retry_after_s=float(retry) if retry and retry.isdigit() else None,
            )
        if response.status_code == 404 and path.startswith("/v1/graphs/"):
            return None
        if response.status_code >= 300:
            raise AnalystCallError(
                f"the analyst refused {path} (HTTP {response.status_code}): {_message(response)}",
                _hint(response) or "see the analyst's log for the request",
            )
        return response.json() if response.content else None

    async def understand(self, question: str, *, user: str, as_of: datetime,
                         answers: Sequence[tuple[str, str]]) -> Understood:  # fmt: skip
        body = wire.understand_request(question, user, as_of, list(answers))
        return _read(wire.understood_of, await self._send("POST", "/v1/understand", body))

    async def retrieve(self, question: str, *, user: str, as_of: datetime,
                       answers: Sequence[str], ask: Ask | None = None) -> Retrieved:  # fmt: skip
        body = wire.retrieve_request(question, user, as_of, list(answers), ask or Ask())
        return _read(wire.retrieved_of, await self._send("POST", "/v1/retrieve", body))

    async def check_model(self, model: ModelEndpoint) -> str | None:
        found = await self._send("POST", "/v1/check-model", wire.model_json(model))
        problem = (found or {}).get("problem")
        return str(problem) if problem else None

    async def analyse(self, analysis: Analysis) -> dict[str, bytes]:
        found = await self._send("POST", "/v1/analyse", wire.analysis_json(analysis))
        return _read(wire.files_of, found)

    async def graph(self, key: str) -> GraphInfo | None:
        found = await self._send("GET", f"/v1/graphs/{quote(key, safe='')}")
        return None if found is None else _read(wire.graph_of, found)

    async def drop_graph(self, key: str) -> None:
        await self._send("DELETE", f"/v1/graphs/{quote(key, safe='')}")


def _read(decode: Callable[[Any], T], body: Any) -> T:
    """The analyst's answer as a value; one the operator cannot read is the analyst's failure
    (a version of another release, say), said as such."""
    try:
        with wire.reading():
            return decode(body)
    except wire.WireError as err:
        raise AnalystCallError(
            f"the analyst's answer cannot be read: {err}",
            "run the operator and the analyst of the same release",
        ) from None


def _error(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _message(response: httpx.Response) -> str:
    return str(_error(response).get("message") or response.text[:300] or response.reason_phrase)


def _hint(response: httpx.Response) -> str | None:
    hint = _error(response).get("hint")
    return str(hint) if hint else None
