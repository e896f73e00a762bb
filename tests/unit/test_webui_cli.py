"""`oda-analyst ui` and `ui-hash-password` from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from oda_analyst.cli import main
from oda_analyst.config import get_settings
from oda_analyst.webui.auth import load_credentials, verify


def test_ui_hash_password_prints_a_line_the_ui_accepts(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["ui-hash-password", "--user", "alice", "--password", "pw"])
    assert result.exit_code == 0, result.output
    line = result.output.strip()
    assert line.startswith("alice:$argon2id$")
    file = tmp_path / "users"
    file.write_text(line + "\n")
    assert verify(load_credentials(file, None), "alice", "pw")


def test_ui_without_users_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ODA_UI_USERS_FILE", raising=False)
    monkeypatch.delenv("ODA_UI_USERS", raising=False)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["ui", "--port", "1"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2, result.output
    assert "no user may sign in" in result.output
    assert "Traceback" not in result.output


def test_ui_with_oidc_but_no_issuer_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ODA_UI_AUTH", "oidc")
    monkeypatch.delenv("ODA_UI_OIDC_ISSUER", raising=False)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["ui", "--port", "1"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2, result.output
    assert "ODA_UI_OIDC_ISSUER" in result.output
    assert "Traceback" not in result.output
