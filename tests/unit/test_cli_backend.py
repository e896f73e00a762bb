"""`ask --backend`: the paper's baselines answer through the same command and answer shape."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baseline_lake import write_baseline_lake
from oda_analyst import analyst
from oda_analyst.backends import BACKENDS, SERVER_NAMES, in_process_server, mcp_server
from oda_analyst.cli import main
from oda_analyst.config import load_settings
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.errors import ConfigError
from oda_analyst.reading.read import read_now


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


def _ask(lake: Path, data: Path, *args: str) -> tuple[int, dict[str, object]]:
    env = {"ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data)}
    result = CliRunner().invoke(main, ["ask", *args, "--json", "--quiet"], env=env)
    return result.exit_code, json.loads(result.stdout)


def test_sota1_answers_its_form_and_refuses_others(lake: Path, tmp_path: Path) -> None:
    code, answer = _ask(
        lake,
        tmp_path,
        "--backend",
        "sota1",
        "total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]",
    )
    assert code == 0 and answer["backend"] == "sota1" and answer["row_count"] == 30
    code, answer = _ask(
        lake,
        tmp_path,
        "--backend",
        "sota1",
        "total power of node 900 on 1 June 2022 from 00:00 to 00:10",
    )
    assert code == 4 and answer["status"] == "rejected"


def test_sota2_answers_by_name_match(lake: Path, tmp_path: Path) -> None:
    code, answer = _ask(
        lake,
        tmp_path,
        "--backend",
        "sota2",
        "total power of node 900 on 1 June 2022 from 00:00 to 00:10",
    )
    assert code == 0 and answer["backend"] == "sota2" and answer["row_count"] == 30


def test_a_baseline_answer_comes_through_the_coordinator(lake: Path, tmp_path: Path) -> None:
    """`ask --backend` runs the coordinator with the baseline as its retriever: the answer is
    the coordinator's (tasks, dispatch counters, a trace file) and says who retrieved."""
    code, answer = _ask(
        lake,
        tmp_path,
        "--backend",
        "sota2",
        "total power of node 900 on 1 June 2022 from 00:00 to 00:10",
    )
    assert code == 0 and answer["backend"] == "sota2"
    assert answer["dispatches"] == {"retriever.query": 1}
    tasks = answer["tasks"]
    assert isinstance(tasks, list) and tasks[0]["status"] == "completed"
    assert Path(str(answer["trace"])).is_file()


def test_replay_of_a_baseline_request_says_it_keeps_no_provenance(
    lake: Path, tmp_path: Path
) -> None:
    code, answer = _ask(
        lake,
        tmp_path,
        "--backend",
        "sota1",
        "total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]",
    )
    assert code == 0
    env = {"ODA_LAKE": str(lake), "ODA_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["replay", str(answer["request_id"])], env=env)
    assert result.exit_code == 2
    assert "sota1 baseline, which keeps no provenance" in result.output


def test_each_backend_s_server_answers_to_its_registered_name() -> None:
    """The coordinator checks a retrieval server's name against SERVER_NAMES: they must agree."""
    assert {b: mcp_server(b).name for b in BACKENDS} == SERVER_NAMES


def _chat(lake: Path, data: Path, backend: str, *questions: str) -> str:
    env = {"ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data)}
    lines = "".join(f"{q}\n" for q in questions) + "quit\n"
    result = CliRunner().invoke(main, ["chat", "--quiet", "--backend", backend], input=lines,
                                env=env)  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_chat_retrieves_through_the_chosen_baseline(lake: Path, tmp_path: Path) -> None:
    """`chat --backend`: SoTA#1 answers its strict form and refuses the plain one at once (it
    never asks back); SoTA#2 reads the plain one by name match."""
    strict = "total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]"
    plain = "total power of node 900 on 1 June 2022 from 00:00 to 00:10"
    one = _chat(lake, tmp_path / "s1", "sota1", strict, plain)
    finals = [line.split("]")[0] for line in one.splitlines() if line.startswith("[")]
    assert finals == ["[completed", "[rejected"]
    assert "archetype node_series: 30 row(s)" in one
    assert "not in the [YYYY-MM-DD HH:MM:SS] format" in one and "your answer" not in one
    two = _chat(lake, tmp_path / "s2", "sota2", plain)
    assert [line.split("]")[0] for line in two.splitlines() if line.startswith("[")] == [
        "[completed"
    ]


def test_a_retrieval_server_of_another_backend_is_refused(lake: Path, tmp_path: Path) -> None:
    """A coordinator for ours wired to SoTA#1's server stops before asking anything."""
    settings = load_settings(lake=str(lake), data_dir=tmp_path)
    coordinator = Coordinator(settings, retriever=in_process_server("sota1", settings),
                              codeagent=analyst.codeagent_target(settings), glossary={},
                              reader=read_now,
                              backend="nsa", retriever_server=SERVER_NAMES["nsa"])  # fmt: skip
    question = "total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]"
    with pytest.raises(ConfigError, match="is 'oda-sota1-exasage', not 'oda-retriever'"):
        asyncio.run(coordinator.ask(question, user="alice"))
