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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

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
        self._cells = np.empty((0, 3))  # (M, 3) centres of the coarse cells that hold points
        self._members: list[np.ndarray] = []  # per cell, the indices of its points

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, t: int, depth: np.ndarray, intrinsics: np.ndarray, pose: np.ndarray, payload: Any = None) -> bool:
        """Offer frame `t` (depth (H, W), its camera); True when it became a keyframe."""
        if t in self.keyframes:
            raise ValueError(f"frame {t} is already a keyframe of this episode; reset() between episodes")
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


# ---------------------------------------------------------------------------------- in a world model


@dataclass(frozen=True)
class MemoryGeometry:
    """What the world model's memory needs of a task's moving camera (the composer fills it in from the
    task probe; world_models never imports envs)."""

    fovy: float
    """Vertical field of view of the camera in degrees (square images)."""
    pose_fn: Any
    """(..., D) agent_pos -> (..., 4, 4) the camera's camera-to-world pose (OpenCV convention)."""
    plane_z: float = 0.0
    """Height of the ground plane whose depth stands in for the depth of every frame."""
    advance_fn: Any = None
    """(..., D) agent_pos, (..., H, A) actions -> (..., D): where the actions command the camera's carrier
    (the task's controller, from its probe). With it the memory is retrieved for, and drawn in, the
    camera a chunk is expected to end in: the ground the chunk is about to reveal, which the context
    does not show. None: the newest frame's camera (the view the context already holds)."""

    def chunk_pose(self, agent_pos: np.ndarray, actions: np.ndarray | None) -> np.ndarray:
        """agent_pos (..., D), the chunk's actions (..., H, A) or None -> (..., 4, 4) the camera the
        memory is drawn in for that chunk (see advance_fn)."""
        if self.advance_fn is not None and actions is not None:
            agent_pos = self.advance_fn(np.asarray(agent_pos, np.float64), np.asarray(actions, np.float64))
        return np.asarray(self.pose_fn(agent_pos), np.float64)

    def intrinsics(self, size: int) -> np.ndarray:
        """(3, 3) pinhole intrinsics for (size, size) images."""
        focal = (size / 2) / np.tan(np.deg2rad(self.fovy) / 2)
        return np.array([[focal, 0.0, size / 2], [0.0, focal, size / 2], [0.0, 0.0, 1.0]])


def reproject(latents: torch.Tensor, src_poses: torch.Tensor, dst_poses: torch.Tensor, geometry: MemoryGeometry,
              image_size: int, padded_size: int | None = None) -> torch.Tensor:
    """Memory latents drawn in another camera: each latent cell of the destination view takes the value
    (bilinear) of the cell of the source frame that sees the same point of the ground plane.

    latents (B, M, C, s, s), src_poses (B, M, 4, 4), dst_poses (B, 4, 4) -> (B, M, C + 1, s, s): the
    reprojected latents and a last channel that is 1 where the source frame sees the point, 0 elsewhere
    (and the latents 0 there). A source pose of all zeros marks an empty slot (all 0). The latent grid
    covers the (image_size, image_size) frame padded to `padded_size` (the codec's; default no padding)."""
    b, m, c, s, _ = latents.shape
    dev = latents.device
    padded = padded_size or image_size
    k = torch.as_tensor(geometry.intrinsics(image_size), dtype=torch.float64, device=dev)
    centres = (torch.arange(s, dtype=torch.float64, device=dev) + 0.5) * (padded / s)  # latent cells in pixels
    v, u = torch.meshgrid(centres, centres, indexing="ij")
    rays = torch.stack([u, v, torch.ones_like(u)], -1).reshape(-1, 3) @ torch.linalg.inv(k).T  # (s*s, 3), z = 1
    dst = dst_poses.to(torch.float64)
    world_dir = torch.einsum("bij,nj->bni", dst[:, :3, :3], rays)  # (B, s*s, 3)
    t = (geometry.plane_z - dst[:, None, 2, 3]) / world_dir[..., 2]  # (B, s*s)
    points = dst[:, None, :3, 3] + t[..., None] * world_dir  # (B, s*s, 3) on the plane
    src = src_poses.to(torch.float64)
    cam = torch.einsum("bmji,bmnj->bmni", src[:, :, :3, :3], points[:, None] - src[:, :, None, :3, 3])  # R^T (p - t)
    uvw = cam @ k.T  # (B, M, s*s, 3)
    uv = uvw[..., :2] / uvw[..., 2:3]
    grid = torch.nan_to_num(uv / padded * 2 - 1, nan=2.0).to(latents.dtype).view(b * m, s, s, 2)  # [-1, 1] inside
    valid = ((cam[..., 2] > 0) & (t[:, None] > 0) & ((uv >= 0) & (uv < image_size)).all(-1)
             & (src_poses.abs().flatten(2).sum(-1) > 0)[..., None])  # (B, M, s*s)
    out = F.grid_sample(latents.reshape(b * m, c, s, s), grid, mode="bilinear", padding_mode="zeros",
                        align_corners=False).view(b, m, c, s, s)
    mask = valid.view(b, m, 1, s, s)
    return torch.cat([torch.where(mask, out, 0.0), mask.to(latents.dtype)], dim=2)


def episode_retrievals(poses: np.ndarray, geometry: MemoryGeometry, image_size: int, context: int, frames: int,
                       cfg: MemoryConfig | None = None, views: np.ndarray | None = None) -> np.ndarray:
    """For every frame t of one episode, the memory frames a window whose newest context frame is t
    gets: poses (T+1, 4, 4) -> (T+1, frames) int64 frame indices, -1 for an empty slot. The memory at t
    holds the frames up to t - context (the ones before the context), offered in order with the
    ground plane's depth, as an imagined rollout offers its frames; retrieval is for the camera
    views[t] (T+1, 4, 4), the one window t's memory is drawn in (default: frame t's own)."""
    cfg = cfg or MemoryConfig()
    k = geometry.intrinsics(image_size)
    views = poses if views is None else views
    memory, out = SpatialMemory(cfg), np.full((len(poses), frames), -1, np.int64)
    for t in range(len(poses)):
        f = t - context
        if f >= 0:
            memory.add(f, plane_depth(k, poses[f], (image_size, image_size), geometry.plane_z), k, poses[f])
        found = memory.retrieve(k, views[t], (image_size, image_size), k=frames)
        out[t, : len(found)] = [i for i, _, _ in found]
    return out


class LatentMemory:
    """The spatial memory of a batched imagined rollout: one `SpatialMemory` per row, fed latent frames
    with the camera poses the frame heads read off them (`geometry.pose_fn` of the predicted agent_pos;
    or of known positions, `poses`), asked before every chunk for the memory input of the model
    (`context()`)."""

    def __init__(self, model: Any, geometry: MemoryGeometry, rows: int, cfg: MemoryConfig | None = None,
                 poses: Callable[[torch.Tensor], np.ndarray] | None = None) -> None:
        """`poses`: observed latents (B, H, C, s, s) -> the agent positions (B, H, D) to pose them by,
        where they are known (the heads pass, which rolls recorded actions); None: the frame heads'."""
        if not model.cfg.memory_frames:
            raise ValueError("LatentMemory serves a world model trained with memory (memory_frames > 0)")
        self.model, self.geometry, self.cfg, self.poses = model, geometry, cfg or MemoryConfig(), poses
        self.size = model.codec_cfg.image_size
        self.k = geometry.intrinsics(self.size)
        self.bank = MemoryBank(rows, self.cfg)
        self.t = np.zeros(rows, np.int64)  # index of each row's newest frame
        self.newest_pos: list[np.ndarray | None] = [None] * rows  # each row's newest agent_pos (D,)
        self.last_heads: dict[str, torch.Tensor] = {}  # the heads' readings of the last frames observed

    def reset(self, rows: Sequence[int], latents: torch.Tensor, agent_pos: np.ndarray) -> None:
        """New episodes in `rows`: their real start frames (m, C, s, s) at agent positions (m, D)."""
        rows = list(rows)
        self.bank.reset(rows)
        for j, row in enumerate(rows):
            self.t[row], self.newest_pos[row] = 0, None
            self._offer(row, latents[j], np.asarray(agent_pos[j]))

    def observe(self, latents: torch.Tensor, rows: Sequence[int] | None = None) -> None:
        """Offer each row's newly generated frames (B, H, C, s, s), posed by the heads' agent_pos (or
        by `poses`). The heads' readings stay in `last_heads`, so a caller that needs them too need not
        run them again."""
        if self.poses is not None:
            self.last_heads, pos = {}, np.asarray(self.poses(latents))  # (B, H, D)
        else:
            self.last_heads = self.model.predict_heads(latents)  # each (B, H, ...)
            pos = self.last_heads["agent_pos"].cpu().numpy()  # (B, H, D)
        for j, row in enumerate(range(len(self.bank)) if rows is None else rows):
            for h in range(latents.shape[1]):
                self.append(row, latents[j, h], pos[j, h])

    def append(self, row: int, latent: torch.Tensor, agent_pos: np.ndarray) -> None:
        """Offer one more frame (C, s, s) of `row`'s episode, taken at `agent_pos` (D,)."""
        self.t[row] += 1
        self._offer(row, latent, np.asarray(agent_pos))

    def context(self, actions: torch.Tensor | None = None, rows: Sequence[int] | None = None) -> torch.Tensor:
        """(B, M, C + 1, s, s): each row's retrieved frames reprojected into the camera the next chunk,
        of `actions` (B, H, A), is expected to end in (geometry.chunk_pose; without actions, the newest
        frame's camera); none from the frames its context holds (the newest K)."""
        rows = list(range(len(self.bank))) if rows is None else list(rows)
        acts = None if actions is None else actions.detach().cpu().double().numpy()  # (B, H, A)
        dst = np.zeros((len(rows), 4, 4))
        for j, row in enumerate(rows):
            if self.newest_pos[row] is not None:
                dst[j] = self.geometry.chunk_pose(self.newest_pos[row], None if acts is None else acts[j])
        m, kk = self.model.cfg.memory_frames, self.model.cfg.context
        c, s = self.model.codec.latent_channels, self.model.codec.latent_size
        dev = self.model.state_mean.device
        lat = torch.zeros(len(rows), m, c, s, s, device=dev)
        src = torch.zeros(len(rows), m, 4, 4, dtype=torch.float64)
        for j, row in enumerate(rows):
            if self.newest_pos[row] is None or not np.isfinite(dst[j]).all():
                continue  # nothing placed yet (or no pose to draw in): an empty memory
            found = self.bank[row].retrieve(self.k, dst[j], (self.size, self.size),
                                            exclude_after=int(self.t[row]) - kk, k=m)
            for slot, (_, (latent, pose), _) in enumerate(found):
                lat[j, slot], src[j, slot] = latent, torch.from_numpy(pose)
        dst = torch.from_numpy(np.nan_to_num(dst))
        return reproject(lat, src.to(dev), dst.to(dev), self.geometry, self.size, self.model.codec.padded_size)

    def _offer(self, row: int, latent: torch.Tensor, agent_pos: np.ndarray) -> None:
        pose = np.asarray(self.geometry.pose_fn(agent_pos), np.float64)
        if not np.isfinite(pose).all():  # heads that read no position (a diverged model): nothing to place
            return
        depth = plane_depth(self.k, pose, (self.size, self.size), self.geometry.plane_z)
        self.bank[row].add(int(self.t[row]), depth, self.k, pose, payload=(latent.detach().clone(), pose))
        self.newest_pos[row] = np.asarray(agent_pos, np.float64)
