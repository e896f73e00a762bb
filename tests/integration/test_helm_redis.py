"""The chart's Redis started as its Deployment starts it (the arguments `helm template` renders,
with `$(VAR)` expanded from the container's env as the kubelet does, the password from the
generated Secret, /data a folder), and the product's checkpoint store opened from the settings
the chart gives the analyst: it connects only with the password, its readiness probe answers
with the probe's own variable, and a paused request survives a restart of Redis on its volume.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from alerting import free_port
from helm_tool import Helm, locate_helm
from oda_analyst.config import load_settings
from oda_analyst.errors import StoreError
from oda_analyst.retriever.checkpoint import open_checkpoint_store
from processes import stop_process
from unit.test_checkpoint import waiting

LOOPBACK = "127.0.0.1"
SERVICE = "rel-oda-analyst-redis:6379"


def _kubelet_expand(arg: str, env: Mapping[str, str]) -> str:
    """$(VAR) of a defined variable becomes its value; $$ escapes; anything else is kept."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
                  arg)  # fmt: skip


def _container(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    (dep,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env(container: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    env = {}
    for item in container.get("env", []):
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets.get(ref["name"], {}).get(ref["key"], "")
        else:
            env[item["name"]] = str(item["value"])
    return env


class ChartRedis:
    """redis-server with the chart's arguments, on a loopback port, its /data a folder."""

    def __init__(self, args: list[str], env: Mapping[str, str], data: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
        self.port = free_port()
        argv = [binary, *[_kubelet_expand(a, env) for a in args],
                "--port", str(self.port), "--bind", LOOPBACK]  # fmt: skip
        # the image's working directory is /data, where Redis keeps its files
        self.proc = subprocess.Popen(argv, cwd=data, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip

    def cli(self, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=10, check=False)  # fmt: skip

    def stop(self) -> None:
        stop_process(self.proc, grace_s=20)  # SIGTERM: Redis flushes its append-only file


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    helm: Helm = locate_helm(tmp_path_factory.mktemp("helm-home"))
    docs = helm.template()
    secrets = {d["metadata"]["name"]: {k: base64.b64decode(v).decode()
                                       for k, v in d["data"].items()}
               for d in docs if d["kind"] == "Secret" and "data" in d}  # fmt: skip
    return {"docs": docs, "secrets": secrets}


@pytest.fixture()
def server(chart: dict[str, Any], tmp_path: Path) -> Iterator[tuple[ChartRedis, dict[str, Any]]]:
    container = _container(chart["docs"], "rel-oda-analyst-redis")
    env = _env(container, chart["secrets"])
    data = tmp_path / "data"
    data.mkdir()
    started = ChartRedis(container["args"], env, data)
    yield started, {"container": container, "env": env, "data": data}
    started.stop()


def _wait_ready(server: ChartRedis, env: Mapping[str, str]) -> str:
    for _ in range(200):
        said = server.cli("ping", env=env)
        if said.stdout.strip() in {"PONG"} or "NOAUTH" in said.stdout + said.stderr:
            return said.stdout.strip()
        if server.proc.poll() is not None:
            pytest.fail(f"redis-server exited with {server.proc.returncode}")
        time.sleep(0.05)
    pytest.fail("redis-server did not answer")


def _analyst_settings(chart: dict[str, Any], port: int, **drop: bool) -> Any:
    env = _env(_container(chart["docs"], "rel-oda-analyst-analyst"), chart["secrets"])
    url = env["ODA_REDIS_URL"].replace(SERVICE, f"{LOOPBACK}:{port}")
    password = None if drop.get("password") else env["ODA_REDIS_PASSWORD"]
    return load_settings(redis_url=url, redis_password=password)


def test_the_probe_and_the_product_connect_only_with_the_password(
    chart: dict[str, Any], server: tuple[ChartRedis, dict[str, Any]]
) -> None:
    redis_server, pod = server
    probe_env = {"REDISCLI_AUTH": pod["env"]["REDISCLI_AUTH"]}
    assert _wait_ready(redis_server, probe_env) == "PONG"  # the readiness probe's command
    refused = redis_server.cli("ping", env={"REDISCLI_AUTH": ""})
    assert "NOAUTH" in refused.stdout + refused.stderr
    store = open_checkpoint_store(_analyst_settings(chart, redis_server.port))
    try:
        saved = store.save(waiting())
        assert store.load(saved.request_id) == saved
    finally:
        store.close()
    # without the chart's ODA_REDIS_PASSWORD the store cannot even open
    with pytest.raises(StoreError, match="authenticated"):
        open_checkpoint_store(_analyst_settings(chart, redis_server.port, password=True))


def test_a_paused_request_survives_a_restart_on_the_volume(
    chart: dict[str, Any], server: tuple[ChartRedis, dict[str, Any]]
) -> None:
    redis_server, pod = server
    _wait_ready(redis_server, {"REDISCLI_AUTH": pod["env"]["REDISCLI_AUTH"]})
    settings = _analyst_settings(chart, redis_server.port)
    store = open_checkpoint_store(settings)
    try:
        asked = store.save(waiting())
    finally:
        store.close()
    redis_server.stop()
    assert any(pod["data"].rglob("*.aof")), list(pod["data"].rglob("*"))
    again = ChartRedis(pod["container"]["args"], pod["env"], pod["data"])
    try:
        _wait_ready(again, {"REDISCLI_AUTH": pod["env"]["REDISCLI_AUTH"]})
        reopened = open_checkpoint_store(_analyst_settings(chart, again.port))
        try:
            assert reopened.load(asked.request_id) == asked
        finally:
            reopened.close()
    finally:
        again.stop()
