"""Two processes on one data folder: a second ``oda-analyst ask`` waits for the embedded graph
store the first holds (saying so on stderr) and answers once it is free, or fails clearly when
its wait (ODA_STORE_LOCK_WAIT_S) runs out. The first process is a real holder of the store
(``open_store`` on the same settings) that lets go when the test tells it to, so each state is
reached by events, not by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import cli_command, tiny_power_lake
from processes import stop_process

POWER_Q = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
WAITING = "is in use by another process; waiting for it"
HOLDER = """
import sys
from oda_analyst.config import load_settings
from oda_analyst.vkg.factory import open_store
store = open_store(load_settings())
print("held", flush=True)
sys.stdin.readline()
store.close()
print("released", flush=True)
"""


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture
def env(
    lake: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
) -> dict[str, str]:  # fmt: skip
    cache = shared_cache_dir(request, tmp_path_factory)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    return {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(tmp_path / "data"),
            "ODA_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}  # fmt: skip


@pytest.fixture
def holder(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    if proc.stdin and not proc.stdin.closed:
        proc.stdin.close()
    stop_process(proc)


def _ask(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*cli_command(), "ask", POWER_Q, "--json"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_a_second_ask_waits_for_the_store_and_answers(
    env: dict[str, str], holder: subprocess.Popen[str]
) -> None:
    asker = _ask({**env, "ODA_STORE_LOCK_WAIT_S": "300"})
    assert asker.stderr is not None
    seen = []
    for line in asker.stderr:  # until it says it waits (or ends, which fails below)
        seen.append(line)
        if WAITING in line:
            break
    assert any(WAITING in line for line in seen), "".join(seen)
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.close()
    out, err = asker.communicate(timeout=600)
    assert asker.returncode == 0, "".join(seen) + err
    answer = json.loads(out)
    assert answer["status"] == "completed" and answer["row_count"] > 0


def test_a_second_ask_fails_clearly_when_its_wait_runs_out(
    env: dict[str, str], holder: subprocess.Popen[str]
) -> None:
    asker = _ask({**env, "ODA_STORE_LOCK_WAIT_S": "1"})
    _, err = asker.communicate(timeout=600)
    assert asker.returncode == 1
    assert WAITING in err
    assert "locked by another process (waited 1 s)" in err and "ODA_SPARQL_ENDPOINT" in err
    assert holder.poll() is None  # the holder was never disturbed
