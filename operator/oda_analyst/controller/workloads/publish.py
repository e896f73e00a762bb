"""The analysis pod's publisher: waits for the sandbox to finish, puts /out into the bucket.

The sandbox container writes its script's exit status to ``/out/.exit`` (``manifests``). The
publisher waits for it (``ODA_PUBLISH_WAIT_S``), then PUTs each expected file to its presigned URL
(``ODA_PUBLISH_TARGETS``: a JSON object, file name → URL), so it holds no credential and can
write nothing else. Exit 0 when the script succeeded and every expected file was put; else 1
with ``error: …`` naming what is missing.

A code-agent script's pod (``manifests.get_code_pod``) names no files in advance: the script
may write any. There the publisher waits for the executor's exit status in
``ODA_PUBLISH_RUN_DIR``, PUTs each regular file of /out to the next of ``ODA_PUBLISH_SLOTS``
(presigned URLs of opaque keys) and then a manifest to ``ODA_PUBLISH_MANIFEST``: the executor's
exit status and reply (the script's own exit status, stdout, stderr, limits reached), the tail
of its log, and which slot holds which file. It exits 0 once the manifest is put, whatever the
script did: the script's failure is a result the operator reads from the manifest.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Any

import httpx

EXIT_FILE = ".exit"
LOG_TAIL = 2000  # characters of the executor's own log kept in the manifest
# The code agent's file names (codeagent.workspace): no folders, no leading dot.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _wait_exit(folder: Path, wait_s: float) -> str:
    """The exit status the sandbox wrote to ``folder/.exit`` (an empty file is one being
    written: its status follows)."""
    deadline = time.monotonic() + wait_s
    marker = folder / EXIT_FILE
    while True:
        text = marker.read_text().strip() if marker.exists() else ""
        if text:
            return text
        if time.monotonic() > deadline:
            raise RuntimeError(f"the analysis did not finish within {wait_s:.0f} s")
        time.sleep(0.2)


def publish(out: Path, targets: dict[str, str], wait_s: float) -> list[str]:
    status = _wait_exit(out, wait_s)
    if status != "0":
        raise RuntimeError(f"the analysis script exited with status {status}")
    missing = sorted(name for name in targets if not (out / name).is_file())
    if missing:
        raise RuntimeError(f"the analysis wrote no {', '.join(missing)}")
    put = []
    with httpx.Client(timeout=60) as client:
        for name, url in sorted(targets.items()):
            response = client.put(url, content=(out / name).read_bytes())
            if response.status_code >= 300:
                raise RuntimeError(f"the bucket refused {name}: HTTP {response.status_code}")
            put.append(name)
    return put


def _reply(run: Path) -> dict[str, Any] | None:
    """The executor's answer to the job (its first line says it is ready; skip that)."""
    path = run / "reply.jsonl"
    if not path.is_file():
        return None
    for line in reversed(path.read_text("utf-8", "replace").splitlines()):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "returncode" in item:
            return item
    return None


def _files(out: Path) -> list[Path]:
    """Regular files of /out by name, never following a link the code left there."""
    found = []
    for entry in sorted(os.scandir(out), key=lambda e: e.name):
        if _NAME.match(entry.name) and stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            found.append(Path(entry.path))
    return found


def publish_run(out: Path, run: Path, slots: list[str], manifest_url: str, wait_s: float
                ) -> dict[str, Any]:  # fmt: skip
    """Put /out into the slots and the run's manifest last (the operator waits for it)."""
    exit_status = _wait_exit(run, wait_s)
    log = run / "sandbox.log"
    manifest: dict[str, Any] = {
        "exit": int(exit_status) if exit_status.lstrip("-").isdigit() else None,
        "reply": _reply(run),
        "log": log.read_text("utf-8", "replace")[-LOG_TAIL:] if log.is_file() else "",
        "files": [],
        "skipped": [],
    }
    files = _files(out)
    with httpx.Client(timeout=60) as client:
        for slot, path in enumerate(files):
            if slot >= len(slots):
                manifest["skipped"].append(path.name)
                continue
            response = client.put(slots[slot], content=path.read_bytes())
            if response.status_code >= 300:
                raise RuntimeError(f"the bucket refused {path.name}: HTTP {response.status_code}")
            manifest["files"].append({"name": path.name, "slot": slot,
                                      "bytes": path.stat().st_size})  # fmt: skip
        body = json.dumps(manifest).encode()
        response = client.put(manifest_url, content=body)
        if response.status_code >= 300:
            raise RuntimeError(f"the bucket refused the manifest: HTTP {response.status_code}")
    return manifest


def main() -> int:
    out = Path(os.environ.get("ODA_PUBLISH_DIR", "/out"))
    manifest_url = os.environ.get("ODA_PUBLISH_MANIFEST")
    try:
        if manifest_url:
            run = Path(os.environ.get("ODA_PUBLISH_RUN_DIR", "/opt/oda/run"))
            slots = json.loads(os.environ.get("ODA_PUBLISH_SLOTS", "[]"))
            wait_s = float(os.environ.get("ODA_PUBLISH_WAIT_S", "900"))
            done = publish_run(out, run, slots, manifest_url, wait_s)
            print(json.dumps({"published": [f["name"] for f in done["files"]]}))
            return 0
        targets = json.loads(os.environ.get("ODA_PUBLISH_TARGETS", "{}"))
        wait_s = float(os.environ.get("ODA_PUBLISH_WAIT_S", "900"))
        print(json.dumps({"published": publish(out, targets, wait_s)}))
    except (RuntimeError, OSError, ValueError, httpx.HTTPError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
