"""The pipeline port's values as JSON, the one format both ends of the HTTP port read.

Pure: the operator's client (``port_http``) and the analyst's server
(``oda_analyst.pipeline.http``) both encode and decode here, so the two cannot drift. Bytes
travel as base64, times as ISO 8601.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

from oda_analyst.controller.port import (
    Analysis,
    Ask,
    GraphInfo,
    GraphNeed,
    ModelEndpoint,
    Retrieved,
    SandboxScope,
    Understood,
)

Json = dict[str, Any]


class WireError(ValueError):
    """A message of the port that is not what its side expects."""


@contextmanager
def reading() -> Iterator[None]:
    """Reading a message: what goes wrong there is the message's fault (a WireError), never
    taken for an error of the work it asks for."""
    try:
        yield
    except WireError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise WireError(f"{type(exc).__name__}: {exc}") from None


def _field(body: Mapping[str, Any], name: str) -> Any:
    if name not in body:
        raise WireError(f"the message has no {name!r}")
    return body[name]


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- values -----------------------------------------------------------------------------------


def model_json(model: ModelEndpoint | None) -> Json | None:
    return None if model is None else {"baseUrl": model.base_url, "name": model.name}


def model_of(body: Mapping[str, Any] | None) -> ModelEndpoint | None:
    if not body:
        return None
    return ModelEndpoint(str(_field(body, "baseUrl")), str(_field(body, "name")))


def scope_json(scope: SandboxScope | None) -> Json | None:
    if scope is None:
        return None
    return {"query": scope.query, "user": scope.user, "prefix": scope.prefix}


def scope_of(body: Mapping[str, Any] | None) -> SandboxScope | None:
    if not body:
        return None
    return SandboxScope(query=dict(_field(body, "query")), user=str(body["user"]),
                        prefix=str(_field(body, "prefix")))  # fmt: skip


def ask_json(ask: Ask) -> Json:
    return {
        "backend": ask.backend,
        "model": model_json(ask.model),
        "analysis": ask.analysis,
        "sandbox": scope_json(ask.sandbox),
        "key": ask.key,
    }


def ask_of(body: Mapping[str, Any]) -> Ask:
    backend = str(body.get("backend") or "oda")
    if backend not in ("oda", "sota1", "sota2"):
        raise WireError(f"unknown backend {backend!r}")
    scope = scope_of(body.get("sandbox"))
    key = body.get("key")
    return Ask(backend=cast(Any, backend), model=model_of(body.get("model")),
               analysis=bool(body.get("analysis")), sandbox=scope,
               key=str(key) if key else None)  # fmt: skip


def understood_json(u: Understood) -> Json:
    return {
        "outcome": u.outcome, "understoodAs": u.understood_as,
        "graphs": [{"key": g.key, "request": g.request, "lake": g.lake,
                    "fingerprint": g.fingerprint} for g in u.graphs],
        "field": u.field, "question": u.question, "candidates": list(u.candidates),
        "message": u.message, "hint": u.hint, "warnings": list(u.warnings),
    }  # fmt: skip


def understood_of(body: Mapping[str, Any]) -> Understood:
    outcome = _field(body, "outcome")
    if outcome not in ("ready", "clarification", "rejected"):
        raise WireError(f"unknown outcome {outcome!r}")
    graphs = tuple(GraphNeed(key=str(g["key"]), request=dict(g["request"]), lake=str(g["lake"]),
                             fingerprint=str(g["fingerprint"]))
                   for g in body.get("graphs") or [])  # fmt: skip
    return Understood(
        outcome=outcome, understood_as=body.get("understoodAs"), graphs=graphs,
        field=body.get("field"), question=body.get("question"),
        candidates=tuple(body.get("candidates") or ()), message=body.get("message"),
        hint=body.get("hint"), warnings=tuple(body.get("warnings") or ()),
    )  # fmt: skip


def retrieved_json(r: Retrieved) -> Json:
    return {
        "answer": r.answer,
        "table": None if r.table is None else base64.b64encode(r.table).decode(),
        "files": [{"path": p, "data": base64.b64encode(b).decode()} for p, b in r.files],
    }


def retrieved_of(body: Mapping[str, Any]) -> Retrieved:
    table = body.get("table")
    files = tuple((str(f["path"]), base64.b64decode(f["data"])) for f in body.get("files") or [])
    return Retrieved(answer=dict(_field(body, "answer")),
                     table=None if table is None else base64.b64decode(table),
                     files=files)  # fmt: skip


def analysis_json(a: Analysis) -> Json:
    return {"scope": scope_json(a.scope), "script": a.script, "inputs": dict(a.inputs),
            "outputs": list(a.outputs), "key": a.key}  # fmt: skip


def analysis_of(body: Mapping[str, Any]) -> Analysis:
    scope = scope_of(_field(body, "scope"))
    if scope is None:
        raise WireError("an analysis needs the query's sandbox scope")
    inputs, key = _field(body, "inputs"), body.get("key")
    return Analysis(scope=scope, script=str(_field(body, "script")),
                    inputs={str(k): str(v) for k, v in dict(inputs).items()},
                    outputs=tuple(str(o) for o in _field(body, "outputs")),
                    key=str(key) if key else None)  # fmt: skip


def files_json(files: Mapping[str, bytes]) -> Json:
    return {"files": {n: base64.b64encode(b).decode() for n, b in files.items()}}


def files_of(body: Mapping[str, Any]) -> dict[str, bytes]:
    return {str(n): base64.b64decode(d) for n, d in dict(_field(body, "files")).items()}


def graph_json(info: GraphInfo) -> Json:
    return {"key": info.key, "namedGraph": info.named_graph, "triples": info.triples,
            "bytes": info.bytes, "created": info.created.isoformat(),
            "lastAccess": info.last_access.isoformat()}  # fmt: skip


def graph_of(body: Mapping[str, Any]) -> GraphInfo:
    return GraphInfo(key=str(_field(body, "key")), named_graph=str(body["namedGraph"]),
                     triples=int(body["triples"]), bytes=int(body["bytes"]),
                     created=when(body["created"]),
                     last_access=when(body["lastAccess"]))  # fmt: skip


# --- requests ---------------------------------------------------------------------------------


def understand_request(question: str, user: str, as_of: datetime,
                       answers: list[tuple[str, str]]) -> Json:  # fmt: skip
    return {"question": question, "user": user, "asOf": as_of.isoformat(),
            "answers": [{"field": f, "text": t} for f, t in answers]}  # fmt: skip


def retrieve_request(question: str, user: str, as_of: datetime, answers: list[str],
                     ask: Ask) -> Json:  # fmt: skip
    return {"question": question, "user": user, "asOf": as_of.isoformat(),
            "answers": answers, "ask": ask_json(ask)}  # fmt: skip
