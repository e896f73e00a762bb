"""The pipeline port served over HTTP: what the operator's ``HttpPipeline`` calls.

Each call runs ``LocalPipeline`` in a worker thread, at most ``max_concurrent`` at once per
replica (the rest wait in line; the operator bounds how many it sends, and replicas behind the
Service share the load). A retrieval that names its answer (``ask.key``: the query and its round
of clarification) is run once: a second call with the same key, from an operator that restarted
while this one worked, waits for the same answer, and one that comes shortly after gets the
answer already given (kept ``KEEP_S``), so no model call and no sandbox pod is repeated. A failed
answer is not kept: asking again runs it again.

Errors: a malformed request is 400 (only the request's reading: an error of the work itself is
never taken for the caller's); our typed errors are 422 (usage) or 500 with
``{"error": {code, message, hint}}``; a busy server is 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from oda_analyst.controller import port_wire as wire
from oda_analyst.controller.port import Retrieved
from oda_analyst.errors import BusyError, OdaError, SandboxUnavailableError, UsageError
from oda_analyst.pipeline.local import LocalPipeline
from oda_analyst.pipeline.sandbox_pod import PodSandbox, analyse

T = TypeVar("T")
KEEP_S = 600.0  # how long an answer given is kept for an operator that asks again
log = logging.getLogger(__name__)


class PipelineService:
    """The port's calls on one ``LocalPipeline``, bounded and with answers named by key."""

    def __init__(self, pipeline: LocalPipeline, max_concurrent: int,
                 pods: PodSandbox | None = None) -> None:  # fmt: skip
        self.pipeline = pipeline
        self.pods = pods  # the users' sandbox pods, where a query's analysis runs
        self.limiter = anyio.CapacityLimiter(max_concurrent)
        self._answers: dict[str, asyncio.Task[Any]] = {}
        self._finished: dict[str, float] = {}  # key -> when its answer was given
        self.started = 0  # answers run (not joined): what a test counts

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A call that works on a query (stage 1, an answer): within the replica's bound."""
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self.limiter)

    async def quick(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A short look-up (a graph's entry, a model's check): never behind the answers."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def load(self) -> dict[str, int]:
        return {"running": int(self.limiter.borrowed_tokens),
                "waiting": int(self.limiter.statistics().tasks_waiting),
                "capacity": int(self.limiter.total_tokens), "answers": self.started}  # fmt: skip

    def _forget_old(self) -> None:
        now = time.monotonic()
        for key, at in list(self._finished.items()):
            if now - at > KEEP_S:
                self._finished.pop(key, None)
                self._answers.pop(key, None)

    async def retrieve(self, key: str | None, work: Callable[[], Awaitable[Retrieved]]
                       ) -> Retrieved:  # fmt: skip
        """``work``'s answer, run once per ``key`` (None: always run)."""
        return await self.once(key, work, answer=True)

    async def once(self, key: str | None, work: Callable[[], Awaitable[T]], *,
                   answer: bool = False) -> T:  # fmt: skip
        """``work``'s result, run once per ``key`` (None: always run): an answer (counted in
        ``started``), or a query's analysis in its user's sandbox pod."""
        if key is None:
            self.started += answer
            return await work()
        self._forget_old()
        task = self._answers.get(key)
        if task is None:
            self.started += answer
            task = asyncio.ensure_future(work())
            self._answers[key] = task
            task.add_done_callback(functools.partial(self._done, key))
        # shielded: a caller that goes away (its operator stopped) does not stop the answer,
        # which the next caller with this key then gets
        found: T = await asyncio.shield(task)
        return found

    def _done(self, key: str, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            self._answers.pop(key, None)
        else:
            self._finished[key] = time.monotonic()


def _error(status: int, err: OdaError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": err.to_dict()}, status_code=status, headers=headers)


def _handled(fn: Callable[[Request], Awaitable[Response]]
             ) -> Callable[[Request], Awaitable[Response]]:  # fmt: skip
    """Our errors as JSON a caller can act on; anything else logged and masked."""

    @functools.wraps(fn)
    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except wire.WireError as exc:
            return _error(400, UsageError(f"malformed request: {exc}",
                                          hint="the operator and the analyst must run the "
                                          "same version"))  # fmt: skip
        except BusyError as err:
            return _error(503, err, {"Retry-After": "5"})
        except UsageError as err:
            return _error(422, err)
        except OdaError as err:
            return _error(500, err)
        except Exception:
            log.exception("pipeline call %s failed", request.url.path)
            return _error(500, OdaError("the analyst failed on this request",
                                        hint="see the analyst's log"))  # fmt: skip

    return wrapper


async def _body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError as exc:
        raise wire.WireError(f"the body is not JSON: {exc}") from None


def build_app(service: PipelineService, middleware: list[Middleware] | None = None) -> Starlette:
    pipeline = service.pipeline

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True, **service.load()})

    @_handled
    async def understand(request: Request) -> Response:
        body = await _body(request)
        with wire.reading():
            question, user, as_of = str(body["question"]), str(body["user"]), body["asOf"]
            pairs = [(str(a["field"]), str(a["text"])) for a in body.get("answers") or []]
            when = wire.when(as_of)
        got = await service.run(pipeline.understand, question, user=user, as_of=when,
                                answers=pairs)  # fmt: skip
        return JSONResponse(wire.understood_json(got))

    @_handled
    async def retrieve(request: Request) -> Response:
        body = await _body(request)
        with wire.reading():
            question, user, when = str(body["question"]), str(body["user"]), body["asOf"]
            ask = wire.ask_of(body["ask"])
            answers = [str(a) for a in body.get("answers") or []]
            as_of = wire.when(when)

        async def work() -> Retrieved:
            return await service.run(pipeline.retrieve, question, user=user, as_of=as_of,
                                     answers=answers, ask=ask)  # fmt: skip

        return JSONResponse(wire.retrieved_json(await service.retrieve(ask.key, work)))

    @_handled
    async def analysis(request: Request) -> Response:
        body = await _body(request)
        with wire.reading():
            asked = wire.analysis_of(body)
        if service.pods is None:
            raise SandboxUnavailableError("this analyst starts no sandbox pods", hint="serve "
                                          "the pipeline with Kubernetes credentials (oda-analyst "
                                          "serve --pipeline-port)")  # fmt: skip
        pods = service.pods

        async def work() -> dict[str, bytes]:
            return await service.run(analyse, pods, asked)

        return JSONResponse(wire.files_json(await service.once(asked.key, work)))

    @_handled
    async def check_model(request: Request) -> Response:
        body = await _body(request)
        with wire.reading():
            model = wire.model_of(body)
        if model is None:
            raise wire.WireError("no model named")
        problem = await service.quick(pipeline.check_model, model)
        return JSONResponse({"problem": problem})

    @_handled
    async def graph(request: Request) -> Response:
        key = request.path_params["key"]
        if request.method == "DELETE":
            await service.quick(pipeline.drop_graph, key)
            return Response(status_code=204)
        info = await service.quick(pipeline.graph, key)
        if info is None:
            return JSONResponse({"error": {"code": "not_found", "message": "no such graph",
                                           "hint": None}}, status_code=404)  # fmt: skip
        return JSONResponse(wire.graph_json(info))

    return Starlette(routes=[
        Route("/healthz", healthz),
        Route("/v1/understand", understand, methods=["POST"]),
        Route("/v1/retrieve", retrieve, methods=["POST"]),
        Route("/v1/check-model", check_model, methods=["POST"]),
        Route("/v1/analyse", analysis, methods=["POST"]),
        Route("/v1/graphs/{key}", graph, methods=["GET", "DELETE"]),
    ], middleware=middleware)  # fmt: skip
