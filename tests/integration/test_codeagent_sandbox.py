"""Real code in the real sandboxes (runsc and bwrap), and the escape battery in both."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from codeagent_helpers import require
from oda_analyst.codeagent.backends.base import UID, sandbox_environ
from oda_analyst.codeagent.backends.select import choose
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import locate
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sandbox_escapes

LIBS = ("pandas", "numpy", "matplotlib", "scipy", "sklearn", "seaborn", "statsmodels", "openpyxl")


@pytest.fixture(params=["gvisor", "bwrap"])
def backend(request: pytest.FixtureRequest) -> str:
    return require(request.param)


def test_auto_picks_gvisor_where_runsc_runs() -> None:
    require("gvisor")
    assert choose("auto").name == "gvisor"


def test_code_reads_in_writes_out_with_every_library(backend: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    frame = pl.DataFrame({"node": rng.integers(0, 5, 400), "value": rng.normal(30, 4, 400)})
    ws = Workspace(tmp_path / "alice")
    frame.write_csv(ws.inputs / "readings.csv")
    code = (  # the environment is read before the libraries add their own variables
        "import os, json, importlib.metadata as md\n"
        "print(json.dumps({'uid': os.getuid(), 'env': sorted(os.environ), 'cwd': os.getcwd()}))\n"
        f"import {', '.join(LIBS)}\n"
        "import pandas as pd\n"
        "df = pd.read_csv('/in/readings.csv')\n"
        "df.groupby('node')['value'].mean().to_csv('/out/means.csv')\n"
    )
    result = execute(code, ws, backend=backend)
    assert result.status == "ok", result.stderr
    assert result.backend == backend and result.exit_code == 0
    seen = json.loads(result.stdout.strip().splitlines()[0])
    assert seen["uid"] == UID
    assert set(seen["env"]) <= set(sandbox_environ(locate(), Limits())) | {"PWD", "LC_CTYPE"}
    assert [f.name for f in result.files] == ["means.csv"]
    got = pl.read_csv(ws.outputs / "means.csv").sort("node")
    want = frame.group_by("node").agg(pl.col("value").mean()).sort("node")
    assert got["node"].to_list() == want["node"].to_list()
    assert np.allclose(got["value"].to_numpy(), want["value"].to_numpy())


def test_refused_code_never_runs(backend: str, tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "alice")
    result = execute("import subprocess\nopen('/out/ran.txt', 'w').write('x')", ws, backend=backend)
    assert result.status == "refused" and result.exit_code is None
    assert result.audit[0].rule == "import" and "subprocess" in result.audit[0].message
    assert not (ws.outputs / "ran.txt").exists()


def test_a_failing_script_is_an_error_with_its_traceback(backend: str, tmp_path: Path) -> None:
    result = execute(
        "import pandas as pd\npd.read_csv('/in/missing.csv')",
        Workspace(tmp_path / "u"),
        backend=backend,
    )
    assert result.status == "error" and result.exit_code == 1
    assert "FileNotFoundError" in result.stderr and "/in/missing.csv" in result.stderr


def test_wall_clock_limit_kills_a_sleeper(backend: str, tmp_path: Path) -> None:
    # 5 s, not 2: on two loaded cores gVisor's Python took longer than 2 s to print 'before';
    # the sleeper still sleeps twelve times the limit
    limits = Limits(wall_s=5)
    result = execute(
        "import time\nprint('before', flush=True)\ntime.sleep(60)\nprint('after')",
        Workspace(tmp_path / "u"),
        backend=backend,
        limits=limits,
    )
    assert result.status == "timeout"
    assert "before" in result.stdout and "after" not in result.stdout


def test_escape_battery_blocks_every_attempt(backend: str, tmp_path: Path) -> None:
    name, rows = sandbox_escapes.run_battery(backend, root=tmp_path)
    table = sandbox_escapes.format_table(name, rows)
    assert name == backend
    assert len(rows) >= 25
    escaped = [r for r in rows if not r.blocked]
    assert escaped == [], table
    assert (
        table.splitlines()[-1]
        == f"sandbox: attempts={len(rows)} blocked={len(rows)} backend={backend}"
    )


def test_escape_battery_in_one_warm_executor(tmp_path: Path) -> None:
    """A started MCP session runs every script in one sandbox: the battery holds there too."""
    name, rows = sandbox_escapes.run_battery(require("bwrap"), root=tmp_path, warm=True)
    table = sandbox_escapes.format_table(name, rows)
    assert name == "bwrap+executor"
    assert [r for r in rows if not r.blocked] == [], table
