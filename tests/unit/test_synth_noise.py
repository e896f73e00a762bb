"""The counter-based RNG and the absolute sampling grids."""

from __future__ import annotations

import numpy as np

from oda_analyst.lake.synth import grid, noise


def test_hash_noise_is_pure_and_well_spread() -> None:
    t = np.arange(0, 200_000 * 20_000, 20_000, dtype=np.int64)
    a = noise.normal(noise.key(1, "x"), t)
    assert np.array_equal(a, noise.normal(noise.key(1, "x"), t))
    assert np.array_equal(a[5000:6000], noise.normal(noise.key(1, "x"), t[5000:6000]))
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1.0) < 0.02
    b = noise.normal(noise.key(2, "x"), t)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02
    u = noise.uniform(noise.key(1, "u"), t)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01


def test_smooth_noise_is_continuous_and_hits_knots() -> None:
    k = noise.key(3, "s")
    t = np.arange(0, 3_600_000, 1000, dtype=np.int64)
    s = noise.smooth(k, t, 300_000)
    assert np.abs(np.diff(s)).max() < 0.05
    knots = noise.to_normal(noise.hash_at(k, np.arange(12, dtype=np.int64)))
    assert np.allclose(s[::300], knots)


def test_stable_id_does_not_depend_on_python_hash() -> None:
    assert noise.stable_id("total_power") == noise.stable_id("total_power")
    assert noise.stable_id("total_power") != noise.stable_id("ambient")
    assert 0 <= noise.stable_id("a") < 2**64


def test_grid_slices_are_equal_to_the_grid_of_the_slice() -> None:
    ph = grid.phases(noise.key(1, "g"), [0, 1, 2], 60_000)
    keys = noise.keys(noise.key(1, "j"), [0, 1, 2])
    ent, t = grid.entity_grid(0, 7_200_000, 60_000, ph, keys, 0.3)
    ent2, t2 = grid.entity_grid(1_800_000, 2_400_000, 60_000, ph, keys, 0.3)
    big = (t >= 1_800_000) & (t < 2_400_000)
    assert np.array_equal(ent[big], ent2) and np.array_equal(t[big], t2)
    for e in range(3):
        ts = t[ent == e]
        assert np.all(np.diff(ts) > 0)
        assert 110 <= len(ts) <= 121
