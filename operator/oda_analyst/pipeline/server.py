"""The pipeline service's composition root: the work, its sandbox pods and its HTTP server.

Runs on the event loop of ``oda-analyst serve`` beside the MCP servers, so the coordinator's
in-process subagents are that process's servers. The code agent of this process runs every
script in the user's sandbox pod (``sandbox_pod.PodSandbox``, with the analyst's own
Kubernetes credentials), never in the analyst: a query's in the query's namespace, a web UI
user's (through the code agent's MCP server) in ``ODA_SANDBOX_NAMESPACE``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.middleware import Middleware

from oda_analyst.config import Settings
from oda_analyst.controller.context import workload_env
from oda_analyst.controller.kube import Kube
from oda_analyst.pipeline.coordinated import release_remote_sandbox, use_remote_sandbox
from oda_analyst.pipeline.http import PipelineService, build_app
from oda_analyst.pipeline.local import LocalPipeline
from oda_analyst.pipeline.sandbox_pod import PodSandbox


def pod_sandbox(settings: Settings, kube: Kube, loop: asyncio.AbstractEventLoop) -> PodSandbox:
    """The users' sandbox pods as this process's code agent's remote (settings-driven)."""
    return PodSandbox(kube, workload_env(settings), loop,
                      ui_namespace=settings.sandbox_namespace,
                      poll_s=min(settings.operator_poll_s, 1.0))  # fmt: skip


@contextlib.asynccontextmanager
async def sandbox_pods(settings: Settings) -> AsyncIterator[PodSandbox]:
    """The code agent of this process runs its scripts in the users' pods while inside."""
    kube = Kube.from_environment()
    pods = pod_sandbox(settings, kube, asyncio.get_running_loop())
    manager = use_remote_sandbox(settings, pods)
    try:
        yield pods
    finally:
        release_remote_sandbox(manager)
        await kube.close()


async def serve_sandbox(settings: Settings) -> None:
    """Keep the code agent's scripts in the users' pods until cancelled (``oda-analyst serve``
    with ODA_CODEAGENT_SANDBOX=pod and no pipeline port: the web UI's code agent)."""
    async with sandbox_pods(settings):
        await asyncio.Event().wait()


async def serve_pipeline(settings: Settings, host: str, port: int,
                         middleware: list[Middleware] | None = None) -> None:  # fmt: skip
    """Serve the pipeline port on ``host:port`` until cancelled (``middleware``: the same
    caller check as the MCP servers')."""
    pipeline = await asyncio.to_thread(LocalPipeline, settings)
    async with sandbox_pods(settings) as pods:
        service = PipelineService(pipeline, settings.pipeline_max_concurrent, pods)
        config = uvicorn.Config(build_app(service, middleware), host=host, port=port,
                                log_level="warning", lifespan="off",
                                timeout_keep_alive=75)  # fmt: skip
        await uvicorn.Server(config).serve()
