"""The warm executor a started session runs: fresh fork per job, limits per job, relaunch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codeagent_helpers import require
from oda_analyst.codeagent.backends.select import choose
from oda_analyst.codeagent.executor import WarmExecutor
from oda_analyst.codeagent.limits import MIB, Limits
from oda_analyst.codeagent.pyenv import locate
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.codeagent.workspace import Workspace


@pytest.fixture(params=["gvisor", "bwrap"])
def warm(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[WarmExecutor, Workspace]]:
    ws = Workspace(tmp_path / "alice")
    ex = WarmExecutor(choose(require(request.param)), locate(), ws.inputs, ws.outputs, Limits())
    yield ex, ws
    ex.close()
    assert not ex.alive


def test_jobs_share_nothing_but_the_imports(warm: tuple[WarmExecutor, Workspace]) -> None:
    ex, ws = warm
    first = execute(
        "import odaplot, sys\nodaplot.LEFT = 'x'\nsys.modules['planted'] = 1\n"
        "open('/out/a.txt', 'w').write('a')",
        ws,
        executor=ex,
    )
    second = execute(
        "import odaplot, sys\nprint(hasattr(odaplot, 'LEFT'), 'planted' in sys.modules,"
        " 'pandas' in sys.modules)",
        ws,
        executor=ex,
    )
    assert first.status == second.status == "ok"
    assert second.stdout.strip() == "False False True"  # pandas was imported once, before
    assert [f.name for f in second.files] == ["a.txt"]


def test_a_job_past_its_limits_leaves_the_executor_serving(
    warm: tuple[WarmExecutor, Workspace],
) -> None:
    ex, ws = warm
    slow = execute(
        "import time\nprint('a', flush=True)\ntime.sleep(30)",
        ws,
        executor=ex,
        limits=Limits(wall_s=1.5),
    )
    loud = execute(
        "while True:\n    print('x' * 4096)", ws, executor=ex, limits=Limits(output_bytes=8192)
    )
    after = execute("print('still here')", ws, executor=ex)
    assert slow.status == "timeout" and slow.stdout == "a\n"
    assert loud.status == "killed" and len(loud.stdout) <= 8192
    assert after.status == "ok" and after.stdout == "still here\n" and ex.alive


def test_a_memory_bomb_does_not_end_the_session(tmp_path: Path) -> None:
    require("bwrap")
    manager = SessionManager(tmp_path / "sessions", limits=Limits(memory_bytes=256 * MIB))
    manager.init("alice", "bwrap")
    manager.start("alice")
    bomb = manager.execute("alice", "x = []\nwhile True:\n    x.append(b'\\x01' * (32 << 20))")
    assert bomb.status in ("killed", "error") and bomb.exit_code != 0
    again = manager.execute("alice", "print(2 + 2)")
    assert again.status == "ok" and again.stdout == "4\n"
    assert manager.stop("alice") and manager.users() == []
