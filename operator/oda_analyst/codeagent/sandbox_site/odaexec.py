"""The warm executor; runs INSIDE the sandbox (``python -m odaexec``), one per started session.

It imports the heavy libraries once, then serves jobs read as JSON lines on stdin, answering one
JSON line per job on stdout. Each job runs in a fresh forked child (so jobs share nothing but the
already-imported modules) with its stdout and stderr captured up to a limit, and is killed at
its wall-clock limit. The host still bounds the whole sandbox.

    request:  {"id": 1, "script": "/opt/oda/job/job-1.py", "wall_s": 60, "cpu_s": 60,
               "output_bytes": 1048576}
    reply:    {"id": 1, "returncode": 0, "stdout": "...", "stderr": "...", "timed_out": false,
               "output_exceeded": false}
"""

import json
import os
import resource
import runpy
import selectors
import signal
import sys
import time
import traceback

import matplotlib

matplotlib.use("Agg")
import contextlib

import matplotlib.pyplot
import numpy  # noqa: F401
import odaplot  # noqa: F401
import pandas  # noqa: F401

PROTOCOL = sys.stdout


def _child(script, out_w, err_w, cpu_s):
    os.setpgid(0, 0)  # its own group: whatever it leaves behind is killed with it
    # The job's CPU limit (the executor's own is the session's): SIGXCPU, SIGKILL a second later.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # never the executor's request channel
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | type(None)):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(job):
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(job["script"], out_w, err_w, int(job.get("cpu_s", 60)))
    os.close(out_w)
    os.close(err_w)
    limit = int(job["output_bytes"])
    deadline = time.monotonic() + float(job["wall_s"])
    buffers = {out_r: bytearray(), err_r: bytearray()}
    sizes = {out_r: 0, err_r: 0}
    sel = selectors.DefaultSelector()
    for fd in buffers:
        sel.register(fd, selectors.EVENT_READ)
    timed_out = exceeded = False
    open_fds = set(buffers)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(left, 1.0)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                open_fds.discard(key.fd)
                continue
            room = limit - sizes[key.fd]
            if room > 0:
                buffers[key.fd] += chunk[:room]
            sizes[key.fd] += len(chunk)
            if sizes[key.fd] > limit:
                exceeded = True
        if exceeded:
            break
    if timed_out or exceeded:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for fd in buffers:
        os.close(fd)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return {
        "id": job["id"],
        "returncode": code,
        "stdout": buffers[out_r].decode("utf-8", "replace"),
        "stderr": buffers[err_r].decode("utf-8", "replace"),
        "timed_out": timed_out,
        "output_exceeded": exceeded,
    }


def main():
    print(json.dumps({"ready": True, "pid": os.getpid()}), file=PROTOCOL, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _run(json.loads(line))
        print(json.dumps(reply), file=PROTOCOL, flush=True)


if __name__ == "__main__":
    main()
