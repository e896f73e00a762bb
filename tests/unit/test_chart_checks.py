"""The chart checks catch each fault on a figure drawn to have it, pass a figure without it, and
every odaplot recipe, run on realistic small data (edge cases included), passes all of them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from chart_checks import Violation, check_figure, intercept
from oda_analyst.codeagent import pyenv
from oda_analyst.errors import SandboxUnavailableError

TESTS = Path(__file__).resolve().parents[1]


def _figure(draw: Callable[[Figure, Axes], None]) -> list[Violation]:
    fig, ax = plt.subplots(figsize=(10, 5.5))
    try:
        draw(fig, ax)
        fig.tight_layout()
        return check_figure(fig, units=("W",))
    finally:
        plt.close(fig)


def _good(fig: Figure, ax: Axes) -> None:
    """One series of node power, labelled, titled, its axes fitted to it."""
    ax.plot(np.arange(10), 1000 + 50 * np.sin(np.arange(10)), label="node 900")
    ax.set_xlabel("Sample (count)")
    ax.set_ylabel("Node power (W)")
    ax.set_title("Node power of node 900, 1 Jun 2022")


def _checks(violations: list[Violation]) -> set[str]:
    return {v.check for v in violations}


def test_a_good_figure_passes_every_check() -> None:
    assert _figure(_good) == []


def _bad_limits(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_xlim(-10, 30)  # the data fills a quarter of the axis: the padded time axis


def _overlapping_text(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.text(4, 1000, "1,012 W")
    ax.text(4.1, 1001, "1,013 W")


def _clipped_text(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("Node power of node 900 " * 8)  # one line of 190 characters


def _no_label(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_ylabel("")


def _no_unit(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_ylabel("Node power")


def _offset_scale(fig: Figure, ax: Axes) -> None:
    ax.plot(np.arange(10), 1.6e6 + np.arange(10), label="facility")
    ax.set_xlabel("Sample (count)")
    ax.set_ylabel("Facility power (W)")  # ticks read 1..10, '+1.6e6' in the corner
    ax.set_title("Facility power, 1 Jun 2022")


def _no_legend(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.plot(np.arange(10), 1000 + 50 * np.cos(np.arange(10)), label="node 920")


def _title_case(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("Average Node Power Of Node 900 Over The Day")


def _filler_title(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("Average IT power for all panels, 1 Jun 2022")


def _lower_case_title(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("average gpu power of node 900")


def _each_node_of_one(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("Node power for each node, 1 Jun 2022")


def _no_title(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_title("")


def _time_without_utc(fig: Figure, ax: Axes) -> None:
    start = datetime(2022, 6, 1, tzinfo=UTC)
    times = [start + timedelta(minutes=10 * i) for i in range(36)]
    ax.plot(times, 1000 + 50 * np.sin(np.arange(36) / 5), label="node 900")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz="UTC"))
    ax.set_xlabel("Time")
    ax.set_ylabel("Node power (W)")
    ax.set_title("Node power of node 900, 1 Jun 2022")


def _many_bars(fig: Figure, ax: Axes) -> None:
    names = [f"n{i}" for i in range(20)]
    ax.bar(names, 1000 + 10 * np.arange(20))
    ax.set_xlabel("Node")
    ax.set_ylabel("Average node power (W)")
    ax.set_title("Average node power per node, 1 Jun 2022")


def _other_unit(fig: Figure, ax: Axes) -> None:
    _good(fig, ax)
    ax.set_ylabel("Node power (kW)")  # the quantity is in W


@pytest.mark.parametrize(
    ("draw", "check"),
    [
        (_bad_limits, "limits"),
        (_overlapping_text, "overlap"),
        (_clipped_text, "clipped"),
        (_no_label, "label"),
        (_no_unit, "unit"),
        (_offset_scale, "unit"),
        (_other_unit, "unit"),
        (_no_legend, "legend"),
        (_title_case, "title"),
        (_filler_title, "title"),
        (_lower_case_title, "title"),
        (_each_node_of_one, "title"),
        (_no_title, "title"),
        (_time_without_utc, "utc"),
        (_many_bars, "categories"),
    ],
)
def test_each_check_catches_its_fault(draw: Callable[[Figure, Axes], None], check: str) -> None:
    found = _figure(draw)
    assert check in _checks(found), found


def test_twins_with_one_scale_are_one_axis_and_twins_with_two_are_two() -> None:
    """Two periods of one figure drawn on twin axes of the same range fill it together; with
    their own ranges, each axis must be filled by its own line."""

    def twins(same: bool) -> Callable[[Figure, Axes], None]:
        def draw(fig: Figure, ax: Axes) -> None:
            x = np.arange(7)
            a = ax.plot(x, 1000 + 10 * x, label="week 1")
            ax2 = ax.twinx()
            b = ax2.plot(x, 1200 + 10 * x, color="C1", label="week 2")
            ax.set_ylim(990, 1270)
            ax2.set_ylim(990, 1270) if same else ax2.set_ylim(1000, 1500)
            ax.set_xlabel("Day of the period (count)")
            ax.set_ylabel("Node power, week 1 (W)")
            ax2.set_ylabel("Node power, week 2 (W)")
            ax.legend(a + b, ["week 1", "week 2"])
            ax.set_title("Node power per day, two weeks compared")

        return draw

    assert _figure(twins(same=True)) == []
    assert "limits" in _checks(_figure(twins(same=False)))


def test_intercept_checks_a_figure_before_it_is_saved(tmp_path: Path) -> None:
    seen: list[tuple[str, list[Violation]]] = []
    fig, ax = plt.subplots()
    _no_label(fig, ax)
    with intercept(lambda f, name: seen.append((name, check_figure(f)))):
        fig.savefig(tmp_path / "chart.png", dpi=120)
    plt.close(fig)
    assert [name for name, _ in seen] == ["chart.png"]
    assert "label" in _checks(seen[0][1])
    assert (tmp_path / "chart.png").stat().st_size > 0


def _sandbox_python() -> Path:
    """The sandbox's own Python (pandas, matplotlib) runs the recipes, as it does in the
    sandbox; the suite's environment has no pandas."""
    try:
        return pyenv.locate().python
    except SandboxUnavailableError as err:
        pytest.skip(f"the sandbox's Python environment is not built: {err}")


def test_every_odaplot_recipe_passes_every_check(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(_sandbox_python()), str(TESTS / "chart_checks.py"), "--json", "--keep",
         str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.stdout, done.stderr[-3000:]
    found = json.loads(done.stdout)
    recipes = {name.split("_")[0] for name in found}
    # every chart recipe odaplot offers is drawn, with its edge cases
    assert {"line", "histogram", "bar", "pie", "heatmap", "dual", "scatter", "box", "daily",
            "energy"} <= recipes  # fmt: skip
    assert len(found) >= 20
    bad = {name: v for name, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(f"{n}.png" for n in found)
