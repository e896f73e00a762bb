"""The sandbox pod's file mover; runs INSIDE the pod's ``io`` container (``python -m odapod``).

A sandbox pod has no network at all: what goes in and what comes out moves through the
Kubernetes API, as ``kubectl cp`` does, by exec into this container (which shares the pod's
volumes with the ``sandbox`` container that runs the code, and mounts /in and the job folder
read-write where the sandbox sees them read-only):

    python -m odapod put N   read a tar of exactly N bytes from stdin (an exec's stdin cannot
                             be closed over the v4 websocket protocol, so its length is given);
                             members under ``in/`` go to /in, under ``job/`` to the job folder;
                             then the job folder's ``.ready`` marker, which starts the sandbox
    python -m odapod get     write a tar of /out's files (``out/…``) and the executor's reply,
                             log and exit status (``run/…``) to stdout
    python -m odapod release let the pod end (the container's ``wait`` returns)
    python -m odapod wait S  the container's own command: wait for ``release`` (at most S s)

Only regular files are taken in, with plain relative names (no ``..``, no absolute path, no
link); /out's links and folders are not sent out.
"""

import io
import json
import os
import sys
import tarfile
import time

IN = os.environ.get("ODA_POD_IN", "/in")
JOB = os.environ.get("ODA_POD_JOB", "/opt/oda/job")
OUT = os.environ.get("ODA_POD_OUT", "/out")
RUN = os.environ.get("ODA_POD_RUN", "/opt/oda/run")
READY = ".ready"
RELEASED = ".released"
RUN_FILES = ("reply.jsonl", "sandbox.log", ".exit")


def _target(name):
    parts = name.split("/")
    if len(parts) != 2 or parts[1] in ("", ".", "..") or parts[1].startswith("/"):
        return None
    root = {"in": IN, "job": JOB}.get(parts[0])
    return None if root is None else os.path.join(root, parts[1])


def _read_exactly(stream, size):
    chunks, left = [], size
    while left > 0:
        chunk = stream.read(min(left, 1 << 16))
        if not chunk:
            raise SystemExit(f"odapod: stdin ended after {size - left} of {size} bytes")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def put(size):
    if os.path.exists(os.path.join(JOB, READY)):  # a resumed run: the job is in place
        print(json.dumps({"files": 0, "already": True}))
        return
    data = _read_exactly(sys.stdin.buffer, size)
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            path = _target(member.name)
            if path is None or not member.isfile():
                raise SystemExit(f"odapod: refused tar member {member.name!r}")
            source = tar.extractfile(member)
            with open(path + ".part", "wb") as fh:
                fh.write(source.read() if source is not None else b"")
            os.replace(path + ".part", path)
            count += 1
    with open(os.path.join(JOB, READY + ".part"), "w") as fh:
        fh.write(str(count))
    os.replace(os.path.join(JOB, READY + ".part"), os.path.join(JOB, READY))
    print(json.dumps({"files": count, "already": False}))


def get():
    out = sys.stdout.buffer
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for name in sorted(os.listdir(OUT)) if os.path.isdir(OUT) else []:
            path = os.path.join(OUT, name)
            if os.path.isfile(path) and not os.path.islink(path):
                tar.add(path, arcname=f"out/{name}", recursive=False)
        for name in RUN_FILES:
            path = os.path.join(RUN, name)
            if os.path.isfile(path):
                tar.add(path, arcname=f"run/{name}", recursive=False)
    out.flush()


def release():
    with open(os.path.join(RUN, RELEASED), "w") as fh:
        fh.write("1")


def wait(limit_s):
    deadline = time.monotonic() + limit_s
    while not os.path.exists(os.path.join(RUN, RELEASED)):
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def main(argv):
    if argv[:1] == ["put"] and len(argv) == 2:
        put(int(argv[1]))
    elif argv == ["get"]:
        get()
    elif argv == ["release"]:
        release()
    elif argv[:1] == ["wait"] and len(argv) == 2:
        wait(float(argv[1]))
    else:
        raise SystemExit("usage: python -m odapod put N | get | release | wait SECONDS")


if __name__ == "__main__":
    main(sys.argv[1:])
