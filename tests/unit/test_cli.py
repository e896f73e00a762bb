from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from oda_analyst.cli import main


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_help_documents_every_setting(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("ODA_LAKE", "ODA_DATA_DIR", "ODA_LLM_BASE_URL", "ODA_REDIS_URL", "lake"):
        assert name in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["lake", "generate", "--profile", "no-such-profile", "--out", "{tmp}"],
        ["lake", "generate", "--profile", "tiny", "--nodes", "0-x", "--out", "{tmp}"],
        ["lake", "generate", "--profile", "tiny", "--plugins", "ipmy", "--out", "{tmp}"],
        [
            "lake",
            "generate",
            "--profile",
            "tiny",
            "--start",
            "2022-06-01T10:00",
            "--end",
            "2022-06-01T09:00",
            "--out",
            "{tmp}",
        ],
        ["lake", "generate", "--profile", "tiny", "--metrics", "flux_capacitor", "--out", "{tmp}"],
    ],
)
def test_bad_generate_input_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    result = runner.invoke(main, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output
    assert "hint:" in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.rglob("*.parquet"))


def test_describe_of_a_missing_lake_fails_clearly(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["lake", "describe", "--lake", str(tmp_path / "nothing")])
    assert result.exit_code == 1
    assert "error:" in result.output
    assert "hint:" in result.output


def test_doctor_without_a_model(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ODA_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("ODA_LLM_MODEL", raising=False)
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 0 and "none configured" in result.output


def test_doctor_with_an_unreachable_model(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("ODA_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("ODA_LLM_MODEL", "smollm2")
    result = runner.invoke(main, ["doctor", "--json"])
    assert result.exit_code == 1
    assert '"answers": false' in result.output and "cannot reach" in result.output
