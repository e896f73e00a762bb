"""A session manager given a remote sandbox runs no code here: the audit still refuses before
anything leaves the process, ``start`` asks the remote whether it can run, and each run's
/out comes back into the session's folder. The remote is a recorder: what is tested is what
the manager sends it and does with its answer (the operator's real remote, the user's sandbox
pod, is tested end to end in tests/e2e/operator/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import locate
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.errors import SandboxUnavailableError


@dataclass
class Recorder:
    name: str = "recorder"
    reason: str | None = None
    calls: list[tuple[str, str, list[str], float]] = field(default_factory=list)

    def unavailable_reason(self) -> str | None:
        return self.reason

    def run(self, user: str, source: str, inputs: Path, outputs: Path, limits: Limits
            ) -> Captured:  # fmt: skip
        names = sorted(p.name for p in inputs.iterdir())
        self.calls.append((user, source, names, limits.wall_s))
        (outputs / "seen.txt").write_text(",".join(names))
        return Captured(returncode=3, stdout="out\n", stderr="err\n", duration_s=0.25)


@pytest.fixture()
def no_local_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the operator's image: no sandbox environment to run code with here."""
    monkeypatch.setenv("ODA_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(SandboxUnavailableError):
        locate()


def test_a_remote_session_sends_the_script_and_gets_out_back(
    tmp_path: Path, no_local_sandbox: None
) -> None:
    remote = Recorder()
    manager = SessionManager(tmp_path / "sessions", remote=remote)
    manager.init("alice")
    session = manager.start("alice")
    assert session.state == "started" and session.backend_name == "recorder"
    manager.upload("alice", "data1.csv", "YSxiCjEsMgo=")
    result = manager.execute("alice", "print(open('/in/data1.csv').read())",
                             Limits(wall_s=12))  # fmt: skip
    assert remote.calls == [("alice", "print(open('/in/data1.csv').read())", ["data1.csv"], 12)]
    assert (result.status, result.exit_code, result.backend) == ("error", 3, "recorder")
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert [f.name for f in result.files] == ["seen.txt"]
    assert manager.artifact("alice", "seen.txt", 100) == b"data1.csv"


def test_refused_code_never_reaches_the_remote(tmp_path: Path, no_local_sandbox: None) -> None:
    remote = Recorder()
    manager = SessionManager(tmp_path / "sessions", remote=remote)
    manager.init("bob")
    manager.start("bob")
    result = manager.execute("bob", "import subprocess\nsubprocess.run(['id'])")
    assert result.status == "refused" and remote.calls == []


def test_a_remote_that_cannot_run_refuses_the_start(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path / "sessions",
                             remote=Recorder(reason="no query is being answered"))  # fmt: skip
    manager.init("carol")
    with pytest.raises(SandboxUnavailableError, match="no query is being answered"):
        manager.start("carol")
