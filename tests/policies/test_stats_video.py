"""wmsuite.stats.wilson_interval and wmsuite.video, checked against independent answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmsuite.stats import wilson_interval
from wmsuite.video import tile_frames, write_mp4


# (6, 6) and (0, 11): where rounding used to put a bound a hair inside p_hat (a negative error bar)
@pytest.mark.parametrize("k,n", [(0, 10), (5, 10), (10, 10), (41, 50), (1, 1), (730, 1000), (6, 6), (0, 11)])
def test_wilson_bounds_solve_the_score_equation(k, n):
    """Each Wilson bound p solves (k/n - p)^2 = z^2 p (1 - p) / n (the score test at level z)."""
    z = 1.96
    low, high = wilson_interval(k, n, z)
    p_hat = k / n
    assert 0.0 <= low <= p_hat <= high <= 1.0
    for p in (low, high):
        if p in (0.0, 1.0) and p == p_hat:
            continue  # the bound sits at the boundary where p_hat is 0 or 1
        assert math.isclose((p_hat - p) ** 2, z * z * p * (1 - p) / n, rel_tol=1e-9, abs_tol=1e-12)


def test_wilson_known_values_and_errors():
    # Newcombe (1998), Table I: 0/10 -> (0, 0.2775); 15/148 -> (0.0624, 0.1605)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and abs(high - 0.2775) < 1e-4
    low, high = wilson_interval(15, 148)
    assert abs(low - 0.0624) < 1e-4 and abs(high - 0.1605) < 1e-4
    with pytest.raises(ValueError, match="n must be"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_write_mp4_reads_back(tmp_path):
    import imageio.v3 as iio

    t, h, w = 6, 32, 48
    frames = np.zeros((t, h, w, 3), np.uint8)
    for i in range(t):
        frames[i, :, :, i % 3] = 40 * (i + 1)  # a flat colour per frame
    path = write_mp4(tmp_path / "v.mp4", frames, fps=5)
    back = iio.imread(path, plugin="pyav")
    assert back.shape == (t, h, w, 3)
    assert np.abs(back.astype(int) - frames.astype(int)).mean() < 6  # lossy but close
    odd = write_mp4(tmp_path / "odd.mp4", np.zeros((2, 15, 17, 3), np.uint8))
    assert iio.imread(odd, plugin="pyav").shape == (2, 16, 18, 3)
    with pytest.raises(ValueError, match="uint8"):
        write_mp4(tmp_path / "bad.mp4", frames.astype(np.float32))


def test_tile_frames_places_videos_side_by_side():
    a = np.full((3, 4, 5, 3), 10, np.uint8)
    b = np.full((2, 6, 2, 3), 200, np.uint8)
    out = tile_frames([a, b], gap=1)
    assert out.shape == (3, 6, 5 + 1 + 2, 3)
    assert (out[:, :4, :5] == 10).all() and (out[:, 4:, :5] == 0).all()
    assert (out[:, :, 5] == 0).all()  # the gap
    assert (out[:, :, 6:] == 200).all()  # b's last frame is held for frame 2
