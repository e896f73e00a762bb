"""The coordinator's charts of job tables (issue 29): a pie or bar of a count or total per
partition or final state, a day/hour line of a job figure, a histogram or box plot of each job's
run time or queue wait, each with its figures stated in words. A pie of what is no part of a
whole (a median per partition) is refused, saying what fits. The scripts are run with the
sandbox's odaplot, their figures checked by tests/chart_checks.py as they are saved.

Before, each of these charts was refused ('a pie chart needs one total per part', 'no result
holds individual readings', 'cannot draw a line plot over time of this data').
"""

from __future__ import annotations

import ast
import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.codeagent import pyenv
from oda_analyst.codeagent.auditor import audit, blocking
from oda_analyst.coordinator.charts import ChartError, ChartJob, bind
from oda_analyst.coordinator.figures import recipe_sentence, table_sentence, time_unit_sentence
from oda_analyst.errors import SandboxUnavailableError

TESTS = Path(__file__).resolve().parents[1]
SITE = TESTS.parent / "operator" / "oda_analyst" / "codeagent" / "sandbox_site"
DAY = ("2022-06-03T00:00:00Z", "2022-06-04T00:00:00Z")
STATES = [["CANCELLED", 183], ["COMPLETED", 2914], ["FAILED", 290], ["NODE_FAIL", 56],
          ["OUT_OF_MEMORY", 77], ["TIMEOUT", 237]]  # fmt: skip
PARTS = ["m100_all_serial", "m100_usr_dbg", "m100_usr_prod"]


def result(columns: list[str], rows: list[list[Any]], understood: str,
           window: tuple[str, str] = DAY) -> dict[str, Any]:  # fmt: skip
    return {
        "columns": columns, "rows": rows, "row_count": len(rows), "csv_handle": None,
        "understood_as": understood,
        "plan": {"target": "jobs", "metrics": [], "entities": [{"kind": "job", "all": True}],
                 "window": {"start": window[0], "end": window[1]}},
    }  # fmt: skip


def _listing(column: str, group: str | None, n: int = 60) -> dict[str, Any]:
    cols = ["job_id", "start_time", "end_time", "num_nodes", column, *([group] if group else [])]
    rows = []
    for i in range(n):
        value = round(0.05 + (i * 7919 % 97) / 9.7 * (1 + i % 3), 4)
        row: list[Any] = [1000 + i, "2022-06-03T01:00:00Z", "2022-06-03T02:00:00Z", 1, value]
        rows.append(row + ([PARTS[i % 3]] if group else []))
    return result(cols, rows, "Jobs that started with queue wait (minutes), 3 Jun 2022.")


def _run(job: ChartJob, results: list[dict[str, Any]], tmp: Path,
         units: tuple[str, ...]) -> tuple[list[str], dict[str, Any]]:  # fmt: skip
    """Run the script with the sandbox's odaplot: the chart checks' violations, figures.json."""
    ast.parse(job.script)
    assert blocking(audit(job.script)) == [], audit(job.script)
    try:
        python = pyenv.locate().python
    except SandboxUnavailableError as err:
        pytest.skip(f"the sandbox's Python environment is not built: {err}")
    for i in job.inputs:
        res = results[i]
        lines = [",".join(res["columns"])]
        lines += [",".join("" if v is None else str(v) for v in row) for row in res["rows"]]
        (tmp / f"r{i + 1}.csv").write_text("\n".join(lines) + "\n")
    (tmp / "script.py").write_text(job.script)
    runner = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(TESTS)!r}, {str(SITE)!r}]\n"
        "from chart_checks import check_figure, intercept\n"
        "found = []\n"
        f"record = lambda fig, name: found.extend(str(v) for v in check_figure(fig, "
        f"units={units!r}))\n"
        "with intercept(record):\n"
        f"    exec(open({str(tmp / 'script.py')!r}).read(), {{}})\n"
        "print('VIOLATIONS', json.dumps(found))\n"
    )
    env = {"ODA_IN": str(tmp), "ODA_OUT": str(tmp), "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(python), "-c", runner], capture_output=True, text=True,
                          timeout=240, check=False, env=env, cwd=tmp)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("VIOLATIONS "))
    for out in job.outputs:
        assert (tmp / out.name).exists(), out.name
    figures = tmp / "figures.json"
    return json.loads(line.removeprefix("VIOLATIONS ")), (
        json.loads(figures.read_text()) if figures.exists() else {}
    )


def test_a_pie_of_jobs_per_final_state(tmp_path: Path) -> None:
    res = result(["job_state", "count_job"], STATES, "Number of jobs that ended per final state.")
    job = bind("pie", [res], {})
    assert "value='count_job'" in job.script and "df['part'] = df['job_state']" in job.script
    violations, figures = _run(job, [res], tmp_path, ())
    assert violations == []
    # each wedge's share is stated, largest first (analysis1 A44 asked for the shares)
    assert recipe_sentence(figures, compare=False) == (
        "Shares of the total 3,757: COMPLETED 77.6 % (2,914); FAILED 7.7 % (290); TIMEOUT 6.3 % "
        "(237); CANCELLED 4.9 % (183); OUT_OF_MEMORY 2.0 % (77); NODE_FAIL 1.5 % (56)."
    )
    said = table_sentence(res, compare=False)
    assert said is not None and "COMPLETED: count job 2,914" in said
    assert "Total over the 6 final states: count job 3,757" in said


def test_a_pie_of_cpu_hours_per_partition_draws_the_hours_not_the_job_count(
    tmp_path: Path,
) -> None:
    rows = [["m100_all_serial", 27500.4, 245], ["m100_usr_dbg", 6182.0, 257],
            ["m100_usr_prod", 2074016.9, 3704]]  # fmt: skip
    res = result(
        ["partition", "sum_cpu_hours", "count_job"], rows, "Total CPU hours per partition."
    )
    job = bind("pie", [res], {})
    assert "value='sum_cpu_hours'" in job.script and "unit='h'" in job.script
    violations, _ = _run(job, [res], tmp_path, ())  # a pie has no axis: its unit is in its words
    assert violations == []


def test_a_pie_of_what_is_no_part_of_a_whole_is_refused_saying_what_fits() -> None:
    rows = [[p, 60.0 + i, 100] for i, p in enumerate(PARTS)]
    res = result(["partition", "median_queue_wait_min", "count_job"], rows, "Median queue wait.")
    with pytest.raises(ChartError, match="parts of a whole") as err:
        bind("pie", [res], {})
    assert "a bar chart fits" in err.value.message
    bars = bind("bar", [res], {})  # the chart that fits it
    assert "values='median_queue_wait_min'" in bars.script and "unit='min'" in bars.script


def test_bars_per_partition_draw_the_total_and_state_the_job_count() -> None:
    rows = [[p, 10.0 * (i + 1), 5 * (i + 1)] for i, p in enumerate(PARTS)]
    res = result(
        ["partition", "sum_gpu_hours", "count_job"], rows, "Total GPU hours per partition."
    )
    job = bind("bar", [res], {})
    assert "values='sum_gpu_hours'" in job.script and "count_job" not in job.script.split("bar(")[1]
    assert "df['category'] = df['partition']" in job.script


def test_a_daily_line_of_gpu_hours_and_its_peak_in_words(tmp_path: Path) -> None:
    days = [[f"2022-06-0{d}", 59000.0 + 700 * (d % 4), 4200 + d] for d in range(1, 8)]
    res = result(["day", "sum_gpu_hours", "count_job"], days, "Total GPU hours per day.",
                 window=("2022-06-01T00:00:00Z", "2022-06-08T00:00:00Z"))  # fmt: skip
    job = bind("line", [res], {})
    assert "x='day', y='sum_gpu_hours'" in job.script
    violations, _ = _run(job, [res], tmp_path, ("h",))
    assert violations == []
    said = table_sentence(res, compare=False)
    assert said is not None and "Highest sum gpu hours: 2022-06-03 (61,100 h)" in said


def test_an_hourly_count_of_more_groups_than_are_listed_still_states_its_total() -> None:
    hours = [[f"2022-06-08T{h:02d}:00:00Z", 100 + (h * 37) % 90] for h in range(24)]
    res = result(["hour", "count_job"], hours, "Number of jobs that were submitted per hour.")
    said = table_sentence(res, compare=False)
    assert said is not None
    top = max(hours, key=lambda r: r[1])
    assert f"2022-06-08 {top[0][11:16]} UTC: count job {top[1]}" in said
    assert f"Total over the 24 hours: count job {sum(r[1] for r in hours):,}" in said


def test_a_histogram_of_run_times_states_their_median(tmp_path: Path) -> None:
    res = _listing("duration_h", None)
    job = bind("histogram", [res], {})
    assert "column='duration_h'" in job.script and "noun='jobs'" in job.script
    violations, figures = _run(job, [res], tmp_path, ("h",))
    assert violations == []
    values = [r[4] for r in res["rows"]]
    group = figures["groups"]["all"]
    assert group["median"] == pytest.approx(statistics.median(values))
    said = recipe_sentence(figures, compare=False)
    assert said is not None and said.startswith("Run time: min")
    assert "(60 jobs)" in said and "median" in said and " h" in said


def test_a_box_plot_of_queue_waits_per_partition_states_each_median(tmp_path: Path) -> None:
    res = _listing("queue_wait_min", "partition")
    job = bind("box", [res], {})
    assert "value='queue_wait_min'" in job.script and "unit='min'" in job.script
    violations, figures = _run(job, [res], tmp_path, ("min",))
    assert violations == []
    for part in PARTS:
        values = [r[4] for r in res["rows"] if r[5] == part]
        assert figures["groups"][part]["median"] == pytest.approx(statistics.median(values))
    said = recipe_sentence(figures, compare=False)
    assert said is not None and "m100_usr_dbg: min" in said and "min (20 jobs)" in said


def test_run_times_asked_in_minutes_are_drawn_and_stated_in_minutes(tmp_path: Path) -> None:
    # analysis2 Y29: '…with the median of each in minutes' was answered in hours
    res = _listing("duration_h", "partition")
    job = bind("box", [res], {}, figures=("median", "time_unit:min"))
    assert "unit='min'" in job.script and "* 60.0" in job.script
    violations, figures = _run(job, [res], tmp_path, ("min",))
    assert violations == []
    for part in PARTS:
        hours = [r[4] for r in res["rows"] if r[5] == part]
        assert figures["groups"][part]["median"] == pytest.approx(statistics.median(hours) * 60)
    hist = bind("histogram", [res], {}, figures=("time_unit:min",))
    (tmp_path / "hist").mkdir()
    _, figures = _run(hist, [res], tmp_path / "hist", ("min",))
    assert figures["unit"] == "min"
    assert figures["groups"]["all"]["max"] == pytest.approx(max(r[4] for r in res["rows"]) * 60)


def test_a_median_per_partition_is_stated_in_the_unit_asked() -> None:
    res = result(["partition", "median_duration_h", "count_job"],
                 [["m100_usr_dbg", 0.148333, 251], ["m100_usr_prod", 1.63139, 3253]],
                 "Median job duration (h) per partition.")  # fmt: skip
    said = table_sentence(res, compare=False, time_unit="min")
    assert said is not None and "median run time 8.9 min" in said and "97.88 min" in said
    assert "count job 251" in said  # counts keep their unit
    assert "1.631 h" in (table_sentence(res, compare=False) or "")
    one = result(["avg_duration_h", "count_job"], [[3.076, 3733]], "Average job duration.")
    assert time_unit_sentence(one, "min") == "In minutes: mean run time 184.56 min."
    assert time_unit_sentence(one, None) is None
