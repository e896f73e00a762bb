"""When an escape attempt's run proves nothing and must be run again with more room."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sandbox_escapes
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.workspace import Workspace

STARTED = sandbox_escapes.STARTED + "\n"


def _attempts(tmp_path: Path) -> dict[str, sandbox_escapes.Attempt]:
    host = sandbox_escapes.plant(tmp_path / "host")
    return {a.name: a for a in sandbox_escapes.attempts(host)}


def _run(status: str, stdout: str, note: str | None = None) -> RunResult:
    return RunResult(status=status, exit_code=None, stdout=stdout, backend="gvisor",
                     limits=Limits(), note=note)  # fmt: skip


def test_a_reporting_attempt_cut_short_by_the_cpu_limit_is_run_again(tmp_path: Path) -> None:
    keyctl = _attempts(tmp_path)["raw syscall keyctl/bpf (kernel attack surface)"]
    ws = Workspace(tmp_path / "alice")
    cut = _run("killed", STARTED, "killed (CPU limit of 1 s reached)")
    assert keyctl.inconclusive(cut, ws)
    reported = _run("killed", STARTED + 'VERDICT {"error": "PermissionError"}\n',
                    "killed (CPU limit of 1 s reached)")  # fmt: skip
    assert not keyctl.inconclusive(reported, ws)
    assert not keyctl.inconclusive(_run("ok", STARTED), ws)


def test_an_attempt_meant_to_meet_a_limit_is_judged_as_it_stands(tmp_path: Path) -> None:
    spin = _attempts(tmp_path)["CPU spin"]
    ws = Workspace(tmp_path / "alice")
    assert not spin.inconclusive(_run("killed", STARTED, "killed (CPU limit of 1 s reached)"), ws)
    assert spin.inconclusive(_run("killed", "", "killed (CPU limit of 1 s reached)"), ws)
