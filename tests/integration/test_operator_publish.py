"""The sandbox pod's publisher for a code-agent script, against S3 (moto) on loopback through
presigned URLs made by the operator's own Bucket: what it puts, in which slot, and what it
refuses to follow."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from minio import Minio

from oda_analyst.controller.bucket import Bucket
from oda_analyst.controller.workloads.publish import EXIT_FILE, publish_run

PREFIX = "queries/ops/q2/uid/sandbox/pod/"


@pytest.fixture()
def bucket(moto_s3: Any) -> Iterator[Bucket]:
    client = Minio(moto_s3.host, access_key=moto_s3.access_key,
                   secret_key=moto_s3.secret_key, secure=False,
                   region=moto_s3.region)  # fmt: skip
    found = Bucket(client, "publish-test")
    found.ensure()
    yield found
    found.remove_prefix("")


def _urls(bucket: Bucket, slots: int) -> tuple[list[str], str]:
    expires = timedelta(minutes=10)
    return ([bucket.presigned_put(f"{PREFIX}files/{i}", expires=expires) for i in range(slots)],
            bucket.presigned_put(f"{PREFIX}run.json", expires=expires))  # fmt: skip


def _run_dir(tmp: Path, *, exit_status: str, reply: dict[str, Any] | None, log: str = ""
             ) -> tuple[Path, Path]:  # fmt: skip
    out, run = tmp / "out", tmp / "run"
    out.mkdir()
    run.mkdir()
    lines = [json.dumps({"ready": True, "pid": 7})]
    if reply is not None:
        lines.append(json.dumps(reply))
    (run / "reply.jsonl").write_text("\n".join(lines) + "\n")
    (run / "sandbox.log").write_text(log)
    (run / EXIT_FILE).write_text(exit_status + "\n")
    return out, run


def test_every_file_of_out_goes_to_a_slot_and_the_manifest_names_them(
    bucket: Bucket, tmp_path: Path
) -> None:
    reply = {"id": 1, "returncode": 0, "stdout": "drawn\n", "stderr": "", "timed_out": False,
             "output_exceeded": False}  # fmt: skip
    out, run = _run_dir(tmp_path, exit_status="0", reply=reply)
    (out / "line.png").write_bytes(b"\x89PNG chart")
    (out / "table.csv").write_text("a,b\n1,2\n")
    (out / "extra.txt").write_text("over the slots")
    (out / ".hidden").write_text("not a result")
    secret = tmp_path / "secret"
    secret.write_text("the publisher's own file")
    (out / "link.png").symlink_to(secret)  # code may leave a link: it is never followed
    slots, manifest_url = _urls(bucket, 2)

    done = publish_run(out, run, slots, manifest_url, wait_s=5)

    assert [f["name"] for f in done["files"]] == ["extra.txt", "line.png"]
    assert done["skipped"] == ["table.csv"]
    stored = json.loads(bucket.get(f"{PREFIX}run.json"))
    assert stored == done and stored["reply"] == reply and stored["exit"] == 0
    by_name = {f["name"]: f["slot"] for f in stored["files"]}
    assert bucket.get(f"{PREFIX}files/{by_name['line.png']}") == b"\x89PNG chart"
    assert bucket.get(f"{PREFIX}files/{by_name['extra.txt']}") == b"over the slots"
    assert not any(b"publisher's own" in bucket.get(f"{PREFIX}files/{i}") for i in range(2))


def test_a_failed_executor_still_publishes_its_log(bucket: Bucket, tmp_path: Path) -> None:
    out, run = _run_dir(
        tmp_path,
        exit_status="1",
        reply=None,
        log="Traceback …\nModuleNotFoundError: No module named 'pandas'\n",
    )
    slots, manifest_url = _urls(bucket, 1)
    done = publish_run(out, run, slots, manifest_url, wait_s=5)
    assert done["exit"] == 1 and done["reply"] is None and done["files"] == []
    assert "No module named 'pandas'" in json.loads(bucket.get(f"{PREFIX}run.json"))["log"]


def test_the_publisher_waits_for_the_exit_status(bucket: Bucket, tmp_path: Path) -> None:
    out, run = _run_dir(tmp_path, exit_status="0", reply=None)
    (run / EXIT_FILE).write_text("")  # being written: not finished yet
    slots, manifest_url = _urls(bucket, 1)

    def finish() -> None:
        time.sleep(0.6)
        (out / "late.json").write_text("{}")
        (run / EXIT_FILE).write_text("0\n")

    writer = threading.Thread(target=finish)
    writer.start()
    done = publish_run(out, run, slots, manifest_url, wait_s=10)
    writer.join()
    assert [f["name"] for f in done["files"]] == ["late.json"]
    with pytest.raises(RuntimeError, match="did not finish within 1 s"):
        publish_run(tmp_path / "none", tmp_path / "none", slots, manifest_url, wait_s=1)
