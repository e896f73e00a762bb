"""Counter-based randomness: every draw is a pure function of (seed, entity, metric, time).

A sequential generator would make a value depend on where the window starts; hashing the
coordinates of a sample instead (splitmix64, vectorised in numpy) makes any slice of a large run
equal to the same window generated alone. Smooth noise is value noise with hash-drawn knots at
fixed absolute times, so it is window-independent too.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numpy.typing import NDArray

U64 = NDArray[np.uint64]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_TIME_MIX = np.uint64(0xD1B54A32D192ED03)
_SQRT3 = float(np.sqrt(3.0))


def _mix_int(x: int) -> int:
    """splitmix64 finaliser on a Python int (for scalar keys)."""
    z = (x + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def stable_id(name: str) -> int:
    """A 64-bit id of a name that is the same in every process (unlike ``hash()``)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def key(*parts: int | str) -> int:
    """Fold seed, entity and metric coordinates into one 64-bit key."""
    h = 0x243F6A8885A308D3
    for part in parts:
        value = stable_id(part) if isinstance(part, str) else part & _MASK
        h = _mix_int(h ^ value)
    return h


def keys(base: int, entities: NDArray[np.int64] | list[int]) -> U64:
    """Per-entity keys derived from a base key, as a uint64 array."""
    return np.array([_mix_int(base ^ (int(e) & _MASK)) for e in entities], dtype=np.uint64)


def splitmix(x: U64) -> U64:
    """Vectorised splitmix64 finaliser (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
        return z ^ (z >> np.uint64(31))


def hash_at(k: U64 | int, counter: I64) -> U64:
    """Hash of (key, integer counter) for every row; counter is a timestamp or a knot index."""
    with np.errstate(over="ignore"):
        c = counter.astype(np.uint64) * _TIME_MIX
        return splitmix(np.asarray(k, dtype=np.uint64) ^ c)


def to_unit(h: U64) -> F64:
    """Uniform [0, 1) from the top 53 bits of a hash."""
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def to_normal(h: U64) -> F64:
    """Approximately standard normal from one hash (Irwin-Hall sum of four 16-bit parts)."""
    m = np.uint64(0xFFFF)
    s = (
        (h & m).astype(np.float64)
        + ((h >> np.uint64(16)) & m).astype(np.float64)
        + ((h >> np.uint64(32)) & m).astype(np.float64)
        + (h >> np.uint64(48)).astype(np.float64)
    )
    return (s * (1.0 / 65536.0) - 2.0) * _SQRT3


def uniform(k: U64 | int, t: I64) -> F64:
    """White uniform noise in [0, 1) at (key, t)."""
    return to_unit(hash_at(k, t))


def normal(k: U64 | int, t: I64) -> F64:
    """White standard-normal-like noise at (key, t)."""
    return to_normal(hash_at(k, t))


def smooth(k: U64 | int, t: I64, knot_ms: int) -> F64:
    """Value noise: unit-variance knots every ``knot_ms`` (absolute time), smoothstep between."""
    idx = np.floor_divide(t, knot_ms)
    frac = (t - idx * knot_ms).astype(np.float64) / float(knot_ms)
    a = to_normal(hash_at(k, idx))
    b = to_normal(hash_at(k, idx + 1))
    w = frac * frac * (3.0 - 2.0 * frac)
    out: F64 = a + (b - a) * w
    return out


def scalar_unit(*parts: int | str) -> float:
    """One uniform [0, 1) draw for a scalar coordinate (entity constants)."""
    return (key(*parts) >> 11) * (1.0 / 9007199254740992.0)


def scalar_normal(*parts: int | str) -> float:
    """One normal-like draw for a scalar coordinate."""
    h = key(*parts)
    s = sum((h >> shift) & 0xFFFF for shift in (0, 16, 32, 48))
    return (s / 65536.0 - 2.0) * _SQRT3
