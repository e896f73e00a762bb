"""The port's analysis call (a query's summary in its user's sandbox pod, run by the analyst):
its message both ways, and over HTTP as the operator calls it — the files come back byte for
byte, two calls with one key (an operator that restarted) are one run in the pod, and an
analyst that makes no sandbox pods says so."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import httpx
import pytest

from oda_analyst.controller import port_wire as wire
from oda_analyst.controller.port import Analysis, SandboxScope
from oda_analyst.controller.port_http import AnalystCallError, HttpPipeline
from oda_analyst.pipeline import http as pipeline_http
from oda_analyst.pipeline.http import PipelineService, build_app

SCOPE = SandboxScope(query={"apiVersion": "oda-analyst.dev/v1alpha1", "kind": "AnalystQuery",
                            "metadata": {"name": "q2", "namespace": "ops", "uid": "u-1"}},
                     user="alice", prefix="queries/ops/q2/u-1/")  # fmt: skip
ASKED = Analysis(scope=SCOPE, script="import odaplot\n", inputs={"result.csv": "a,b\n1,2\n"},
                 outputs=("summary.json", "line.png"), key="u-1/analysis")  # fmt: skip


def test_an_analysis_travels_as_it_was_asked() -> None:
    assert wire.analysis_of(wire.analysis_json(ASKED)) == ASKED
    files = {"summary.json": b"{}", "line.png": b"\x89PNG\x00\xff"}
    assert wire.files_of(wire.files_json(files)) == files
    with pytest.raises(wire.WireError):
        wire.analysis_of({**wire.analysis_json(ASKED), "scope": None})


def _client(service: PipelineService) -> HttpPipeline:
    transport = httpx.ASGITransport(app=build_app(service))
    return HttpPipeline("http://analyst", transport=transport)


def test_the_operator_gets_the_pods_files_and_one_key_is_one_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[Analysis] = []
    gate = threading.Event()

    def fake_analyse(pods: Any, asked: Analysis) -> dict[str, bytes]:
        runs.append(asked)
        gate.wait(10)
        return {"summary.json": b'{"n": 1}', "line.png": b"\x89PNG"}

    monkeypatch.setattr(pipeline_http, "analyse", fake_analyse)
    service = PipelineService(cast(Any, object()), 4, pods=cast(Any, object()))

    async def scenario() -> list[dict[str, bytes]]:
        client = _client(service)
        try:
            first = asyncio.ensure_future(client.analyse(ASKED))
            await asyncio.sleep(0.2)
            second = asyncio.ensure_future(client.analyse(ASKED))  # the operator restarted
            await asyncio.sleep(0.2)
            gate.set()
            return list(await asyncio.gather(first, second))
        finally:
            await client.aclose()

    one, two = asyncio.run(scenario())
    assert one == two == {"summary.json": b'{"n": 1}', "line.png": b"\x89PNG"}
    assert len(runs) == 1 and runs[0] == ASKED
    assert service.started == 0  # an analysis is not an answer


def test_an_analyst_without_sandbox_pods_says_so() -> None:
    service = PipelineService(cast(Any, object()), 4, pods=None)

    async def scenario() -> None:
        client = _client(service)
        try:
            await client.analyse(ASKED)
        finally:
            await client.aclose()

    with pytest.raises(AnalystCallError, match="sandbox pods"):
        asyncio.run(scenario())
