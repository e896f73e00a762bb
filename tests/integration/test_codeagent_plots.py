"""Chart recipes for Appendix-A questions, run in the real sandbox on CSVs made here.

The CSVs are synthesised with Polars/numpy in the shape the retriever returns (the sandbox
never touches the lake). Statistics the recipes print are checked against Polars on the same
files; the PNGs are checked for being PNGs of the intended size (someone looked at them: the
layout fixes in odaplot came from that).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from codeagent_helpers import png_size, require
from oda_analyst.codeagent import recipes
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace

DAY = datetime(2022, 6, 1, tzinfo=UTC)
WIDE = (1200, 660)  # 10 x 5.5 in at 120 dpi


def _times(start: datetime, n: int, step_s: int) -> list[str]:
    return [
        (start + timedelta(seconds=step_s * i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)
    ]


def write_inputs(folder: Path) -> None:
    """One CSV per question, seeded."""
    rng = np.random.default_rng(2022)
    pl.DataFrame(
        {
            "timestamp": _times(DAY + timedelta(hours=20), 720, 20),
            "value": 1200 + 200 * np.sin(np.arange(720) / 50) + rng.normal(0, 30, 720),
        }
    ).write_csv(folder / "q2_power.csv")
    q3 = [
        pl.DataFrame(
            {
                "node": [node] * 420,
                "timestamp": _times(DAY + timedelta(hours=8), 420, 60),
                "value": np.clip(
                    50 + 40 * np.sin(np.arange(420) / 60 + node) + rng.normal(0, 5, 420), 0, 100
                ),
            }
        )
        for node in (900, 920)
    ]
    pl.concat(q3).write_csv(folder / "q3_gpu0.csv")
    temps = np.concatenate([rng.normal(23.5, 1.2, 170_000), rng.normal(41, 1, 6_000)])
    pl.DataFrame({"node": rng.integers(0, 980, temps.size), "value": temps}).write_csv(
        folder / "q4_inlet.csv"
    )
    n = 24 * 60
    pl.DataFrame(
        {
            "timestamp": _times(DAY, n, 60),
            "power": 1500 + 300 * np.sin(np.arange(n) / 229) + rng.normal(0, 40, n),
            "ambient": 24 + 3 * np.sin(np.arange(n) / 229 - 0.5) + rng.normal(0, 0.2, n),
        }
    ).write_csv(folder / "q6_node900.csv")
    jobs = {"3423336": (60, 8), "4835969": (40, 30), "3776044": (80, 2)}
    pl.concat(
        [
            pl.DataFrame({"job": [j] * 300, "gpu_util": np.clip(rng.normal(m, s, 300), 0, 100)})
            for j, (m, s) in jobs.items()
        ]
    ).write_csv(folder / "q7_gpu.csv")
    pl.DataFrame({"kind": ["CPU hours", "GPU hours"], "hours": [15234.5, 6021.25]}).write_csv(
        folder / "q8_hours.csv"
    )
    q9 = [
        pl.DataFrame(
            {
                "job": [name] * len(r),
                "timestamp": _times(DAY + timedelta(hours=a), len(r), 300),
                "power": 800 + 100 * k + rng.normal(0, 50, len(r)),
            }
        )
        for k, (name, a, r) in enumerate(
            (("job 111", 0, range(240)), ("job 222", 2, range(240)), ("job 333", 5, range(228)))
        )
    ]
    pl.concat(q9).write_csv(folder / "q9_jobs.csv")
    starts = [
        DAY + timedelta(days=d, seconds=int(s))
        for d in range(10)
        for s in rng.integers(0, 86_400, int(rng.integers(800, 1500)))
    ]
    pl.DataFrame({"start_time": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in starts]}).write_csv(
        folder / "q12_jobs.csv"
    )
    m, base = 120, rng.normal(0, 1, 120)
    pl.DataFrame(
        {
            "ambient": 24 + base * 0.5 + rng.normal(0, 0.3, m),
            "cpu": 50 + base * 10 + rng.normal(0, 5, m),
            **{
                f"gpu{i}": 60 + base * 8 * (1 if i % 2 else -1) + rng.normal(0, 6, m)
                for i in range(4)
            },
            "power": 1500 + base * 100 + rng.normal(0, 20, m),
        }
    ).write_csv(folder / "q13.csv")
    users = [
        (f"user{k:02d}", float(rng.normal(300 + 40 * k, 60)))
        for k in range(10)
        for _ in range(int(rng.integers(20, 80)))
    ]
    pl.DataFrame(users, schema=["user", "power"], orient="row").write_csv(folder / "q14.csv")


R = recipes.script
SCRIPT = "\n".join(
    [
        R(
            "line",
            data="q2_power.csv",
            x="timestamp",
            y="value",
            ylabel="Total power",
            unit="W",
            title="Q2 · Total power of node 900, 1 June 2022 20:00–23:59 UTC",
            out="q2.png",
        ),
        R(
            "line",
            data="q3_gpu0.csv",
            x="timestamp",
            y="value",
            series="node",
            series_label="node",
            ylabel="GPU-0 utilisation",
            unit="%",
            out="q3.png",
            title="Q3 · GPU-0 utilisation of nodes 900 and 920, 1 June 2022 08:00–15:00 UTC",
        ),
        R(
            "histogram",
            data="q4_inlet.csv",
            column="value",
            xlabel="Inlet temperature",
            unit="°C",
            title="Q4 · Inlet temperature of all nodes, 1 June 2022 08:00–09:00 UTC",
            out="q4.png",
        ),
        R(
            "dual_axis",
            data="q6_node900.csv",
            x="timestamp",
            left="power",
            right="ambient",
            left_label="Total power",
            left_unit="W",
            right_label="Ambient temperature",
            right_unit="°C",
            title="Q6 · Node 900 on 1 June 2022: power and temperature",
            out="q6.png",
        ),
        R("coefficient_of_variation", data="q7_gpu.csv", value="gpu_util", by="job", out="q7.json"),
        R(
            "pie",
            data="q8_hours.csv",
            label="kind",
            value="hours",
            unit="h",
            out="q8.png",
            title="Q8 · CPU and GPU hours, morning of 1 June 2022",
        ),
        R(
            "line",
            data="q9_jobs.csv",
            x="timestamp",
            y="power",
            series="job",
            series_label="",
            stats=True,
            ylabel="Node power",
            unit="W",
            out="q9.png",
            title="Q9 · Power of the three longest single-node jobs, 1 June 2022",
        ),
        R("summary", data="q9_jobs.csv", value="power", by="job", out="q9.json"),
        R(
            "daily_counts",
            data="q12_jobs.csv",
            time="start_time",
            ylabel="Jobs",
            out="q12.png",
            out_csv="q12.csv",
            title="Q12 · Jobs started per day, 1–10 June 2022",
        ),
        R(
            "heatmap",
            data="q13.csv",
            columns=["ambient", "cpu", "gpu0", "gpu1", "gpu2", "gpu3", "power"],
            labels=[
                "ambient temp.",
                "CPU util.",
                "GPU-0 util.",
                "GPU-1 util.",
                "GPU-2 util.",
                "GPU-3 util.",
                "total power",
            ],
            title="Q13 · Node 900, 1 June 2022 12:00–14:00 UTC: correlations",
            out="q13.png",
        ),
        R(
            "box",
            data="q14.csv",
            group="user",
            value="power",
            ylabel="Average job power",
            unit="W",
            group_label="User",
            title="Q14 · Job power of the top-10 users by jobs",
            out="q14.png",
        ),
    ]
)
# Q7's bar chart plots what the CV recipe computed in the same sandbox run.
SCRIPT += """
import json, pandas as pd
cv = json.load(open('/out/q7.json'))
pd.DataFrame({'job': list(cv), 'cv_percent': [v['cv_percent'] for v in cv.values()]}).to_csv(
    '/tmp/q7_cv.csv', index=False)
odaplot.bar(data='/tmp/q7_cv.csv', category='job', values='cv_percent', category_label='Job id',
            ylabel='CV of GPU utilisation', unit='%', out='q7.png',
            title='Q7 · Coefficient of variation of GPU utilisation per job')
"""
PNGS: dict[str, tuple[int, int]] = {
    "q2.png": WIDE,
    "q3.png": WIDE,
    "q4.png": WIDE,
    "q6.png": WIDE,
    "q7.png": WIDE,
    "q8.png": (900, 720),
    "q9.png": WIDE,
    "q12.png": WIDE,
    "q13.png": (1020, 840),
    "q14.png": WIDE,
}


@dataclass
class Run:
    result: RunResult
    inputs: Path
    outputs: Path


@pytest.fixture(scope="module")
def gvisor_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    require("gvisor")
    ws = Workspace(tmp_path_factory.mktemp("plots") / "analyst")
    write_inputs(ws.inputs)
    result = execute(SCRIPT, ws, backend="gvisor")
    return Run(result, ws.inputs, ws.outputs)


def test_every_question_gets_its_png(gvisor_run: Run) -> None:
    result = gvisor_run.result
    assert result.status == "ok", result.stderr[-2000:]
    assert result.audit == []
    names = {f.name for f in result.files}
    assert set(PNGS) <= names
    for name, size in PNGS.items():
        width, height = png_size(gvisor_run.outputs / name)
        assert (width, height) == size, name
        assert (gvisor_run.outputs / name).stat().st_size > 15_000, f"{name} looks empty"


def test_q9_min_max_avg_match_polars(gvisor_run: Run) -> None:
    got = json.loads((gvisor_run.outputs / "q9.json").read_text())
    want = (
        pl.read_csv(gvisor_run.inputs / "q9_jobs.csv")
        .group_by("job")
        .agg(
            pl.len().alias("count"),
            pl.col("power").min().alias("min"),
            pl.col("power").max().alias("max"),
            pl.col("power").mean().alias("avg"),
        )
    )
    assert set(got) == set(want["job"])
    for row in want.iter_rows(named=True):
        stats = got[row["job"]]
        assert stats["count"] == row["count"]
        for key in ("min", "max", "avg"):
            assert stats[key] == pytest.approx(row[key], rel=1e-12)


def test_q7_coefficient_of_variation_matches_numpy(gvisor_run: Run) -> None:
    got = json.loads((gvisor_run.outputs / "q7.json").read_text())
    frame = pl.read_csv(gvisor_run.inputs / "q7_gpu.csv")
    for job, part in frame.group_by("job"):
        values = part["gpu_util"].to_numpy()
        assert got[str(job[0])]["cv"] == pytest.approx(values.std() / values.mean(), rel=1e-9)


def test_q12_daily_counts_match_polars(gvisor_run: Run) -> None:
    got = pl.read_csv(gvisor_run.outputs / "q12.csv")
    want = (
        pl.read_csv(gvisor_run.inputs / "q12_jobs.csv")
        .with_columns(pl.col("start_time").str.slice(0, 10).alias("day"))
        .group_by("day")
        .agg(pl.len().alias("count"))
        .sort("day")
    )
    assert got["day"].to_list() == want["day"].to_list()
    assert got["count"].to_list() == want["count"].to_list()


def test_the_histogram_recipe_runs_in_bwrap_too(tmp_path: Path) -> None:
    require("bwrap")
    ws = Workspace(tmp_path / "analyst")
    write_inputs(ws.inputs)
    code = R(
        "histogram",
        data="q4_inlet.csv",
        column="value",
        xlabel="Inlet temperature",
        unit="°C",
        title="Q4",
        out="q4.png",
    )
    result = execute(code, ws, backend="bwrap")
    assert result.status == "ok", result.stderr[-2000:]
    assert png_size(ws.outputs / "q4.png") == WIDE


def test_rolling_mean_series_figures_and_scatter_match_polars(tmp_path: Path) -> None:
    """The new analysis recipes, in the real sandbox, against Polars on the same file: a trailing
    10-minute rolling mean (partial windows dropped), its per-series figures with a percentile,
    and a scatter's Pearson and Spearman coefficients with its n."""
    require("bwrap")
    ws = Workspace(tmp_path / "analyst")
    write_inputs(ws.inputs)
    rng = np.random.default_rng(7)
    util = rng.uniform(10, 90, 240)
    pl.DataFrame({"u": util, "p": 100 + 2 * util + rng.normal(0, 8, 240)}).write_csv(
        ws.inputs / "pairs.csv"
    )
    code = "\n".join([
        "import odaplot",
        "odaplot.rolled('q3_gpu0.csv', 'value', minutes=10, series='node')",
        "odaplot.series_figures('/tmp/rolled.csv', 'value', series='node', label='GPU 0',"
        " unit='%', extra=['p95'])",
        "odaplot.scatter('pairs.csv', x='u', y='p', title='P against U', xlabel='U', ylabel='P',"
        " out='pairs.png', out_json='pairs.json')",
    ]) + "\n"  # fmt: skip
    result = execute(code, ws, backend="bwrap")
    assert result.status == "ok", result.stderr[-2000:]
    got = json.loads((ws.outputs / "figures.json").read_text())
    frame = pl.read_csv(ws.inputs / "q3_gpu0.csv").with_columns(
        pl.col("timestamp").str.to_datetime(time_zone="UTC")
    )
    for node, part in frame.sort("timestamp").group_by("node"):
        smooth = part.with_columns(pl.col("value").rolling_mean_by("timestamp", "10m"))
        kept = smooth.filter(pl.col("timestamp") >= part["timestamp"][0] + timedelta(minutes=10))
        figures = got["groups"][str(node[0])]
        assert figures["count"] == kept.height
        assert figures["max"] == pytest.approx(kept["value"].max(), rel=1e-9)
        assert figures["avg"] == pytest.approx(kept["value"].mean(), rel=1e-9)
        assert figures["p95"] == pytest.approx(
            kept["value"].quantile(0.95, interpolation="linear"), rel=1e-9
        )
    pairs = json.loads((ws.outputs / "pairs.json").read_text())
    table = pl.read_csv(ws.inputs / "pairs.csv")
    assert pairs["n"] == 240
    assert pairs["pearson"] == pytest.approx(table.select(pl.corr("u", "p")).item(), rel=1e-9)
    assert pairs["spearman"] == pytest.approx(
        table.select(pl.corr("u", "p", method="spearman")).item(), rel=1e-9
    )
    assert png_size(ws.outputs / "pairs.png") == WIDE
