"""The web UI's HTTP app (Starlette): sign-in, conversations, the answer stream, artefacts.

``create_app`` takes the coordinator, the users and the history store as arguments, so tests
serve it on loopback with the real coordinator and their own users. A question is answered on
``POST /api/ask`` as a stream of JSON lines: the conversation id, each progress step as the
coordinator reports it, then the answer. Every conversation, message and artefact route reads
the signed-in user from the session and looks the object up *for that user*: another user's id
is answered 404, exactly like an id that does not exist.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from asgi_csrf import asgi_csrf  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starsessions import SessionAutoloadMiddleware, SessionMiddleware, SessionStore

from oda_analyst.errors import AccessDeniedError, OdaError, StoreError
from oda_analyst.webui import answers, pages
from oda_analyst.webui.auth import verify
from oda_analyst.webui.bodies import (
    BadRequestError,
    json_object,
    optional_str,
    optional_time,
    required_str,
)
from oda_analyst.webui.coverage import Coverage
from oda_analyst.webui.guard import RequestGuard, csrf_failed, is_api
from oda_analyst.webui.headers import SecureASGIMiddleware, security_headers
from oda_analyst.webui.oidc import OidcLogin
from oda_analyst.webui.sessions import (
    ExpiringMemoryStore,
    SessionPolicy,
    current_user,
    sign_in,
    sign_out,
)
from oda_analyst.webui.signin import BusyError, SignInGate, SignInLimits
from oda_analyst.webui.store import Feedback, HistoryStore

STATIC = Path(__file__).parent / "static"
log = logging.getLogger(__name__)


class CoordinatorLike(Protocol):
    """What the UI calls on the coordinator (``oda_analyst.coordinator.service.Coordinator``)."""

    async def ask(
        self,
        question: str,
        *,
        user: str,
        as_of: datetime | None = ...,
        out_dir: Path | None = ...,
        conversation_id: str | None = ...,
        progress: Any = ...,
    ) -> Any: ...

    async def clarify(
        self, conversation_id: str, answer: str, *, user: str, progress: Any = ...
    ) -> Any: ...


def _csrf_token(request: Request) -> str:
    """The form token asgi-csrf keeps in its cookie (and sets on this response if new)."""
    return str(request.scope["csrftoken"]())


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def create_app(
    coordinator: CoordinatorLike,
    users: dict[str, str],
    history: HistoryStore,
    *,
    secret: str | None = None,
    as_of: datetime | None = None,
    one_at_a_time: bool = False,
    oidc: OidcLogin | None = None,
    public_url: str | None = None,
    feedback_sink: Callable[[Feedback], bool] | None = None,
    secure_cookies: bool | None = None,
    session_store: SessionStore | None = None,
    session_policy: SessionPolicy | None = None,
    sign_in_limits: SignInLimits | None = None,
    coverage: Coverage | None = None,
) -> Starlette:
    """The UI over ``coordinator``; ``as_of`` is the reference-time control's default (the time
    relative ones count from; None: now), ``coverage`` the lake's range shown beside it.

    ``users`` sign in with a password (none: no password form); ``oidc`` adds sign-in through
    the identity provider, whose callback is ``<public_url or this request's base>/auth/callback``.
    ``feedback_sink`` gets each feedback once the history has stored it (LangFuse).

    ``one_at_a_time``: run one request at a time (a coordinator that cannot serve two at once;
    ours can: in-process MCP calls act for their user through ``mcptools.acting_as``).

    ``secure_cookies`` (default: whether ``public_url`` is https) marks the cookies ``Secure``;
    ``session_store`` keeps the sessions (default: this process's memory), ``session_policy``
    bounds their idle and absolute lifetime, ``sign_in_limits`` the password guesses.
    """
    gate = asyncio.Lock() if one_at_a_time else None
    https = (public_url or "").lower().startswith("https://")
    secure = https if secure_cookies is None else secure_cookies
    policy = session_policy or SessionPolicy()
    policy = SessionPolicy(policy.idle_s, policy.absolute_s, secure)
    sessions = session_store or ExpiringMemoryStore()
    # argon2 is deliberately slow: the gate runs it off the event loop, a few at a time.
    sign_ins = SignInGate(sign_in_limits or SignInLimits(), lambda u, p: verify(users, u, p))

    provider = oidc.config.label if oidc else None

    def _user(request: Request) -> str | None:
        return current_user(request, policy)

    def login_html(request: Request, error: str | None, hint: str | None = None) -> str:
        return pages.login(
            error=error,
            hint=hint,
            password=bool(users),
            provider=provider,
            csrf_token=_csrf_token(request),
        )

    async def login_page(request: Request) -> Response:
        return HTMLResponse(login_html(request, None))

    async def login(request: Request) -> Response:
        if not users:
            return HTMLResponse(login_html(request, "Password sign-in is not enabled here."), 404)
        form = await request.form()
        user, password = str(form.get("user", ""))[:64], str(form.get("password", ""))
        wait = sign_ins.wait_s(user, _client(request))
        if wait is not None:
            page = login_html(request, "Too many sign-in attempts.", f"try again in {wait} s")
            return HTMLResponse(page, 429, headers={"Retry-After": str(wait)})
        try:
            ok = await sign_ins.verify(user, password)
        except BusyError:
            page = login_html(request, "Sign-in is busy.", "try again in a moment")
            return HTMLResponse(page, 503, headers={"Retry-After": "1"})
        if not ok:
            return HTMLResponse(login_html(request, "Unknown user or wrong password."), 401)
        sign_ins.succeeded(user)
        await sign_in(request, sessions, user)
        return RedirectResponse("/", 303)

    def callback_url(request: Request) -> str:
        base = public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
        return base + "/auth/callback"

    async def oidc_start(request: Request) -> Response:
        if oidc is None:
            return HTMLResponse(pages.not_found(), 404)
        try:
            return await oidc.start(request, callback_url(request))
        except AccessDeniedError as err:
            return HTMLResponse(login_html(request, err.message, err.hint), 502)

    async def oidc_callback(request: Request) -> Response:
        if oidc is None:
            return HTMLResponse(pages.not_found(), 404)
        try:
            user = await oidc.finish(request)
        except AccessDeniedError as err:
            sign_out(request)
            return HTMLResponse(login_html(request, err.message, err.hint), 401)
        await sign_in(request, sessions, user)
        return RedirectResponse("/", 303)

    async def logout(request: Request) -> Response:
        sign_out(request)
        return RedirectResponse("/login", 303)

    async def home(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return RedirectResponse("/login", 303)
        page = pages.chat(user, history.conversations(user), None, [], _csrf_token(request),
                          reference=as_of, coverage=coverage)  # fmt: skip
        return HTMLResponse(page)

    async def conversation_page(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return RedirectResponse("/login", 303)
        conv = history.conversation(user, request.path_params["cid"])
        if conv is None:
            return HTMLResponse(pages.not_found(), 404)
        messages = [_message_json(m.id, m.role, m.payload) for m in history.messages(user, conv.id)]
        page = pages.chat(user, history.conversations(user), conv, messages, _csrf_token(request),
                          reference=as_of, coverage=coverage)  # fmt: skip
        return HTMLResponse(page)

    async def conversation_json(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return JSONResponse({"error": "sign in first"}, 401)
        conv = history.conversation(user, request.path_params["cid"])
        if conv is None:
            return JSONResponse({"error": "no such conversation"}, 404)
        return JSONResponse(
            {
                "id": conv.id,
                "title": conv.title,
                "messages": [
                    _message_json(m.id, m.role, m.payload) for m in history.messages(user, conv.id)
                ],
            }
        )

    async def ask(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return JSONResponse({"error": "sign in first"}, 401)
        body = await json_object(request)
        text = required_str(body, "text").strip()
        if not text:
            return JSONResponse({"error": "the question is empty"}, 400)
        cid = optional_str(body, "conversation_id")
        clarify = body.get("clarify", False)
        if not isinstance(clarify, bool):
            raise BadRequestError("'clarify' is true or false")
        reply_to_clarification = clarify
        # A reply resumes its request, which keeps the reference time it was asked with.
        asked_at = None if clarify else optional_time(body, "as_of") or as_of
        if cid:
            conv = history.conversation(user, str(cid))
            if conv is None:
                return JSONResponse({"error": "no such conversation"}, 404)
        else:
            conv = history.create_conversation(user, text)
        said: dict[str, Any] = {"text": text, "clarify": reply_to_clarification}
        if asked_at is not None:
            said["as_of"] = asked_at.isoformat()
        history.add_message(conv.id, "user", said)
        return StreamingResponse(
            _answer_stream(
                coordinator, history, user, conv.id, text, reply_to_clarification, asked_at, gate
            ),
            media_type="application/x-ndjson",
        )

    async def artifact(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return PlainTextResponse("sign in first", 401)
        msg = history.message(user, request.path_params["mid"])
        index = int(request.path_params["index"])
        paths = (msg.payload.get("artifact_paths") or []) if msg else []
        if msg is None or not 0 <= index < len(paths) or not Path(paths[index]).is_file():
            return PlainTextResponse("no such artefact", 404)
        path = Path(paths[index])
        meta = msg.payload["artifacts"][index]
        download = request.query_params.get("download") == "1"
        return FileResponse(
            path,
            media_type=meta.get("media_type") or None,
            filename=path.name if download else None,
            content_disposition_type="attachment" if download else "inline",
        )

    async def feedback(request: Request) -> Response:
        user = _user(request)
        if user is None:
            return JSONResponse({"error": "sign in first"}, 401)
        body = await json_object(request)
        msg = history.message(user, required_str(body, "message_id"))
        if msg is None or msg.role != "assistant":
            return JSONResponse({"error": "no such answer"}, 404)
        score = 1 if body.get("score") == "up" else -1 if body.get("score") == "down" else 0
        if score == 0:
            return JSONResponse({"error": "score is 'up' or 'down'"}, 400)
        comment = optional_str(body, "comment") or ""
        request_id = msg.payload.get("request_id")
        # The local store first: it is the record, whatever becomes of the copy sent on.
        history.set_feedback(user, msg.id, request_id, score, comment)
        sent = False
        if feedback_sink is not None:
            item = Feedback(msg.id, user, request_id, msg.payload.get("trace_id"), score, comment)
            try:
                sent = feedback_sink(item)
            except Exception:  # a broken sink never loses what the store already has
                log.exception("feedback on %s stored but not sent on", msg.id)
                sent = False
        return JSONResponse({"ok": True, "request_id": request_id, "forwarded": sent})

    async def healthz(request: Request) -> Response:
        # For the kubelet's probes: answers without a session and touches no store, so a
        # Redis or Postgres outage shows users the 503 page rather than emptying the Service.
        return PlainTextResponse("ok")

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/login/oidc", oidc_start, methods=["GET"]),
        Route("/auth/callback", oidc_callback, methods=["GET"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", home),
        Route("/c/{cid}", conversation_page),
        Route("/api/conversations/{cid}", conversation_json),
        Route("/api/ask", ask, methods=["POST"]),
        Route("/api/feedback", feedback, methods=["POST"]),
        Route("/artifacts/{mid}/{index:int}", artifact),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    # Outermost first: every answer gets the headers, even a refusal; a cross-site or non-JSON
    # request is refused before its body is read; a form needs its token before the session
    # is loaded.
    middleware = [
        Middleware(SecureASGIMiddleware, secure=security_headers(https=https)),
        Middleware(RequestGuard, public_url=public_url),
        Middleware(
            asgi_csrf,
            cookie_name="__Host-oda_csrf" if secure else "oda_csrf",
            signing_secret=secret or secrets.token_urlsafe(32),
            cookie_secure=secure,
            cookie_samesite="Strict",
            # /api/* takes only JSON, which no other origin can send without CORS (RequestGuard).
            skip_if_scope=is_api,
            send_csrf_failed=csrf_failed(),
        ),
        Middleware(
            SessionMiddleware,
            store=sessions,
            lifetime=policy.idle_s,
            # Each request restarts the idle time (the cookie's Max-Age and the store's expiry).
            rolling=True,
            cookie_name=policy.cookie,
            # The identity provider sends the browser back here from its own site; a Strict
            # cookie would not come along, and with it the state, nonce and PKCE verifier.
            # Lax still keeps it off cross-site POSTs (every state-changing route is a POST).
            cookie_same_site="lax" if oidc else "strict",
            cookie_https_only=secure,
        ),
        Middleware(SessionAutoloadMiddleware),
    ]
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            StoreError: _store_unavailable,
            BadRequestError: _bad_request,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )


async def _bad_request(request: Request, exc: Exception) -> Response:
    """A body that is not the JSON object the route takes: say what is wrong, 400."""
    return JSONResponse({"error": str(exc)}, 400)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method) as JSON under /api/."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "error"
    headers = exc.headers if isinstance(exc, HTTPException) else None
    if is_api(request.scope):
        return JSONResponse({"error": detail}, status, headers=headers)
    if status == 404:
        return HTMLResponse(pages.not_found(), 404)
    return PlainTextResponse(detail, status, headers=headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    """A fault of ours: logged, and a JSON error the page can show, never a bare 500."""
    log.error("unhandled error on %s", request.url.path, exc_info=exc)
    if is_api(request.scope):
        return JSONResponse({"error": "the server failed on this request"}, 500)
    return HTMLResponse(pages.unavailable("the server failed on this request", None), 500)


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    """The history store failing (Redis or Postgres down): say so, not a bare 500."""
    err = exc if isinstance(exc, StoreError) else StoreError(str(exc))
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": err.message, "hint": err.hint}, 503)
    return HTMLResponse(pages.unavailable(err.message, err.hint), 503)


def _message_json(mid: str, role: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "role": role, **answers.public(payload)}


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, default=str) + "\n").encode()


def _scripts(paths: list[str | None]) -> list[str | None]:
    """The code that drew each chart: the script the coordinator saved beside it."""
    out: list[str | None] = []
    for p in paths:
        script = Path(p).with_suffix(".py") if p else None
        out.append(script.read_text(encoding="utf-8") if script and script.is_file() else None)
    return out


async def _answer_stream(
    coordinator: CoordinatorLike,
    history: HistoryStore,
    user: str,
    cid: str,
    text: str,
    reply_to_clarification: bool,
    as_of: datetime | None,
    gate: asyncio.Lock | None,
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def progress(step: str) -> None:
        # The coordinator may report from a worker thread (the retriever's stages run in one).
        loop.call_soon_threadsafe(queue.put_nowait, step)

    async def run() -> Any:
        try:
            if gate is not None:
                async with gate:
                    return await call()
            return await call()
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    async def call() -> Any:
        if reply_to_clarification:
            return await coordinator.clarify(cid, text, user=user, progress=progress)
        return await coordinator.ask(
            text, user=user, as_of=as_of, conversation_id=cid, progress=progress
        )

    yield _line({"type": "conversation", "id": cid})
    task = asyncio.create_task(run())
    steps: list[str] = []
    while (step := await queue.get()) is not None:
        steps.append(answers.without_paths(step))
        yield _line({"type": "progress", "text": steps[-1]})
    try:
        result = await task
        payload = answers.view(result.model_dump())
        payload["scripts"] = _scripts(payload["artifact_paths"])
    except OdaError as err:
        payload = {"status": "failed", "summary": str(err), "error": err.to_dict()}
    payload["steps"] = steps
    try:
        mid: str | None = history.add_message(cid, "assistant", payload).id
    except StoreError as err:
        # The answer is shown, but it could not be kept: say so in place of its feedback.
        mid = None
        payload["warnings"] = [*payload.get("warnings", []), f"not saved: {err}"]
    message = {"id": mid, "role": "assistant", **answers.public(payload)}
    yield _line({"type": "answer", "message": message})
