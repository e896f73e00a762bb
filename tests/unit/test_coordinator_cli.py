"""`oda-analyst chat`: questions one per line, a clarification answered inline, one
conversation; the coordinator runs on scripted MCP servers (tests/unit/test_coordinator_flow.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_coordinator_flow import Script, codeagent_server, completed, retriever_server

from oda_analyst import analyst
from oda_analyst.cli import main
from oda_analyst.config import load_settings
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.reading.read import read_now


def test_chat_answers_a_clarification_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Script()
    clarification = {"field": "metric", "question": "which temperature do you mean?",
                     "candidates": [{"metric": "ambient", "description": "inlet"}]}  # fmt: skip
    asked = {"status": "clarification", "request_id": "r-7", "answer": "which temperature?",
             "clarification": clarification}  # fmt: skip
    script.replies["query"] = [asked, completed()]
    script.replies["clarify"] = [completed()]

    def build(_: Any, backend: str = "nsa") -> Coordinator:
        assert backend == "nsa"  # chat's default: our retriever
        return Coordinator(load_settings(data_dir=tmp_path), retriever=retriever_server(script),
                           codeagent=codeagent_server(script), glossary={},
                           reader=read_now)  # fmt: skip

    monkeypatch.setattr(analyst, "build_coordinator", build)
    lines = "the temperature of node 900 on 1 June 2022\nambient\nHow many nodes?\nquit\n"
    result = CliRunner().invoke(main, ["chat", "--user", "alice", "--quiet"], input=lines)
    assert result.exit_code == 0, result.output
    assert "which temperature do you mean?" in result.output
    assert "1. ambient  inlet" in result.output
    assert result.output.count("[completed] Total: 1 row.") == 2
    assert ("clarify", {"request_id": "r-7", "answer": "ambient"}) in script.calls
    assert [t for t, _ in script.calls] == ["query", "clarify", "query"]
