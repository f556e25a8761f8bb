"""Spatial-softmax keypoints (Levine et al. 2016; robomimic's SpatialSoftmax): where K learned things
are in a feature map, as expected (x, y) coordinates. Shared by the world model's frame heads and the
policies' image encoder: both must read where small objects are, which a softmax over positions
returns directly, where a flattened map leaves it to a linear layer to find."""

from __future__ import annotations

import torch


def keypoint_grid(height: int, width: int) -> torch.Tensor:
    """-> (height * width, 2): each cell's (x, y) in [-1, 1] (x right, y down), row-major."""
    gy, gx = torch.meshgrid(torch.linspace(-1.0, 1.0, height), torch.linspace(-1.0, 1.0, width), indexing="ij")
    return torch.stack([gx.flatten(), gy.flatten()], dim=1)


def spatial_softmax_xy(logits: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """logits (N, K, h, w) attention maps, grid (h * w, 2) from `keypoint_grid` -> (N, K, 2): each map's
    softmax over positions, and the expected (x, y) under it."""
    att = torch.softmax(logits.flatten(2), dim=-1)  # (N, K, h*w), each row sums to 1
    return att @ grid.to(att.dtype)
