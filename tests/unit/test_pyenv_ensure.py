"""The sandbox's Python environment is built on its first use, not by the main job's set-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oda_analyst.codeagent import pyenv
from oda_analyst.errors import SandboxUnavailableError


def test_a_built_environment_is_used_as_it_is(tmp_path: Path) -> None:
    root = pyenv.env_dir(tmp_path)
    root.mkdir(parents=True)
    (root / pyenv.READY).write_text(json.dumps({"base_prefix": sys.base_prefix, "python": "3"}))
    assert pyenv.ensure(tmp_path).root == root


def test_a_missing_environment_is_built_with_a_word_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[Path | None] = []

    def build(cache: Path | None = None, *, quiet: bool = True) -> pyenv.SandboxEnv:
        built.append(cache)
        root = pyenv.env_dir(cache)
        root.mkdir(parents=True, exist_ok=True)
        (root / pyenv.READY).write_text(json.dumps({"base_prefix": sys.base_prefix}))
        return pyenv.locate(cache)

    monkeypatch.setattr(pyenv, "build", build)
    env = pyenv.ensure(tmp_path)
    assert built == [tmp_path] and env.root == pyenv.env_dir(tmp_path)
    assert "building the sandbox's Python environment once" in capsys.readouterr().err


def test_a_build_that_fails_is_a_sandbox_error_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(cache: Path | None = None, *, quiet: bool = True) -> pyenv.SandboxEnv:
        raise subprocess.CalledProcessError(1, ["pip", "install"])

    monkeypatch.setattr(pyenv, "build", build)
    with pytest.raises(SandboxUnavailableError) as info:
        pyenv.ensure(tmp_path)
    assert info.value.hint and "pyenv build" in info.value.hint
