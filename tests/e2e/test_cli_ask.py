"""``oda-analyst ask`` / ``clarify`` / ``csv`` end to end: the console script on a generated lake.

Each command is a new process, so a clarification answered by ``clarify`` is resumed from the
checkpoint file alone (a restart). Checked: the JSON contract of DESIGN.md, the exit codes
(0 completed, 3 clarification, 4 rejected, 1 failed, 2 usage/config error), relative windows
anchored by ``--as-of``, and two-line ``error:``/``hint:`` messages with no traceback. Expected
rows are read from the lake's Parquet files with Polars.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import cli_command, tiny_power_lake
from oda_analyst.errors import AccessDeniedError

POWER_Q = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
TEMP_Q = "the temperature of node 900 on 1 June 2022 from 00:10 to 00:20"
FLUX_Q = "the flux capacitor reading of node 900 on 1 June 2022"
RELATIVE_Q = "the total power of node 900 in the last 10 minutes"
CONTRACT = {"status", "answer", "rows", "columns", "csv", "sparql", "plan", "artifacts",
            "clarification", "request_id", "tokens", "timings"}  # fmt: skip


def _cli() -> list[str]:
    return cli_command()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def env(
    lake: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment of every command: the lake, a data folder, the shared cache folder with
    the catalogue's embedding vectors (built once), no other ODA_ setting."""
    cache = shared_cache_dir(request, tmp_path_factory)
    data = tmp_path_factory.mktemp("data")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    return {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data), "ODA_CACHE_DIR": str(cache),
            "HF_HUB_OFFLINE": "1"}  # fmt: skip


def run(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_cli(), *args], capture_output=True, text=True, env={**env, **extra}, timeout=600,
        check=False,
    )  # fmt: skip


def answer(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object ``--json`` prints (the whole of stdout)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict) and set(data) >= CONTRACT, sorted(data)
    return data


def lake_values(lake: Path, metric: str, start: str, end: str) -> list[np.float32]:
    files = str(lake / f"year_month=22-06/plugin=ipmi_pub/metric={metric}/*.parquet")
    lo, hi = (pl.lit(t).str.to_datetime(time_zone="UTC") for t in (start, end))
    df = (
        pl.read_parquet(files, hive_partitioning=False)
        .filter((pl.col("node").cast(pl.String) == "900") & (pl.col("timestamp") >= lo)
                & (pl.col("timestamp") < hi))
        .sort("timestamp")
    )  # fmt: skip
    return [np.float32(v) for v in df["value"]]


def values(rows: list[list[Any]]) -> list[np.float32]:
    return [np.float32(r[-1]) for r in rows]


def assert_clean_error(proc: subprocess.CompletedProcess[str], code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert any(line.startswith("error: ") for line in lines), proc.stderr
    assert any(line.startswith("hint: ") for line in lines), proc.stderr
    assert "Traceback" not in proc.stderr


# --- completed, clarification, rejected, failed -------------------------------------------------


def test_completed_answer_follows_the_json_contract(env: dict[str, str], lake: Path) -> None:
    proc = run(env, "ask", POWER_Q, "--json", "--user", "alice")
    assert proc.returncode == 0, proc.stderr
    data = answer(proc)
    assert data["status"] == "completed" and data["clarification"] is None
    assert data["columns"] == ["node_id", "metric_name", "timestamp", "value"]
    expected = lake_values(lake, "total_power", "2022-06-01T00:00:00", "2022-06-01T01:00:00")
    assert values(data["rows"]) == expected and data["row_count"] == len(expected) > 0
    assert data["csv"] is None and data["artifacts"] == []
    assert "SELECT" in data["sparql"] and "total_power" in data["sparql"]
    assert data["plan"]["window"] == {"start": "2022-06-01T00:00:00Z",
                                      "end": "2022-06-01T01:00:00Z"}  # fmt: skip
    assert len(data["request_id"]) == 32 and isinstance(data["tokens"], dict)
    assert {"input_validation", "vkg_sparql_execution"} <= set(data["timings"])


def test_large_result_is_a_csv_file_with_a_handle(env: dict[str, str], lake: Path) -> None:
    proc = run(env, "ask", POWER_Q, "--json", "--user", "alice", ODA_ROW_LIMIT="5")
    assert proc.returncode == 0, proc.stderr
    data = answer(proc)
    assert data["rows"] is None and data["csv"]
    # Each produced file is an artefact with its media type (the coordinator's answer).
    assert [(a["path"], a["media_type"]) for a in data["artifacts"]] == [(data["csv"], "text/csv")]
    lines = Path(data["csv"]).read_text().splitlines()
    assert lines[0] == "node_id,metric_name,timestamp,value"
    expected = lake_values(lake, "total_power", "2022-06-01T00:00:00", "2022-06-01T01:00:00")
    assert [np.float32(line.rsplit(",", 1)[1]) for line in lines[1:]] == expected

    mine = run(env, "csv", data["csv_handle"], "--user", "alice")
    assert mine.returncode == 0 and mine.stdout.strip() == data["csv"]
    theirs = run(env, "csv", data["csv_handle"], "--user", "bob")
    assert_clean_error(theirs, AccessDeniedError.exit_code)


def test_clarification_is_answered_in_a_new_process(env: dict[str, str], lake: Path) -> None:
    asked = run(env, "ask", TEMP_Q, "--json", "--user", "alice")
    assert asked.returncode == 3, asked.stderr
    data = answer(asked)
    assert data["status"] == "clarification" and data["rows"] is None
    clarification = data["clarification"]
    assert clarification["field"] == "metric" and clarification["question"]
    assert "ambient" in {c["metric"] for c in clarification["candidates"]}

    rid = data["request_id"]
    other = run(env, "clarify", rid, "ambient", "--json", "--user", "bob")
    assert_clean_error(other, 2)
    done = run(env, "clarify", rid, "ambient", "--json", "--user", "alice")
    assert done.returncode == 0, done.stderr
    result = answer(done)
    assert result["status"] == "completed" and result["request_id"] == rid
    expected = lake_values(lake, "ambient", "2022-06-01T00:10:00", "2022-06-01T00:20:00")
    assert values(result["rows"]) == expected
    again = run(env, "clarify", rid, "ambient", "--user", "alice")
    assert again.returncode == 2 and "asks no question" in again.stderr
    assert "Traceback" not in again.stderr


def test_rejected_question_exits_4_with_progress_in_text_mode(env: dict[str, str]) -> None:
    text = run(env, "ask", FLUX_Q, "--user", "alice")
    assert text.returncode == 4, text.stderr
    assert "input validation" in text.stderr  # the progress display
    assert "flux capacitor" in text.stdout and "Traceback" not in text.stderr
    js = run(env, "ask", FLUX_Q, "--json", "--user", "alice")
    assert js.returncode == 4
    data = answer(js)
    assert data["status"] == "rejected" and data["error"]["code"] == "rejected"
    assert data["error"]["hint"] and data["rows"] is None and data["sparql"] is None


def fresh_data_dir(tmp_path: Path) -> str:
    """A new, empty ODA_DATA_DIR (no cached VKG); the embedding vectors are in ODA_CACHE_DIR."""
    data = tmp_path / "fresh-data"
    data.mkdir()
    return str(data)


def test_unreadable_lake_fails_with_exit_1(env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "empty-lake"
    empty.mkdir()
    data = fresh_data_dir(tmp_path)
    proc = run(env, "ask", POWER_Q, "--json", "--user", "alice", ODA_LAKE=str(empty),
               ODA_DATA_DIR=data)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    result = answer(proc)
    # the lake is checked before any graph is built: the error names the lake, not a build
    assert result["status"] == "failed" and result["error"]["code"] == "lake_not_found"
    assert "no year_month=YY-MM partitions" in result["error"]["message"]
    assert result["error"]["hint"]


def test_vkg_cache_does_not_outlive_a_change_of_lake(env: dict[str, str], tmp_path: Path) -> None:
    data = fresh_data_dir(tmp_path)
    first = run(env, "ask", POWER_Q, "--json", "--user", "alice", ODA_DATA_DIR=data)
    assert first.returncode == 0, first.stderr
    empty = tmp_path / "empty-lake"
    empty.mkdir()
    moved = run(env, "ask", POWER_Q, "--json", "--user", "alice", ODA_LAKE=str(empty),
                ODA_DATA_DIR=data)  # fmt: skip
    assert answer(moved)["status"] == "failed"  # the key names the lake: no stale rows


# --- relative windows --------------------------------------------------------------------------


@pytest.mark.parametrize("as_of", ["2022-06-01T00:30Z", "2022-06-01T02:30:00+02:00"])
def test_as_of_anchors_relative_windows(env: dict[str, str], lake: Path, as_of: str) -> None:
    proc = run(env, "ask", RELATIVE_Q, "--json", "--as-of", as_of, "--user", "alice")
    assert proc.returncode == 0, proc.stderr
    data = answer(proc)
    assert data["plan"]["window"] == {"start": "2022-06-01T00:20:00Z",
                                      "end": "2022-06-01T00:30:00Z"}  # fmt: skip
    expected = lake_values(lake, "total_power", "2022-06-01T00:20:00", "2022-06-01T00:30:00")
    assert values(data["rows"]) == expected


# --- bad input: exit 2, two lines, no traceback -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("ask", "   "), {}),
        (("ask", POWER_Q, "--as-of", "yesterday"), {}),
        (("clarify", "no-such-request", "ambient"), {}),
        (("clarify", "../../etc", "ambient"), {}),
        (("csv", "not-a-handle"), {}),
        (("ask", POWER_Q), {"ODA_ROW_LIMIT": "0"}),
        (("ask", POWER_Q), {"ODA_LAKE": "http://example.org/lake"}),
    ],
    ids=[
        "empty-question",
        "bad-as-of",
        "unknown-request",
        "bad-request-id",
        "bad-handle",
        "bad-row-limit",
        "bad-lake-uri",
    ],
)
def test_bad_input_exits_2_with_error_and_hint(
    env: dict[str, str], args: tuple[str, ...], extra: dict[str, str]
) -> None:
    assert_clean_error(run(env, *args, "--user", "alice", **extra), 2)


def test_missing_argument_is_a_usage_error(env: dict[str, str]) -> None:
    proc = run(env, "ask")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "QUESTION" in proc.stderr
