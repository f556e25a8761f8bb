"""Writing episode videos: mp4 (H.264 through imageio + PyAV) and side-by-side tiling.

    write_mp4("ep0.mp4", frames, fps=10)                 # frames (T, H, W, 3) uint8
    write_mp4("cmp.mp4", tile_frames([real, imagined]))  # two videos side by side
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def write_mp4(path: str | Path, frames: np.ndarray, fps: int = 10) -> Path:
    """Write (T, H, W, 3) uint8 frames as an H.264 mp4. Odd sizes are padded by one pixel
    (x264 needs even width and height)."""
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or frames.shape[0] < 1:
        raise ValueError(f"frames must be uint8 (T>=1, H, W, 3), got {frames.dtype} {frames.shape}")
    if fps < 1:
        raise ValueError(f"fps must be >= 1, got {fps}")
    import imageio.v3 as iio

    _, h, w, _ = frames.shape
    if h % 2 or w % 2:
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, frames, plugin="pyav", codec="libx264", fps=fps)
    return path


def tile_frames(videos: Sequence[np.ndarray], gap: int = 2) -> np.ndarray:
    """Place videos side by side: list of (T_i, H_i, W_i, 3) uint8 -> (max T, max H, sum W + gaps, 3).

    Shorter videos hold their last frame; shorter frames are padded at the bottom with black;
    `gap` black columns separate neighbours.
    """
    if not videos:
        raise ValueError("tile_frames needs at least one video")
    vids = [np.asarray(v) for v in videos]
    for i, v in enumerate(vids):
        if v.dtype != np.uint8 or v.ndim != 4 or v.shape[-1] != 3 or v.shape[0] < 1:
            raise ValueError(f"video {i} must be uint8 (T>=1, H, W, 3), got {v.dtype} {v.shape}")
    t = max(v.shape[0] for v in vids)
    h = max(v.shape[1] for v in vids)
    w = sum(v.shape[2] for v in vids) + gap * (len(vids) - 1)
    out = np.zeros((t, h, w, 3), np.uint8)
    x = 0
    for v in vids:
        idx = np.minimum(np.arange(t), v.shape[0] - 1)
        out[:, : v.shape[1], x : x + v.shape[2]] = v[idx]
        x += v.shape[2] + gap
    return out
