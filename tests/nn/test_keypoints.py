"""Spatial-softmax keypoints against analytic answers: a peaked map reads as its cell's coordinates,
a flat map as the centre, and the grid's corners are the frame's."""

from __future__ import annotations

import torch

from wmsuite.nn import keypoint_grid, spatial_softmax_xy


def test_grid_corners_and_order():
    grid = keypoint_grid(3, 5)  # (15, 2), row-major, x right, y down
    assert grid.shape == (15, 2)
    assert grid[0].tolist() == [-1.0, -1.0] and grid[4].tolist() == [1.0, -1.0] and grid[-1].tolist() == [1.0, 1.0]
    assert grid[5].tolist() == [-1.0, 0.0]  # second row starts at the left edge, halfway down


def test_a_peaked_map_reads_as_its_cell_and_a_flat_map_as_the_centre():
    h, w = 4, 6
    logits = torch.zeros(2, 3, h, w)
    logits[0, 0, 1, 4] = 50.0  # keypoint 0 of image 0 at row 1, column 4
    logits[1, 2, 3, 0] = 50.0
    xy = spatial_softmax_xy(logits, keypoint_grid(h, w))  # (2, 3, 2)
    xs, ys = torch.linspace(-1, 1, w), torch.linspace(-1, 1, h)
    torch.testing.assert_close(xy[0, 0], torch.stack([xs[4], ys[1]]))
    torch.testing.assert_close(xy[1, 2], torch.stack([xs[0], ys[3]]))
    torch.testing.assert_close(xy[0, 1], torch.zeros(2), atol=1e-6, rtol=0)  # flat: the expectation is the centre
