"""The sandbox pod's files in and out, without a cluster: the analyst's tar (``pack``) through the
pod's mover (``odapod put``, run here as the io container runs it), the mover's tar of /out and
the executor's reply (``odapod get``) back through ``unpack``; the mover refuses what is not a
plain file of in/ or job/; the exec Status the API server ends with, read as an exit code."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from oda_analyst.controller.kube import exec_status
from oda_analyst.pipeline.sandbox_pod import pack, unpack

SITE = Path(__file__).resolve().parents[2] / "operator/oda_analyst/codeagent/sandbox_site"


def _odapod(root: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SITE), "ODA_POD_IN": str(root / "in"),
           "ODA_POD_JOB": str(root / "job"), "ODA_POD_OUT": str(root / "out"),
           "ODA_POD_RUN": str(root / "run")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "odapod", *args], input=stdin, env=env,
                          capture_output=True, check=False, timeout=60)  # fmt: skip


@pytest.fixture()
def pod(tmp_path: Path) -> Path:
    for part in ("in", "job", "out", "run"):
        (tmp_path / part).mkdir()
    return tmp_path


def test_put_then_get_moves_the_files_byte_for_byte(pod: Path) -> None:
    blob = bytes(range(256)) * 4096  # binary, 1 MiB: a ConfigMap could not carry it as text
    tar = pack({"in/data.csv": b"t,v\n1,2\n", "in/blob.bin": blob,
                "job/main.py": b"print(1)\n", "job/request.json": b"{}\n"})  # fmt: skip
    done = _odapod(pod, "put", str(len(tar)), stdin=tar + b"trailing bytes are not read")
    assert done.returncode == 0, done.stderr
    assert (pod / "in" / "blob.bin").read_bytes() == blob
    assert (pod / "job" / "main.py").read_text() == "print(1)\n"
    assert (pod / "job" / ".ready").exists()  # the sandbox container starts on it
    again = _odapod(pod, "put", str(len(tar)), stdin=tar)  # a resumed run: in place already
    assert json.loads(again.stdout)["already"] is True

    (pod / "out" / "line.png").write_bytes(b"\x89PNG" + blob)
    (pod / "out" / "folder").mkdir()
    (pod / "out" / "link").symlink_to(pod / "in" / "data.csv")
    (pod / "run" / "reply.jsonl").write_text('{"ready": true}\n{"id": 1, "returncode": 0}\n')
    (pod / "run" / ".exit").write_text("0\n")
    got = _odapod(pod, "get")
    assert got.returncode == 0, got.stderr
    files = unpack(got.stdout)
    assert set(files) == {"out/line.png", "run/reply.jsonl", "run/.exit"}  # no link, no folder
    assert files["out/line.png"] == b"\x89PNG" + blob

    assert _odapod(pod, "release").returncode == 0
    assert _odapod(pod, "wait", "30").returncode == 0  # returns at once once released


@pytest.mark.parametrize("name", ["../escape", "in/../../etc/x", "/in/abs", "out/x", "in/a/b",
                                  "in/"])  # fmt: skip
def test_put_refuses_what_is_not_a_plain_file_of_in_or_job(pod: Path, name: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    data = buf.getvalue()
    done = _odapod(pod, "put", str(len(data)), stdin=data)
    assert done.returncode != 0 and b"refused" in done.stderr
    assert not (pod / "job" / ".ready").exists()


def test_put_with_fewer_bytes_than_said_fails(pod: Path) -> None:
    tar = pack({"in/a": b"1"})
    done = _odapod(pod, "put", str(len(tar) + 10), stdin=tar)
    assert done.returncode != 0 and b"stdin ended" in done.stderr


def test_the_exec_status_is_the_commands_exit_code() -> None:
    assert exec_status(b'{"metadata":{},"status":"Success"}') == (0, "")
    failed = {"status": "Failure", "reason": "NonZeroExitCode",
              "message": "command terminated with non-zero exit code: exit status 3",
              "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}  # fmt: skip
    assert exec_status(json.dumps(failed).encode()) == (3, failed["message"])
    refused = {"status": "Failure", "message": "container not found"}
    assert exec_status(json.dumps(refused).encode()) == (None, "container not found")
    assert exec_status(b"") == (None, "")
