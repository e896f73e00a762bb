"""Profiles, option parsing and bad inputs of the synthetic lake generator."""

from __future__ import annotations

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.lake.schema import all_metrics
from oda_analyst.lake.synth import PROFILES, build_spec


def test_profiles_exist_and_tiny_covers_every_metric() -> None:
    assert {"sample", "tiny", "demo"} <= set(PROFILES)
    spec = build_spec("tiny")
    pairs = {(r.plugin, m) for r in spec.requests for m in r.metrics}
    assert pairs == set(all_metrics())
    assert spec.nodes == (0, 1, 2, 3, 900)
    assert spec.seed == 2022


def test_default_is_demo_and_options_narrow_it() -> None:
    spec = build_spec()
    assert spec.profile == "demo" and len(spec.nodes) == 61
    narrowed = build_spec("sample", nodes="900", seed=7)
    assert narrowed.nodes == (900,) and narrowed.seed == 7
    weather = narrowed.request("weather")
    jt = narrowed.request("job_table")
    ipmi = narrowed.request("ipmi")
    assert weather and jt and ipmi
    assert (weather.end_ms - weather.start_ms) == 61 * 86_400_000
    assert (jt.end_ms - jt.start_ms) == 10 * 86_400_000
    assert (ipmi.end_ms - ipmi.start_ms) == 86_400_000


def test_metrics_of_several_plugins_and_job_table_always() -> None:
    spec = build_spec("tiny", metrics="total_power,Gpu0_gpu_utilization,temp")
    got = {r.plugin: r.metrics for r in spec.requests}
    assert got == {
        "ipmi": ("total_power",),
        "ganglia": ("Gpu0_gpu_utilization",),
        "weather": ("temp",),
        "job_table": ("job_info_marconi100",),
    }
    whole = build_spec("tiny", plugins="weather_pub")
    assert {r.plugin for r in whole.requests} == {"weather", "job_table"}
    assert len(whole.request("weather").metrics) == 10  # type: ignore[union-attr]


def test_start_end_override_every_window() -> None:
    spec = build_spec("sample", start="2022-06-01T08:00", end="2022-06-01T09:00+00:00")
    assert {(r.end_ms - r.start_ms) for r in spec.requests} == {3_600_000}


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"profile": "huge"}, "unknown profile"),
        ({"plugins": "ipmi,foo"}, "unknown plugin"),
        ({"metrics": "total_powr"}, "unknown metric"),
        ({"start": "2022-06-01T09:00", "end": "2022-06-01T08:00"}, "not after"),
        ({"start": "yesterday"}, "cannot read start"),
        ({"nodes": "0-x"}, "cannot read node"),
        ({"nodes": "5-2"}, "cannot read node"),
        ({"nodes": "1200"}, "out of range"),
        ({"start": "2019-01-01", "end": "2019-01-02"}, "outside"),
    ],
)
def test_bad_inputs_raise_usage_errors_with_hints(kwargs: dict[str, str], needle: str) -> None:
    profile = kwargs.pop("profile", "tiny")
    with pytest.raises(UsageError) as err:
        build_spec(profile, **kwargs)
    assert needle in err.value.message
    assert err.value.hint
