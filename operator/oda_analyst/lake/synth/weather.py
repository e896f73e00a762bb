"""Bologna-like weather on a 10-minute grid: seasonal trend, day cycle, smooth noise."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake.synth import noise

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# Monthly mean temperature (°C) at mid-month, January..December (Bologna climate).
_MONTHLY = np.array([3.0, 5.0, 10.0, 14.0, 18.5, 23.5, 26.0, 25.5, 21.0, 15.0, 9.0, 4.0])
_YEAR_MS = 365.25 * DAY_MS
_LAT = np.radians(44.5)


def _year_frac(t: I64) -> F64:
    """Fraction of the year since 1 January (the Unix epoch is a 1 January)."""
    return np.mod(t.astype(np.float64), _YEAR_MS) / _YEAR_MS


def seasonal_mean(t: I64) -> F64:
    """Daily mean temperature: periodic interpolation of the monthly means."""
    x = _year_frac(t) * 12.0 - 0.5  # 0 at mid-January
    xp = np.arange(-1, 14, dtype=np.float64)
    fp = np.concatenate([[_MONTHLY[-1]], _MONTHLY, _MONTHLY[:2]])
    return np.asarray(np.interp(x, xp, fp), dtype=np.float64)


def local_hour(t: I64) -> F64:
    """Local solar-ish hour in Bologna (UTC+1, +1 more from April to October)."""
    frac = _year_frac(t)
    offset = np.where((frac > 0.245) & (frac < 0.83), 2.0, 1.0)
    return np.mod((t % DAY_MS) / HOUR_MS + offset, 24.0)


def day_shape(hour: F64) -> F64:
    """-1 at 05:00, +1 at 15:00 local, cosine segments between."""
    rising = (hour >= 5.0) & (hour < 15.0)
    up = -np.cos(np.pi * (hour - 5.0) / 10.0)
    down = np.cos(np.pi * np.mod(hour - 15.0, 24.0) / 14.0)
    return np.where(rising, up, down)


def temperature(seed: int, t: I64) -> F64:
    k = noise.key(seed, "weather", "temp")
    amp = 5.0 + 1.5 * noise.smooth(noise.key(seed, "weather", "amp"), t, 2 * DAY_MS)
    return seasonal_mean(t) + amp * day_shape(local_hour(t)) + 2.2 * noise.smooth(k, t, 8 * HOUR_MS)


def uv_index(seed: int, t: I64, clouds: F64) -> F64:
    """Zero at night; peaks near solar noon; higher in summer; clouds cut it."""
    frac = _year_frac(t)
    decl = np.radians(23.44) * np.sin(2 * np.pi * (frac - 0.22))
    solar_hour = (t % DAY_MS) / HOUR_MS + 11.34 / 15.0  # Bologna is at 11.34° E
    ha = np.radians(15.0 * (solar_hour - 12.0))
    elev = np.sin(_LAT) * np.sin(decl) + np.cos(_LAT) * np.cos(decl) * np.cos(ha)
    uv: F64 = np.maximum(elev, 0.0) ** 1.4 * 9.5 * (1.0 - 0.6 * clouds / 100.0)
    return uv


def values(seed: int, t: I64) -> dict[str, F64]:
    """All ten weather metrics at the timestamps ``t``."""

    def sm(name: str, knot: int) -> F64:
        return noise.smooth(noise.key(seed, "weather", name), t, knot)

    temp = np.round(temperature(seed, t), 2)
    daily = seasonal_mean(t)
    humidity = np.clip(np.rint(62.0 - 3.0 * (temp - daily) + 8.0 * sm("hum", 6 * HOUR_MS)), 18, 100)
    a, b = 17.62, 243.12
    gamma = np.log(humidity / 100.0) + a * temp / (b + temp)
    dew = np.round(b * gamma / (a - gamma), 2)
    wind = np.round(np.clip(2.6 + 1.4 * sm("wind", 4 * HOUR_MS), 0.0, 15.0), 2)
    vapour = humidity / 100.0 * 6.105 * np.exp(a * temp / (b + temp))
    feels = np.round(temp + 0.33 * vapour - 0.7 * wind - 4.0, 2)
    clouds = np.clip(np.rint(35.0 + 40.0 * sm("clouds", 5 * HOUR_MS)), 0, 100)
    return {
        "temp": temp,
        "humidity": humidity,
        "dew_point": dew,
        "feels_like": feels,
        "pressure": np.rint(1014.0 + 6.0 * sm("pressure", 18 * HOUR_MS)),
        "clouds": clouds,
        "visibility": np.where(humidity > 93, 6000.0, 10000.0),
        "wind_speed": wind,
        "wind_deg": np.mod(np.rint(200.0 + 90.0 * sm("wind-deg", 6 * HOUR_MS)), 360),
        "uvi": np.round(uv_index(seed, t, clouds), 2),
    }
