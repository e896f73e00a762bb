"""The console script end to end: generate a small lake, then describe it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq

from fixtures_lake import cli_command
from oda_analyst.lake.schema import all_metrics, metric_schema


def _cli() -> list[str]:
    return cli_command()


def test_generate_then_describe(tmp_path: Path) -> None:
    env = {**os.environ, "ODA_DATA_DIR": str(tmp_path / "data")}
    lake = tmp_path / "lake"
    gen = subprocess.run(
        [*_cli(), "lake", "generate", "--profile", "tiny", "--out", str(lake), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert gen.returncode == 0, gen.stderr
    assert "partitions" in gen.stdout

    files = sorted(lake.rglob("a_0.parquet"))
    written = {
        (f.parent.parent.name.split("=", 1)[1], f.parent.name.split("=", 1)[1]) for f in files
    }
    expected = {(p if p == "job_table" else f"{p}_pub", m) for p, m in all_metrics()}
    assert written == expected
    for f in files[:: max(1, len(files) // 25)]:
        plugin = f.parent.parent.name.split("=", 1)[1].removesuffix("_pub")
        metric = f.parent.name.split("=", 1)[1]
        assert pq.read_schema(f).remove_metadata() == metric_schema(plugin, metric)

    desc = subprocess.run(
        [*_cli(), "lake", "describe", "--lake", str(lake), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert desc.returncode == 0, desc.stderr
    data = json.loads(desc.stdout)
    text = json.dumps(data)
    assert "ipmi" in text and "job_table" in text
    table = subprocess.run(
        [*_cli(), "lake", "describe", "--lake", str(lake)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert table.returncode == 0
    assert "22-06" in table.stdout
