"""Spatial memory: a 3D cache of what a moving camera has seen, and point-to-frame retrieval.

    memory = SpatialMemory(MemoryConfig())
    memory.add(t, depth, intrinsics, pose, payload=latent)    # frame t of an episode; maybe a keyframe
    frames = memory.retrieve(intrinsics, pose, (S, S), exclude_after=t - K)   # [(t', payload, points)]

Why: a world model that sees only its last K frames forgets what left the view; when the camera
comes back it invents the place anew. Memory Forcing (arXiv 2510.03198) keeps a point cloud of what was
seen, each point tagged with the frame that first saw it, and gives the model the past frames that see
the current view best. MuJoCo gives exact depth and camera poses, so on real frames the cache is
exact; during imagination the caller supplies the pose (PushCubeEgo: from the agent position the state
head reads, `envs/push_cube_ego.ego_pose`) and the depth of the ground plane (`plane_depth`), which
misses only what stands on the table.

How it works:
- `add` back-projects a frame's depth (every `stride`-th pixel) with its pose into world points and
  voxelises them (`voxel` metres). A frame whose voxels are at least `new_coverage` new becomes a
  keyframe: its new voxels enter the cache tagged with its index, its payload is kept. Other frames
  leave the cache as it was, so the cache and the keyframes grow with the area seen, not with time.
- `retrieve` projects the cached points into the query camera and counts, per source keyframe, the
  points that land inside the image in front of the camera; the top `top_k` keyframes with at least
  `min_points` points, and none newer than `exclude_after` (those are in the model's context already),
  come back, most points first. Occlusion is not tested (a flat, top-down scene has almost none).
  Only the points of coarse cells (`cell` metres) whose centres fall in or near the view are projected,
  so a retrieval costs what the view holds, not what the episode has seen: constant per step in the
  episode's length (and the cache itself stops growing once the scene is covered).

Conventions: OpenCV cameras (x right, y down, z along the view), pixel (row r, column c) centred at
(u, v) = (c + 0.5, r + 0.5), depth in metres along z; poses camera-to-world (4, 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_OFFSET = 1 << 20  # voxel coordinates are shifted by this before packing (21 bits per axis)


@dataclass
class MemoryConfig:
    """How the cache is built and read."""

    voxel: float = 0.02
    """Edge of a cache voxel in metres: one point is kept per voxel."""
    new_coverage: float = 0.2
    """A frame becomes a keyframe when at least this share of its voxels is not in the cache yet."""
    stride: int = 4
    """Back-project every stride-th pixel in each direction (a 64 px frame at 4: 256 points)."""
    top_k: int = 2
    """Keyframes `retrieve` returns at most."""
    min_points: int = 4
    """Cached points a keyframe must have in the query view to be retrieved."""
    cell: float = 0.1
    """Edge in metres of the coarse cells a retrieval culls by before projecting points."""
    max_depth: float = 2.0
    """Depths at or beyond this many metres are background (a renderer writes its far plane where a
    ray hits nothing) and are not cached."""
    track_seen: bool = False
    """Also keep the voxel of every pixel of every frame offered (`SpatialMemory.was_seen`, what a start
    map hides); off, adding a frame back-projects only every stride-th pixel."""

    def __post_init__(self) -> None:
        if not self.voxel > 0 or not self.cell >= self.voxel:
            raise ValueError(f"MemoryConfig needs voxel > 0 and cell >= voxel (metres), got voxel {self.voxel}, "
                             f"cell {self.cell}")
        if not 0 < self.new_coverage <= 1:
            raise ValueError(f"MemoryConfig.new_coverage must be in (0, 1], got {self.new_coverage}")
        if not self.max_depth > 0:
            raise ValueError(f"MemoryConfig.max_depth must be > 0 metres, got {self.max_depth}")
        for name in ("stride", "top_k", "min_points"):
            if getattr(self, name) < 1:
                raise ValueError(f"MemoryConfig.{name} must be >= 1, got {getattr(self, name)}")


def pixel_grid(size: tuple[int, int], stride: int = 1) -> np.ndarray:
    """(h, w, 2) pixel centres (u, v) of every stride-th pixel of an (H, W) image."""
    rows = np.arange(0, size[0], stride) + 0.5
    cols = np.arange(0, size[1], stride) + 0.5
    u, v = np.meshgrid(cols, rows)
    return np.stack([u, v], axis=-1)


def back_project(depth: np.ndarray, intrinsics: np.ndarray, pose: np.ndarray, stride: int = 1) -> np.ndarray:
    """depth (H, W) metres along z, intrinsics (3, 3), pose (4, 4) camera-to-world -> (h*w, 3) world
    points of every stride-th pixel (row-major)."""
    depth = np.asarray(depth, np.float64)
    if depth.ndim != 2:
        raise ValueError(f"depth must be (H, W), got shape {depth.shape}")
    uv = pixel_grid(depth.shape, stride).reshape(-1, 2)  # (N, 2)
    z = depth[::stride, ::stride].reshape(-1)  # (N,)
    rays = np.linalg.solve(np.asarray(intrinsics, np.float64), np.c_[uv, np.ones(len(uv))].T).T  # (N, 3), z = 1
    cam = rays * z[:, None]
    pose = np.asarray(pose, np.float64)
    return cam @ pose[:3, :3].T + pose[:3, 3]


def project(points: np.ndarray, intrinsics: np.ndarray, pose: np.ndarray,
            size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """points (N, 3) world -> (uv (N, 2) pixel coordinates, z (N,) depth, inside (N,) bool: in front of
    the camera and within the (H, W) image)."""
    pose = np.asarray(pose, np.float64)
    cam = (np.asarray(points, np.float64) - pose[:3, 3]) @ pose[:3, :3]  # world -> camera: R^T (p - t)
    z = cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uvw = cam @ np.asarray(intrinsics, np.float64).T
        uv = uvw[:, :2] / uvw[:, 2:3]
    inside = (z > 1e-6) & (uv[:, 0] >= 0) & (uv[:, 0] < size[1]) & (uv[:, 1] >= 0) & (uv[:, 1] < size[0])
    return uv, z, inside


def plane_depth(intrinsics: np.ndarray, pose: np.ndarray, size: tuple[int, int], plane_z: float = 0.0) -> np.ndarray:
    """(H, W) depth along z of the horizontal plane z = plane_z seen by the camera (inf where a pixel's
    ray misses it): the depth imagination has where it cannot render any."""
    uv = pixel_grid(size).reshape(-1, 2)
    rays = np.linalg.solve(np.asarray(intrinsics, np.float64), np.c_[uv, np.ones(len(uv))].T).T  # (N, 3)
    pose = np.asarray(pose, np.float64)
    down = rays @ pose[:3, :3].T  # world direction per unit of camera z
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (plane_z - pose[2, 3]) / down[:, 2]
    t = np.where(t > 0, t, np.inf)
    return t.reshape(size)


def voxel_keys(points: np.ndarray, voxel: float) -> np.ndarray:
    """(N, 3) points -> (N,) int64, one key per voxel of edge `voxel` (21 bits per axis)."""
    ijk = np.floor(np.asarray(points) / voxel).astype(np.int64) + _OFFSET
    if (ijk < 0).any() or (ijk >= 2 * _OFFSET).any():
        raise ValueError(f"points beyond the voxel grid's range (+-{_OFFSET * voxel:.0f} m)")
    return (ijk[:, 0] << 42) | (ijk[:, 1] << 21) | ijk[:, 2]


class SpatialMemory:
    """One episode's cache (see the module docstring); `reset` starts the next episode."""

    def __init__(self, cfg: MemoryConfig | None = None) -> None:
        self.cfg = cfg or MemoryConfig()
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new episode."""
        self.keys = np.empty(0, np.int64)  # (P,) sorted voxel keys
        self.points = np.empty((0, 3), np.float64)  # (P, 3) one world point per voxel
        self.source = np.empty(0, np.int64)  # (P,) the keyframe that first saw each point
        self.keyframes: dict[int, Any] = {}  # frame index -> payload
        self.seen = np.empty(0, np.int64)  # (Q,) sorted voxel keys of every frame offered, keyframe or not
        self._cells = np.empty((0, 3))  # (M, 3) centres of the coarse cells that hold points
        self._members: list[np.ndarray] = []  # per cell, the indices of its points

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, t: int, depth: np.ndarray, intrinsics: np.ndarray, pose: np.ndarray, payload: Any = None) -> bool:
        """Offer frame `t` (depth (H, W), its camera); True when it became a keyframe."""
        if t in self.keyframes:
            raise ValueError(f"frame {t} is already a keyframe of this episode; reset() between episodes")
        if self.cfg.track_seen:  # every pixel's voxel joins `seen` (a stride could skip voxels between samples)
            every = back_project(depth, intrinsics, pose)[np.asarray(depth).reshape(-1) < self.cfg.max_depth]
            self.seen = np.union1d(self.seen, voxel_keys(every, self.cfg.voxel))
        near = np.asarray(depth)[:: self.cfg.stride, :: self.cfg.stride].reshape(-1) < self.cfg.max_depth
        points = back_project(depth, intrinsics, pose, self.cfg.stride)[near]
        if len(points) == 0:
            return False
        keys, first = np.unique(voxel_keys(points, self.cfg.voxel), return_index=True)
        new = ~_member(keys, self.keys)
        if new.sum() < self.cfg.new_coverage * len(keys):
            return False
        merged = np.concatenate([self.keys, keys[new]])
        order = np.argsort(merged, kind="stable")
        self.keys = merged[order]
        self.points = np.concatenate([self.points, points[first[new]]])[order]
        self.source = np.concatenate([self.source, np.full(int(new.sum()), t, np.int64)])[order]
        self.keyframes[t] = payload
        cells, inverse = np.unique(voxel_keys(self.points, self.cfg.cell), return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        self._members = np.split(order, np.cumsum(np.bincount(inverse))[:-1])
        self._cells = np.stack([self.points[m].mean(axis=0) for m in self._members])
        return True

    def was_seen(self, points: np.ndarray) -> np.ndarray:
        """points (N, 3) -> (N,) bool: whether some frame offered since the reset saw each point's voxel
        (every frame counts, not only keyframes; the set grows with the area seen, not with time).
        Needs MemoryConfig.track_seen."""
        if not self.cfg.track_seen:
            raise ValueError("was_seen needs a cache built with MemoryConfig(track_seen=True)")
        return _member(voxel_keys(points, self.cfg.voxel), self.seen)

    def visible(self, intrinsics: np.ndarray, pose: np.ndarray, size: tuple[int, int]) -> dict[int, int]:
        """keyframe index -> number of its cached points inside the view of the given camera."""
        if not len(self):
            return {}
        # cull by cell: a cell can hold a point in view only if its points' mean lands within the
        # cell's diagonal (in pixels at its depth) of the image
        uv, z, _ = project(self._cells, intrinsics, pose, size)
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = np.sqrt(3) * self.cfg.cell * float(intrinsics[0][0]) / np.abs(z)
        near = (z > -np.sqrt(3) * self.cfg.cell) & (uv[:, 0] > -margin) & (uv[:, 0] < size[1] + margin) & (
            uv[:, 1] > -margin) & (uv[:, 1] < size[0] + margin)
        near |= np.abs(z) < np.sqrt(3) * self.cfg.cell  # cells around the camera itself
        if not near.any():
            return {}
        index = np.concatenate([self._members[i] for i in np.flatnonzero(near)])
        _, _, inside = project(self.points[index], intrinsics, pose, size)
        frames, counts = np.unique(self.source[index[inside]], return_counts=True)
        return dict(zip(frames.tolist(), counts.tolist()))

    def retrieve(self, intrinsics: np.ndarray, pose: np.ndarray, size: tuple[int, int],
                 exclude_after: int | None = None, k: int | None = None) -> list[tuple[int, Any, int]]:
        """The keyframes that see the given view best: [(frame index, payload, points in view)], most
        points first (ties: older first), at most k (default top_k), none newer than exclude_after."""
        k = self.cfg.top_k if k is None else k
        seen = [(f, n) for f, n in self.visible(intrinsics, pose, size).items()
                if n >= self.cfg.min_points and (exclude_after is None or f <= exclude_after)]
        seen.sort(key=lambda fn: (-fn[1], fn[0]))
        return [(f, self.keyframes[f], n) for f, n in seen[:k]]


class MemoryBank:
    """One `SpatialMemory` per sub-environment of a batched env; `reset(rows)` starts new episodes there."""

    def __init__(self, num_envs: int, cfg: MemoryConfig | None = None) -> None:
        if num_envs < 1:
            raise ValueError(f"MemoryBank needs num_envs >= 1, got {num_envs}")
        self.memories = [SpatialMemory(cfg) for _ in range(num_envs)]

    def __getitem__(self, row: int) -> SpatialMemory:
        return self.memories[row]

    def __len__(self) -> int:
        return len(self.memories)

    def reset(self, rows: Any = None) -> None:
        """Forget the episodes of `rows` (indices or a bool mask; None: all)."""
        rows = range(len(self)) if rows is None else np.flatnonzero(rows) if np.asarray(rows).dtype == bool else rows
        for row in rows:
            self.memories[int(row)].reset()


def revisits(depths: np.ndarray, intrinsics: np.ndarray, poses: np.ndarray, gap: int = 20, voxel: float = 0.02,
             stride: int = 4, share: float = 0.5, fresh: float = 0.1,
             max_depth: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Which frames of one episode revisit a place and which see only ground seen lately or never.

    depths (T, H, W), poses (T, 4, 4), one intrinsics (3, 3) -> (revisit (T,) bool, first_visit (T,)
    bool). Let old(t) be the share of frame t's voxels that some frame before t - gap saw.
    - Frame t *revisits* when old(t) >= share and its view shares less than `share` of its voxels with
      frame t - gap's: the camera was looking elsewhere `gap` frames ago and has come back to a place
      it saw before that. A model whose context is shorter than `gap` can only remember such a view.
    - Frame t is a *first visit* when old(t) < fresh: what it shows was never seen, or seen within the
      last `gap` frames (which a short context or plain invention covers); a memory should not change it.
    Every frame counts as seen (not only keyframes): this is the truth retrieval is judged against.
    Depths at or beyond `max_depth` are background, as in MemoryConfig.
    """
    views = []  # per frame, its sorted voxel keys
    first_seen: dict[int, int] = {}
    revisit = np.zeros(len(depths), bool)
    first = np.zeros(len(depths), bool)
    for t, (depth, pose) in enumerate(zip(depths, poses)):
        near = np.asarray(depth)[::stride, ::stride].reshape(-1) < max_depth
        keys = np.unique(voxel_keys(back_project(depth, intrinsics, pose, stride)[near], voxel))
        views.append(keys)
        if len(keys):
            seen = np.array([first_seen.get(int(key), t) for key in keys])
            old = float((seen < t - gap).mean())
            then = _member(keys, views[t - gap]).mean() if t >= gap else 0.0
            revisit[t] = old >= share and then < share
            first[t] = old < fresh
        for key in keys:
            first_seen.setdefault(int(key), t)
    return revisit, first


def _member(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """(N,) bool: which of a's values are in the sorted array sorted_b."""
    if len(sorted_b) == 0:
        return np.zeros(len(a), bool)
    at = np.searchsorted(sorted_b, a).clip(max=len(sorted_b) - 1)
    return sorted_b[at] == a
