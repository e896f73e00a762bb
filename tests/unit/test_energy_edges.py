"""Energy of a day of one-minute readings is 24 hours of power, not 23 h 59 min: every reading
stands for the interval around it, half a step held at each end (analysis5 V33 stated the site's
IT energy of 1 June as 19.735 MWh against 19.748; the last minute was never counted). Run with
the sandbox's own Python and odaplot."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.codeagent import pyenv
from oda_analyst.errors import SandboxUnavailableError

SITE = (
    Path(__file__).resolve().parents[2] / "operator" / "oda_analyst" / "codeagent" / "sandbox_site"
)
SCRIPT = """
import json, sys
sys.path.insert(0, {site!r})
import numpy as np, pandas as pd
import odaplot
t = pd.date_range('2022-06-01', periods=1440, freq='1min', tz='UTC')
df = pd.DataFrame({{'timestamp': t, 'value': 60.0}})
day = odaplot.energy(df, 'value', 'kW', bucket='hour')
gap = pd.concat([df.iloc[:60], df.iloc[180:240]])  # two hours two hours apart
print(json.dumps({{'day': day, 'gap': odaplot.energy(gap, 'value', 'kW')}}))
"""


def _run_in_sandbox_python(script: str, tmp_path: Path) -> Any:
    """Run ``script`` with the sandbox's own Python (in and out in ``tmp_path``) and return the
    JSON its last line prints; skip where that environment is not built."""
    try:
        python = pyenv.locate().python
    except SandboxUnavailableError as err:
        pytest.skip(f"the sandbox's Python environment is not built: {err}")
    env = {"ODA_IN": str(tmp_path), "ODA_OUT": str(tmp_path), "MPLBACKEND": "Agg",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_day_of_minute_readings_is_twenty_four_hours_of_power(tmp_path: Path) -> None:
    found = _run_in_sandbox_python(SCRIPT.format(site=str(SITE)), tmp_path)
    assert found["day"]["total_kwh"] == pytest.approx(60.0 * 24)
    # each hour holds its own sixty minutes, the last one too
    hours = found["day"]["by_bucket"]
    assert len(hours) == 24 and all(kwh == pytest.approx(60.0) for kwh in hours.values())
    # two hours of readings are two hours of power; the two hours between are no interval
    assert found["gap"]["total_kwh"] == pytest.approx(60.0 * 2)


CV_SCRIPT = """
import json, sys
sys.path.insert(0, {site!r})
import pandas as pd
import odaplot
pd.DataFrame({{'value': [1.0, 2.0, 3.0, 4.0], 'series': ['a', 'a', 'b', 'b']}}).to_csv(
    {csv!r}, index=False)
odaplot.series_figures({csv!r}, 'value', extra=['cv'], out='all.json')
odaplot.series_figures({csv!r}, 'value', series='series', extra=['cv'], out='each.json')
print(json.dumps({{k: json.load(open({out!r} + '/' + k + '.json')) for k in ('all', 'each')}}))
"""


def test_the_cv_of_drawn_readings_is_the_sample_std_over_the_mean(tmp_path: Path) -> None:
    # analysis6 U07: 'histogram, 99th percentile and the CV' (the CV was left unanswered); the
    # retriever's CV is the sample std over the mean, and so is the drawn readings'
    script = CV_SCRIPT.format(site=str(SITE), csv=str(tmp_path / "r.csv"), out=str(tmp_path))
    found = _run_in_sandbox_python(script, tmp_path)
    sample_std = (sum((x - 2.5) ** 2 for x in (1, 2, 3, 4)) / 3) ** 0.5
    assert found["all"]["groups"]["all"]["cv"] == pytest.approx(sample_std / 2.5)
    assert found["each"]["pooled"]["cv"] == pytest.approx(sample_std / 2.5)
    assert found["each"]["groups"]["a"]["cv"] == pytest.approx((0.5**0.5) / 1.5)
