"""Per-user sandbox sessions: the lifecycle behind the MCP tools (init → start → … → stop).

One session per user, with its own workspace ``<root>/<user>/`` (in/ and out/); no call names
another user's folder, so one user never sees another's files. A caller that runs several
requests of one user at once names a session for each (``session``): each named session has its
own sandbox and folders (``<root>/<user>+<session>/``), so one request never reads the inputs
another uploaded under the same name, nor takes its outputs ('+' is in no user or file name, so
a session's folder is never a user's). A session unused for
``idle_s`` seconds is reaped (its folders removed) at the next call of any user, so an
abandoned sandbox holds nothing for long. A started session has one warm sandbox
(``executor.WarmExecutor``) and each run is a fresh fork in it; a sandbox a limit ended is
relaunched at the next run. A user's runs are serialised by the session's lock.

A manager given a ``RemoteSandbox`` runs no code on this host: ``start`` only asks the remote
whether it can run, and each ``execute`` (after the same audit) sends the script and the
session's /in there, and gets its /out back into the session's folder.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from oda_analyst.codeagent.auditor import audit, blocking
from oda_analyst.codeagent.backends.base import Backend
from oda_analyst.codeagent.backends.remote import RemoteSandbox
from oda_analyst.codeagent.backends.select import NAMES, choose
from oda_analyst.codeagent.executor import WarmExecutor, launch_executor
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import SandboxEnv, ensure
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace, safe_name
from oda_analyst.errors import SandboxError, SandboxUnavailableError, UsageError

MAX_UPLOAD_BYTES = 64 * 2**20
DEFAULT_IDLE_S = 900.0
DEFAULT_SESSION = "default"


def owner_key(user: str, session: str = DEFAULT_SESSION) -> str:
    """The key (and folder name) of ``user``'s session ``session``: the user alone for the
    default session, else '<user>+<session>' (each part a plain name, or UsageError)."""
    safe_name(user)
    return user if session == DEFAULT_SESSION else f"{user}+{safe_name(session)}"


@dataclass
class Session:
    """One user's sandbox: its folders, the backend it asked for and the one it got."""

    user: str
    workspace: Workspace
    requested: str
    last_used: float
    backend: Backend | None = None
    env: SandboxEnv | None = None
    executor: WarmExecutor | None = None
    remote: RemoteSandbox | None = None  # set at start when the manager runs code remotely
    runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def state(self) -> str:
        return "started" if self.backend is not None or self.remote is not None else "created"

    @property
    def backend_name(self) -> str | None:
        if self.remote is not None:
            return self.remote.name
        return None if self.backend is None else self.backend.name


class NoSessionError(SandboxError):
    """The user has no session, or it was reaped: call codeagent_init."""

    code = "no_session"


class SessionManager:
    """The sessions of this process, under ``root``."""

    def __init__(
        self,
        root: Path,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        remote: RemoteSandbox | None = None,
    ) -> None:
        self.root = root
        self.remote = remote
        self.idle_s = idle_s
        self.limits = limits or Limits()
        self.clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._stop_reaper = threading.Event()

    def start_reaper(self, every_s: float = 30.0) -> threading.Thread:
        """Reap idle sessions every ``every_s`` seconds in a daemon thread, so an abandoned
        sandbox is ended even when no call comes (started once per manager)."""
        if self._reaper is None:
            stop = self._stop_reaper

            def loop() -> None:
                while not stop.wait(every_s):
                    self.reap_idle()

            self._reaper = threading.Thread(target=loop, name="codeagent-reaper", daemon=True)
            self._reaper.start()
        return self._reaper

    def stop_reaper(self) -> None:
        self._stop_reaper.set()

    def reap_idle(self) -> list[str]:
        """Stop every session idle longer than ``idle_s``; the users whose sessions went."""
        now = self.clock()
        with self._lock:
            idle = [
                u
                for u, s in self._sessions.items()
                if now - s.last_used > self.idle_s and not s.lock.locked()
            ]
            gone = [self._sessions.pop(u) for u in idle]
        for s in gone:
            _end(s)
        return idle

    def _get(self, user: str) -> Session:
        self.reap_idle()
        with self._lock:
            session = self._sessions.get(user)
        if session is None:
            raise NoSessionError(
                f"user {user} has no code-agent session (none, or reaped "
                f"after {self.idle_s:g} s idle)",
                hint="call codeagent_init",
            )
        session.last_used = self.clock()
        return session

    def init(self, user: str, backend: str = "auto", session: str = DEFAULT_SESSION) -> Session:
        """Create the user's session (or return the existing one: init is idempotent). The
        other calls name it by ``owner_key(user, session)``."""
        if backend not in NAMES:
            raise UsageError(f"unknown sandbox backend {backend!r}", hint="auto, gvisor or bwrap")
        key = owner_key(user, session)
        self.reap_idle()
        with self._lock:
            found = self._sessions.get(key)
            if found is None:
                found = Session(user=user, workspace=Workspace(self.root / key),
                                requested=backend, last_used=self.clock())  # fmt: skip
                self._sessions[key] = found
            found.last_used = self.clock()
            return found

    def start(self, user: str) -> Session:
        """Pick the backend (auto: gVisor, then bwrap) and launch the warm executor; or refuse."""
        session = self._get(user)
        if self.remote is not None:
            reason = self.remote.unavailable_reason()
            if reason is not None:
                raise SandboxUnavailableError(
                    f"the {self.remote.name} sandbox cannot run code now: {reason}",
                    hint="see the operator's log and docs/operator.md",
                )
            session.remote = self.remote
            return session
        with session.lock:
            if session.backend is None:
                session.env = ensure()
                session.backend = choose(session.requested)
            self._launch(session)
        return session

    def _launch(self, session: Session) -> WarmExecutor:
        if session.executor is None or not session.executor.alive:
            assert session.backend is not None and session.env is not None
            ws = session.workspace
            session.executor = launch_executor(
                session.backend, session.env, ws.inputs, ws.outputs, self.limits
            )
        return session.executor

    def upload(self, user: str, name: str, content_base64: str) -> int:
        """Decode base64 into in/<name>; the size in bytes."""
        session = self._get(user)
        if len(content_base64) > MAX_UPLOAD_BYTES * 4 // 3 + 4:
            raise UsageError(
                f"upload larger than {MAX_UPLOAD_BYTES} bytes",
                hint="send fewer rows or split the file",
            )
        try:
            data = base64.b64decode(content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise UsageError(
                "content_base64 is not valid base64",
                hint="encode the file's bytes with standard base64",
            ) from None
        session.workspace.put(name, data)
        return len(data)

    def execute(self, user: str, code: str, limits: Limits | None = None) -> RunResult:
        """Audit and run ``code`` in the session's warm sandbox, in a fresh fork."""
        session = self._get(user)
        if session.remote is not None:
            with session.lock:
                result = execute(code, session.workspace, limits=limits or self.limits,
                                 remote=session.remote, user=session.user)  # fmt: skip
                session.runs += 1
                session.last_used = self.clock()
            return result
        if session.backend is None or session.env is None:
            raise SandboxError("the sandbox is not started", hint="call codeagent_start first")
        with session.lock:
            lim = limits or self.limits
            if blocking(audit(code)):  # refused: no sandbox needed, none launched
                return execute(code, session.workspace, limits=lim, executor=None)
            # A sandbox that a limit ended (or that a job outlived) is relaunched, fresh.
            executor = self._launch(session)
            result = execute(code, session.workspace, limits=lim, executor=executor)
            session.runs += 1
            session.last_used = self.clock()
        return result

    def artifact(self, user: str, name: str, max_bytes: int) -> bytes:
        return self._get(user).workspace.read_output(name, max_bytes)

    def outputs(self, user: str) -> list[str]:
        return [f.name for f in self._get(user).workspace.outputs_list()]

    def inputs(self, user: str) -> list[str]:
        folder = self._get(user).workspace.inputs
        return sorted(p.name for p in folder.iterdir() if p.is_file())

    def stop(self, user: str) -> bool:
        """Remove the user's session and folders; False when there was none."""
        with self._lock:
            session = self._sessions.pop(user, None)
        if session is None:
            return False
        with session.lock:
            _end(session)
        return True

    def users(self) -> list[str]:
        with self._lock:
            return sorted(self._sessions)


def _end(session: Session) -> None:
    if session.executor is not None:
        session.executor.close()
        session.executor = None
    session.workspace.destroy()
