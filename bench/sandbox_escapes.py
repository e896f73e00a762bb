"""Escape battery of the code agent's sandboxes: each attempt must be blocked or contained.

Every attempt is real code run in the sandbox with the static auditor switched off (the sandbox
is the boundary; the auditor's verdict is shown beside it). The host side plants what the code
must not reach (a canary in this process's environment, a secret in another user's folder and in
the data folder, a listening TCP port on loopback) and judges each attempt by what the host sees
afterwards, never by what the sandboxed code claims.

    python bench/sandbox_escapes.py [--backend gvisor|bwrap|auto] [--warm]

Prints a table attempt → outcome → layer that stopped it, then, as its last line:
    sandbox: attempts=N blocked=N backend=<name>
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from oda_analyst.codeagent.backends.select import choose
from oda_analyst.codeagent.executor import WarmExecutor, launch_executor
from oda_analyst.codeagent.limits import MIB, Limits
from oda_analyst.codeagent.pyenv import locate
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace
from oda_analyst.errors import UsageError

LIMITS = Limits(wall_s=3, cpu_s=1, memory_bytes=512 * MIB, output_bytes=64 * 1024,
                file_bytes=2 * MIB, out_dir_bytes=8 * MIB, processes=32, open_files=64,
                tmp_bytes=16 * MIB)  # fmt: skip
CANARY_ENV = "ODA_ESCAPE_CANARY"


@dataclass
class Host:
    """What the host plants and watches."""

    root: Path
    canary: str
    other_user_secret: Path
    data_dir_secret: Path
    host_file: Path
    port: int
    connections: list[str]
    pid: int

    def leaked(self, result: RunResult, ws: Workspace) -> bool:
        """True when the canary shows up anywhere the code could send it back."""
        blobs = [result.stdout, result.stderr]
        for f in ws.outputs_list():
            try:
                blobs.append(ws.read_output(f.name, 64 * MIB).decode("utf-8", "replace"))
            except UsageError:
                continue
        return any(self.canary in b for b in blobs)


Judge = Callable[[RunResult, Workspace, Host], tuple[bool, str]]
STARTED = "ATTEMPT-STARTED"
MARKER = "attempt-started.txt"


@dataclass(frozen=True)
class Attempt:
    name: str
    code: str
    judge: Judge
    layer: dict[str, str]  # backend → the layer that stops it ("*" for all)
    limits: Limits | None = None  # other than LIMITS, e.g. CPU enough to reach the memory limit

    def layer_for(self, backend: str) -> str:
        return self.layer.get(backend) or self.layer["*"]

    def source(self) -> str:
        """The code as run: it first says it started (printed, and a marker file for attempts
        that take their whole sandbox down, output and all), so a sandbox that never ran the
        code (a broken set-up) is never counted as a block."""
        return (f"print({STARTED!r}, flush=True)\n"
                f"open('/out/{MARKER}', 'w').write('1')\n{self.code}")  # fmt: skip

    @staticmethod
    def started(result: RunResult, ws: Workspace) -> bool:
        return STARTED in result.stdout or (ws.outputs / MARKER).is_file()

    def inconclusive(self, result: RunResult, ws: Workspace) -> bool:
        """The run says nothing about the sandbox: it never started, or a time limit ended
        an attempt judged by its own report before it could print one (its short body
        does not spin; the second of CPU went on starting Python on loaded cores)."""
        if not self.started(result, ws):
            return True
        cut_short = result.status in ("killed", "timeout") and any(
            phrase in (result.note or "") for phrase in ("CPU limit", "wall-clock limit")
        )
        return cut_short and self.judge in REPORTED and not _report(result)

    def judge_run(self, result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
        if not self.started(result, ws):
            return False, "never ran: " + (result.stderr.strip()[-50:] or result.status)
        return self.judge(result, ws, host)


def _report(result: RunResult) -> dict[str, str]:
    for line in result.stdout.splitlines():
        if line.startswith("VERDICT "):
            return dict(json.loads(line[len("VERDICT ") :]))
    return {}


def _outcome(result: RunResult) -> str:
    report = _report(result)
    verdict = report.get("error") or report.get("escaped")
    if verdict:
        return verdict[:60]
    if result.status == "error" and result.stderr.strip():
        return result.stderr.strip().splitlines()[-1][:60]
    return f"{result.status}" + (f" ({result.note[:50]})" if result.note else "")


def no_leak(result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
    return not host.leaked(result, ws), _outcome(result)


def contained(result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
    """Stopped by a limit (or by the code's own failure), the host untouched."""
    ok = result.status in ("killed", "timeout", "error") and not host.leaked(result, ws)
    return ok, _outcome(result)


def host_file_intact(result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
    return host.host_file.read_text() == "original\n" and not host.leaked(result, ws), _outcome(
        result
    )


def no_connection(result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
    return not host.connections and _report(result).get("error") is not None, _outcome(result)


def failed_inside(result: RunResult, ws: Workspace, host: Host) -> tuple[bool, str]:
    """The sandboxed call itself failed (reported by the code), nothing leaked."""
    return "error" in _report(result) and not host.leaked(result, ws), _outcome(result)


# Judges that read the attempt's own VERDICT line; a limit that ends it first proves nothing.
REPORTED: tuple[Judge, ...] = (failed_inside, no_connection)


def _try(body: str) -> str:
    """Wrap ``body`` so its exception (or success) is printed as one VERDICT line."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return (
        "import json, os, sys\n"
        "try:\n"
        f"{indented}\n"
        "    print('VERDICT ' + json.dumps({'ok': 'no error'}))\n"
        "except SystemExit as exc:\n"  # the attempt's own "it worked" signal
        "    print('VERDICT ' + json.dumps({'escaped': str(exc)}))\n"
        "except BaseException as exc:\n"
        "    print('VERDICT ' + json.dumps({'error': type(exc).__name__ + ': ' + str(exc)[:80]}))\n"
    )


def attempts(host: Host) -> list[Attempt]:
    h = host
    libc = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    check = "if r != 0:\n    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
    ns = {
        "bwrap": "seccomp (AF_INET/AF_INET6 sockets) + network namespace",
        "gvisor": "gVisor --network=none (loopback only)",
    }
    hidden = {"*": "mounts: only /in, /out, /usr, the env are visible"}
    pidns = {"*": "pid namespace: host processes are not visible"}
    ro = {"*": "read-only mounts and root"}
    a = [
        Attempt("outbound TCP to 1.1.1.1:443",
                _try("import socket\nsocket.create_connection(('1.1.1.1', 443), timeout=3)"),
                no_connection, ns),
        Attempt("TCP to a port listening on the host's loopback",
                _try(f"import socket\nsocket.create_connection(('127.0.0.1', {h.port}), "
                     "timeout=3)"), no_connection, ns),
        Attempt("outbound UDP datagram to 8.8.8.8:53",
                _try("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                     "s.sendto(b'x', ('8.8.8.8', 53))\ns.settimeout(2)\ns.recvfrom(10)"),
                no_connection, ns),
        Attempt("DNS lookup of example.com",
                _try("import socket\nsocket.getaddrinfo('example.com', 80)"), no_connection, ns),
        Attempt("read /etc/shadow",
                _try("print(open('/etc/shadow').read())"), failed_inside, hidden),
        Attempt("read the host's environment (os.environ)",
                _try(f"print(os.environ['{CANARY_ENV}'])"), failed_inside,
                {"*": "no host variable passes in (exact environment)"}),
        Attempt("read the host's environment via /proc/<host pid>/environ",
                _try(f"print(open('/proc/{h.pid}/environ').read())"), no_leak, pidns),
        Attempt("read another user's folder by host path",
                _try(f"print(open('{h.other_user_secret}').read())"), failed_inside, hidden),
        Attempt("read the project's data folder by host path",
                _try(f"print(open('{h.data_dir_secret}').read())"), failed_inside, hidden),
        Attempt("'..' out of /in to another user's folder",
                _try("print(open('/in/../../bob/in/secret.csv').read())"), failed_inside,
                hidden),
        Attempt("symlink planted in in/ pointing at a host secret",
                _try("print(open('/in/planted_link').read())"), failed_inside,
                {"*": "links resolve inside the sandbox's own root"}),
        Attempt("symlink left in out/ for the host to follow",
                _try(f"os.symlink('{h.host_file}', '/out/evil.txt')\n"
                     f"os.symlink('{h.other_user_secret}', '/out/secret.png')"), no_leak,
                {"*": "host reads out/ with O_NOFOLLOW and drops links"}),
        Attempt("write outside out/ (/usr, /in, /, the env)",
                _try("for p in ('/usr/evil', '/in/evil', '/evil', '/opt/oda/site/odaplot.py'):\n"
                     "    try:\n        open(p, 'w').write('x')\n"
                     "    except OSError:\n        continue\n"
                     "    raise SystemExit('wrote ' + p)\nraise PermissionError('all refused')"),
                host_file_intact, ro),
        Attempt("overwrite a host file by its host path",
                _try(f"open('{h.host_file}', 'w').write('owned')"), host_file_intact, hidden),
        Attempt("fork bomb",
                "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                "        pass\n", contained,
                {"gvisor": "RLIMIT_NPROC in the Sentry, host pids cgroup (sandbox removed)",
                 "bwrap": "pids cgroup / RLIMIT_NPROC, then the wall-clock kill"}),
        Attempt("memory bomb (3 GiB)",
                "x = []\nfor i in range(48):\n    x.append(b'\\x01' * (64 << 20))\n", contained,
                {"*": "memory cgroup / RLIMIT_AS"},
                LIMITS.model_copy(update={"cpu_s": 20, "wall_s": 20})),
        Attempt("CPU spin", "while True:\n    pass\n", contained,
                {"bwrap": "RLIMIT_CPU (SIGXCPU)",
                 "gvisor": "RLIMIT_CPU set inside (SIGXCPU)"}),
        Attempt("huge stdout", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
                contained, {"*": "output cap: killed past the limit"}),
        Attempt("huge file in out/",
                "with open('/out/big.bin', 'wb') as f:\n    for i in range(4096):\n"
                "        f.write(b'x' * (1 << 20))\n", contained,
                {"*": "RLIMIT_FSIZE (EFBIG: Python ignores SIGXFSZ)"}),
        Attempt("many files filling out/",
                _try("for i in range(12):\n"
                     "    open(f'/out/f{i}.bin', 'wb').write(b'x' * (1900 << 10))"),
                lambda r, w, h: (sum(f.bytes for f in w.outputs_list()) <= LIMITS.out_dir_bytes,
                                 _outcome(r)),
                {"*": "out/ size enforced after the run"}),
        Attempt("exhaust file descriptors",
                _try("fds = [open('/dev/null') for _ in range(100000)]"),
                failed_inside, {"*": "RLIMIT_NOFILE (EMFILE)"}),
        Attempt("ctypes mount() of the host's root",
                _try(libc + "r = libc.mount(b'/dev/vda', b'/tmp', b'ext4', 0, None)\n" + check),
                failed_inside, {"*": "no capabilities; seccomp (bwrap) / Sentry (gVisor)",
                                "gvisor": "gVisor Sentry: no host mounts"}),
        Attempt("raw syscall keyctl/bpf (kernel attack surface)",
                _try(libc + "r = libc.syscall(321, 0, 0, 0)\n" + check),
                failed_inside, {"bwrap": "seccomp filter (EPERM)",
                                "*": "gVisor Sentry: bpf() not passed to the host"}),
        Attempt("ptrace-attach to a host process",
                _try(libc + f"r = libc.ptrace(16, {h.pid}, None, None)\n" + check),
                failed_inside, {**pidns, "bwrap": "seccomp filter + pid namespace"}),
        Attempt("signal a host process (SIGTERM to the runner)",
                _try(f"import signal\nos.kill({h.pid}, signal.SIGTERM)"),
                lambda r, w, h: (True, _outcome(r)), pidns),
        Attempt("kill(-1) to every process it can see",
                _try("import signal\nos.kill(-1, signal.SIGKILL)"),
                lambda r, w, h: (True, _outcome(r)), pidns),
        Attempt("write /proc/sysrq-trigger and /proc/sys",
                _try("for p in ('/proc/sysrq-trigger', '/proc/sys/kernel/hostname'):\n"
                     "    try:\n        open(p, 'w').write('b')\n    except OSError:\n"
                     "        continue\n    raise SystemExit('wrote ' + p)\n"
                     "raise PermissionError('all refused')"), failed_inside,
                {"bwrap": "/proc/sys hidden (read-only tmpfs), no sysrq-trigger",
                 "gvisor": "gVisor's /proc: read-only sysctls, no sysrq"}),
        Attempt("read /proc/kcore and /dev/mem",
                _try("for p in ('/proc/kcore', '/dev/mem', '/dev/vda'):\n    try:\n"
                     "        open(p, 'rb').read(16)\n    except OSError:\n        continue\n"
                     "    raise SystemExit('read ' + p)\nraise PermissionError('all refused')"),
                failed_inside, {"*": "masked /proc, minimal /dev"}),
        Attempt("become root (setuid(0))", _try("os.setuid(0)"), failed_inside,
                {"*": "uid 65534, no capabilities, no_new_privs"}),
        Attempt("new user namespace to regain capabilities",
                _try(libc + "r = libc.unshare(0x10000000)\n" + check + "os.setuid(0)\n"
                     "open('/usr/evil', 'w').write('x')"), host_file_intact,
                {"bwrap": "seccomp filter (unshare EPERM)",
                 "*": "gVisor Sentry: namespaces stay inside the sandbox"}),
    ]  # fmt: skip
    return a


def _listener() -> tuple[socket.socket, list[str]]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    seen: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, addr = srv.accept()
            except OSError:
                return
            seen.append(str(addr))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, seen


def plant(root: Path) -> Host:
    """The host's secrets and watchers for one battery run."""
    canary = f"canary-{os.urandom(8).hex()}"
    os.environ[CANARY_ENV] = canary
    bob = Workspace(root / "sessions" / "bob")
    other = bob.put("secret.csv", f"{canary}\n".encode())
    data = root / "data"
    data.mkdir(parents=True)
    data_secret = data / "lake-secret.txt"
    data_secret.write_text(canary + "\n")
    host_file = root / "host-file.txt"
    host_file.write_text("original\n")
    srv, seen = _listener()
    return Host(root=root, canary=canary, other_user_secret=other, data_dir_secret=data_secret,
                host_file=host_file, port=srv.getsockname()[1], connections=seen,
                pid=os.getpid())  # fmt: skip


# What a limit's note says → the layer that ended the run (so the table names what did act).
LIMIT_LAYERS = {
    "CPU limit": "RLIMIT_CPU (SIGXCPU)",
    "wall-clock limit": "wall-clock kill",
    "printed more than": "output cap: killed past the limit",
    "a file grew past": "RLIMIT_FSIZE",
    "killed by the sandbox": "SIGKILL: memory cgroup / RLIMIT_AS / pids",
    "the sandbox ended during the job": "the executor's sandbox ended; relaunched for the next",
    "panic:": "the Sentry gave out (host pids/memory cgroup); sandbox removed",
}


def acting_layer(result: RunResult, planned: str) -> str:
    """The layer the result shows acted, else the one the attempt is meant to meet."""
    if result.status in ("killed", "timeout"):
        text = f"{result.note or ''} {result.stderr[-300:]}"
        for phrase, layer in LIMIT_LAYERS.items():
            if phrase in text:
                return layer
    return planned


@dataclass(frozen=True)
class Row:
    attempt: str
    blocked: bool
    outcome: str
    layer: str
    auditor: str


def run_battery(
    backend_name: str = "auto", root: Path | None = None, *, warm: bool = False
) -> tuple[str, list[Row]]:
    """Run every attempt; the backend's name and one row per attempt.

    By default each attempt gets a fresh sandbox (what ``code run`` does). ``warm`` runs them
    all in one warm executor on one workspace, relaunched when an attempt ends it (what a
    started MCP session does); the name then ends in ``+executor``.
    """
    backend = choose(backend_name)
    env = locate()
    with tempfile.TemporaryDirectory(prefix="oda-escapes-") as tmp:
        base = root or Path(tmp)
        host = plant(base)
        rows = []
        shared = Workspace(base / "sessions" / "alice") if warm else None
        if shared is not None:
            (shared.inputs / "planted_link").symlink_to(host.other_user_secret)
        executor: WarmExecutor | None = None
        for i, attempt in enumerate(attempts(host)):
            ws = shared or Workspace(base / "sessions" / f"alice-{i}")
            if shared is None:
                (ws.inputs / "planted_link").symlink_to(host.other_user_secret)
            else:
                ws.clear_outputs()
                if executor is None or not executor.alive:
                    executor = launch_executor(backend, env, ws.inputs, ws.outputs, LIMITS)
            limits = attempt.limits or LIMITS
            result = execute(attempt.source(), ws, backend=backend, limits=limits, env=env,
                             audited=False, executor=executor)  # fmt: skip
            if attempt.inconclusive(result, ws):
                # killed before its first line or its verdict (gVisor's Python took over a
                # second of CPU to start on two loaded cores in CI): that is no block and no
                # escape, so run it again with time to finish; an attempt that still never
                # runs counts as escaped, one still cut short is judged as it stands
                if shared is not None:
                    ws.clear_outputs()
                    if executor is None or not executor.alive:
                        executor = launch_executor(backend, env, ws.inputs, ws.outputs, LIMITS)
                roomy = limits.model_copy(update={"cpu_s": 5 * limits.cpu_s,
                                                  "wall_s": 5 * limits.wall_s})  # fmt: skip
                result = execute(attempt.source(), ws, backend=backend, limits=roomy, env=env,
                                 audited=False, executor=executor)  # fmt: skip
            blocked, outcome = attempt.judge_run(result, ws, host)
            high = [f for f in result.audit if f.severity == "high"]
            verdict = "refuses" if high else ("warns" if result.audit else "passes")
            layer = acting_layer(result, attempt.layer_for(backend.name))
            rows.append(Row(attempt.name, blocked, outcome, layer, verdict))  # fmt: skip
            if shared is None:
                ws.destroy()
        if executor is not None:
            executor.close()
        os.environ.pop(CANARY_ENV, None)
    return backend.name + ("+executor" if warm else ""), rows


def format_table(backend: str, rows: list[Row]) -> str:
    lines = [f"{'attempt':<54} {'result':<9} {'auditor':<8} {'outcome':<62} layer"]
    for r in rows:
        status = "blocked" if r.blocked else "ESCAPED"
        lines.append(f"{r.attempt:<54.54} {status:<9} {r.auditor:<8} {r.outcome:<62.62} {r.layer}")
    blocked = sum(r.blocked for r in rows)
    lines.append(f"sandbox: attempts={len(rows)} blocked={blocked} backend={backend}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=["auto", "gvisor", "bwrap"])
    parser.add_argument(
        "--warm",
        action="store_true",
        help="all attempts in one warm executor (a started MCP session)",
    )
    args = parser.parse_args(argv)
    backend, rows = run_battery(args.backend, warm=args.warm)
    print(format_table(backend, rows))
    return 0 if all(r.blocked for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
