"""``oda-analyst code run``: one JSON object, exit 0 only for ok."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from codeagent_helpers import png_size, require
from oda_analyst.cli import main


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()


def _run(runner: CliRunner, *args: str) -> tuple[int, dict[str, object]]:
    res = runner.invoke(main, ["code", "run", *args, "--json"])
    return res.exit_code, json.loads(res.output)


def test_ok_run_copies_outputs(runner: CliRunner, tmp_path: Path) -> None:
    require("bwrap")
    data = tmp_path / "data.csv"
    data.write_text("value\n1\n2\n3\n")
    script = tmp_path / "plot.py"
    script.write_text(
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "v = pd.read_csv('/in/data.csv')['value']\nprint(v.mean())\n"
        "plt.plot(v)\nplt.savefig('/out/p.png')\n"
    )
    code, out = _run(
        runner,
        str(script),
        "--input",
        str(data),
        "--out",
        str(tmp_path / "o"),
        "--backend",
        "bwrap",
        "--user",
        "carol",
    )
    assert code == 0 and out["status"] == "ok" and out["exit_code"] == 0
    assert out["stdout"] == "2.0\n" and out["backend"] == "bwrap"
    assert set(out) >= {
        "status",
        "exit_code",
        "stdout",
        "stderr",
        "files",
        "audit",
        "backend",
        "limits",
    }
    assert png_size(tmp_path / "o" / "p.png")[0] > 0
    assert not list((tmp_path / "data" / "codeagent").rglob("p.png"))  # the workspace is gone


def test_refused_is_exit_4_and_error_is_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    require("bwrap")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos.system('id')\n")
    code, out = _run(runner, str(bad), "--backend", "bwrap")
    assert code == 4 and out["status"] == "refused" and out["exit_code"] is None
    assert "os.system" in out["audit"][0]["message"]
    boom = tmp_path / "boom.py"
    boom.write_text("raise SystemExit(3)\n")
    code, out = _run(runner, str(boom), "--backend", "bwrap")
    assert code == 1 and out["status"] == "error" and out["exit_code"] == 3


def test_auto_says_which_backend_it_chose(runner: CliRunner, tmp_path: Path) -> None:
    require("gvisor")
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    res = runner.invoke(main, ["code", "run", str(script)])
    assert res.exit_code == 0
    assert res.output.splitlines()[0] == "hello"
    assert res.output.splitlines()[-1].startswith("status ok exit 0 backend gvisor")
