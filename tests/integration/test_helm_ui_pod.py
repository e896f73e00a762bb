"""The web UI started exactly as the chart's Deployment starts it: the command, arguments and
environment `helm template` renders, with the pod's volumes mapped to folders (the users Secret
as the file the chart mounts, the scratch volumes as writable folders) and the Secrets' values
filled in. The process must come up, answer its probe route, sign a user of the mounted file in
and keep history where the chart points it (SQLite on the data volume when there is no Redis).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from alerting import free_port
from helm_tool import Helm, locate_helm
from oda_analyst.webui.auth import hash_password
from processes import stop_process

LOOPBACK = "127.0.0.1"


def _rendered_ui(helm: Helm) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    values = ["--set", "redis.enabled=false", "--set", "ui.users.existingSecret=ops-users"]
    docs = helm.template(*values)
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"
                 and d["metadata"]["name"] == "rel-oda-analyst-ui"]  # fmt: skip
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    return pod, container, secrets


def test_the_ui_starts_as_the_chart_starts_it(tmp_path: Path) -> None:
    helm = locate_helm(tmp_path / "helm-home")
    pod, container, rendered_secrets = _rendered_ui(helm)
    # what the cluster would hold: the operator's users Secret, the lake keys, the chart's key
    existing = {
        "ops-users": {"users": f"alice:{hash_password('a-pass')}\n"},
        "oda-analyst-lake": {"accessKey": "k", "secretKey": "s"},
    }
    for name, secret in rendered_secrets.items():
        existing[name] = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    volumes = {v["name"]: v for v in pod["volumes"]}
    moved: dict[str, str] = {}
    for mount in container["volumeMounts"]:
        folder = tmp_path / "pod" / mount["name"]
        folder.mkdir(parents=True)
        volume = volumes[mount["name"]]
        if "secret" in volume:
            data = existing[volume["secret"]["secretName"]]
            for item in volume["secret"]["items"]:
                (folder / item["path"]).write_text(data[item["key"]])
        else:
            assert volume == {"name": mount["name"], "emptyDir": {}}
        moved[mount["mountPath"]] = str(folder)
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            value = existing[ref["name"]][ref["key"]]
        else:
            value = str(item["value"])
        for path, folder in moved.items():
            if value == path or value.startswith(path + "/"):
                value = folder + value[len(path) :]
                break  # once: the folders are under /tmp, itself a mount
        env[item["name"]] = value
    assert env["ODA_UI_HISTORY"] == "sqlite"
    port = free_port()
    argv = [*container["command"], *container["args"]]
    assert argv[:2] == ["oda-analyst", "ui"]
    argv[0] = str(Path(sys.executable).parent / "oda-analyst")
    argv = [f"--host={LOOPBACK}" if a.startswith("--host=") else
            f"--port={port}" if a.startswith("--port=") else a for a in argv]  # fmt: skip
    # Only the pod's ODA_* settings: none of this machine's may leak into the check.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    log = tmp_path / "ui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**clean, **env})
    try:
        probe = container["readinessProbe"]["httpGet"]["path"]
        url = f"http://{LOOPBACK}:{port}"
        _wait_for(url + probe, proc, log)
        with httpx.Client(base_url=url) as client:
            assert client.get(probe).text == "ok"
            r = client.post("/login", data={"user": "alice", "password": "a-pass"})
            assert r.status_code == 303, r.text
            assert client.get("/").status_code == 200
            # signed in, the form repeats the CSRF token its cookie holds (issue 31)
            wrong = {"user": "alice", "password": "no", "csrftoken": client.cookies["oda_csrf"]}
            assert client.post("/login", data=wrong).status_code == 401
        # history is on the data volume the chart mounts, as ODA_DATA_DIR says
        assert (Path(moved["/var/lib/oda-analyst"]) / "webui" / "history.sqlite").is_file()
    finally:
        stop_process(proc)


def _wait_for(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"oda-analyst ui exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail(f"oda-analyst ui did not answer {url}:\n{log.read_text()[-2000:]}")
