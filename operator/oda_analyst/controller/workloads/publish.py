"""The analysis pod's publisher: waits for the sandbox to finish, puts /out into the bucket.

The sandbox container writes its script's exit status to ``/out/.exit`` (``manifests``). The
publisher waits for it (``ODA_PUBLISH_WAIT_S``), then PUTs each expected file to its presigned URL
(``ODA_PUBLISH_TARGETS``: a JSON object, file name → URL), so it holds no credential and can
write nothing else. Exit 0 when the script succeeded and every expected file was put; else 1
with ``error: …`` naming what is missing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx

EXIT_FILE = ".exit"


def publish(out: Path, targets: dict[str, str], wait_s: float) -> list[str]:
    deadline = time.monotonic() + wait_s
    marker = out / EXIT_FILE
    while not marker.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the analysis did not finish within {wait_s:.0f} s")
        time.sleep(0.2)
    status = marker.read_text().strip()
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


def main() -> int:
    out = Path(os.environ.get("ODA_PUBLISH_DIR", "/out"))
    try:
        targets = json.loads(os.environ.get("ODA_PUBLISH_TARGETS", "{}"))
        wait_s = float(os.environ.get("ODA_PUBLISH_WAIT_S", "900"))
        print(json.dumps({"published": publish(out, targets, wait_s)}))
    except (RuntimeError, OSError, ValueError, httpx.HTTPError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
