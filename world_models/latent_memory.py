"""The spatial memory inside a world model: the task's moving camera (`MemoryGeometry`), memory frames
redrawn in another camera (`reproject`), what a training window retrieves (`episode_retrievals`), the
memory of a batched imagined rollout (`LatentMemory`) and which recorded frames revisit a place
(`revisit_labels`, what eval-wm scores and training can oversample). The cache and retrieval
themselves are world_models/memory.py's `SpatialMemory`.

A memory frame reaches the model as its latent reprojected into the camera the chunk about to be
generated is expected to end in (`MemoryGeometry.chunk_pose`): the ground that chunk reveals is what
the context frames do not show, and what a memory can add.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from wmsuite.types import Episode
from wmsuite.world_models.memory import MemoryBank, MemoryConfig, SpatialMemory, plane_depth, revisits

LABEL_SIZE = 64
"""Side of the depth images revisit labels are computed on: a property of the camera's motion, the
same whatever the model's frame size."""


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
    map_camera: str | None = None
    """A fixed camera that sees the whole scene (PushCubeEgo's "top"), whose start frame a model with
    `start_map` reads as a map (`map_slot`); None where the task has none."""
    map_fovy: float | None = None
    """The map camera's vertical field of view in degrees (square images)."""
    map_pose: Any = None
    """(4, 4) the map camera's camera-to-world pose (OpenCV convention)."""
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
        """(3, 3) pinhole intrinsics of the moving camera for (size, size) images."""
        return pinhole(self.fovy, size)


def pinhole(fovy: float, size: int) -> np.ndarray:
    """(3, 3) intrinsics of a camera of vertical field of view `fovy` degrees for (size, size) images."""
    focal = (size / 2) / np.tan(np.deg2rad(fovy) / 2)
    return np.array([[focal, 0.0, size / 2], [0.0, focal, size / 2], [0.0, 0.0, 1.0]])


def reproject(latents: torch.Tensor, src_poses: torch.Tensor, dst_poses: torch.Tensor, geometry: MemoryGeometry,
              image_size: int, padded_size: int | None = None, src_fovy: float | None = None) -> torch.Tensor:
    """Memory latents drawn in another camera: each latent cell of the destination view takes the value
    (bilinear) of the cell of the source frame that sees the same point of the ground plane.

    latents (B, M, C, s, s), src_poses (B, M, 4, 4), dst_poses (B, 4, 4) -> (B, M, C + 1, s, s): the
    reprojected latents and a last channel that is 1 where the source frame sees the point, 0 elsewhere
    (and the latents 0 there). A source pose of all zeros marks an empty slot (all 0). The grid (latent
    cells, or pixels where s is the image's side) covers the (image_size, image_size) frame padded to
    `padded_size` (the codec's; default no padding), in the moving camera. `src_fovy`: the sources are
    (image_size, image_size) frames, unpadded, of another camera with this field of view (the map
    camera's, `map_slot`); None: the moving camera's, padded like the destination."""
    b, m, c, s, _ = latents.shape
    dev = latents.device
    padded = padded_size or image_size
    k = torch.as_tensor(geometry.intrinsics(image_size), dtype=torch.float64, device=dev)
    k_src = k if src_fovy is None else torch.as_tensor(pinhole(src_fovy, image_size), dtype=torch.float64, device=dev)
    src_padded = padded if src_fovy is None else image_size
    centres = (torch.arange(s, dtype=torch.float64, device=dev) + 0.5) * (padded / s)  # latent cells in pixels
    v, u = torch.meshgrid(centres, centres, indexing="ij")
    rays = torch.stack([u, v, torch.ones_like(u)], -1).reshape(-1, 3) @ torch.linalg.inv(k).T  # (s*s, 3), z = 1
    dst = dst_poses.to(torch.float64)
    world_dir = torch.einsum("bij,nj->bni", dst[:, :3, :3], rays)  # (B, s*s, 3)
    t = (geometry.plane_z - dst[:, None, 2, 3]) / world_dir[..., 2]  # (B, s*s)
    points = dst[:, None, :3, 3] + t[..., None] * world_dir  # (B, s*s, 3) on the plane
    src = src_poses.to(torch.float64)
    cam = torch.einsum("bmji,bmnj->bmni", src[:, :, :3, :3], points[:, None] - src[:, :, None, :3, 3])  # R^T (p - t)
    uvw = cam @ k_src.T  # (B, M, s*s, 3)
    uv = uvw[..., :2] / uvw[..., 2:3]
    grid = torch.nan_to_num(uv / src_padded * 2 - 1, nan=2.0).to(latents.dtype).view(b * m, s, s, 2)  # [-1, 1] inside
    valid = ((cam[..., 2] > 0) & (t[:, None] > 0) & ((uv >= 0) & (uv < image_size)).all(-1)
             & (src_poses.abs().flatten(2).sum(-1) > 0)[..., None])  # (B, M, s*s)
    out = F.grid_sample(latents.reshape(b * m, c, s, s), grid, mode="bilinear", padding_mode="zeros",
                        align_corners=False).view(b, m, c, s, s)
    mask = valid.view(b, m, 1, s, s)
    return torch.cat([torch.where(mask, out, 0.0), mask.to(latents.dtype)], dim=2)


def ground_cells(dst_poses: np.ndarray, geometry: MemoryGeometry, image_size: int, padded_size: int,
                 s: int) -> np.ndarray:
    """dst_poses (B, 4, 4) -> (B, s*s, 3): the ground-plane point each cell of an s x s grid over the
    (image_size, image_size) frame padded to padded_size sees, row-major (1 km away where a ray misses it)."""
    centres = (np.arange(s) + 0.5) * (padded_size / s)
    u, v = np.meshgrid(centres, centres)
    rays = np.c_[u.reshape(-1), v.reshape(-1), np.ones(s * s)] @ np.linalg.inv(geometry.intrinsics(image_size)).T
    dst = np.asarray(dst_poses, np.float64)
    world_dir = np.einsum("bij,nj->bni", dst[:, :3, :3], rays)  # (B, s*s, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (geometry.plane_z - dst[:, None, 2, 3]) / world_dir[..., 2]
    t = np.where(t > 0, t, np.inf)
    # a ray that misses the plane: a point 1 km away, which no frame has seen (and within the voxel grid)
    return np.nan_to_num(dst[:, None, :3, 3] + t[..., None] * world_dir, nan=1e3, posinf=1e3, neginf=-1e3).clip(-1e3, 1e3)


def episode_seen(poses: np.ndarray, views: np.ndarray, geometry: MemoryGeometry, image_size: int,
                 padded_size: int, s: int, cfg: MemoryConfig | None = None) -> np.ndarray:
    """For every frame t of one episode, which cells of window t's view (views[t]) show ground that frames
    0..t saw: poses, views (T+1, 4, 4) -> (T+1, s, s) bool, as `LatentMemory` finds it in imagination
    (`SpatialMemory.was_seen`, the ground plane's depth at image_size)."""
    k, memory = geometry.intrinsics(image_size), SpatialMemory(replace(cfg or MemoryConfig(), track_seen=True))
    out = np.zeros((len(poses), s, s), bool)
    for t in range(len(poses)):
        memory.add(t, plane_depth(k, poses[t], (image_size, image_size), geometry.plane_z), k, poses[t])
        out[t] = memory.was_seen(ground_cells(views[t][None], geometry, image_size, padded_size, s)[0]).reshape(s, s)
    return out


@torch.no_grad()
def map_slot(codec: Any, maps: torch.Tensor, dst_poses: torch.Tensor, geometry: MemoryGeometry,
             present: torch.Tensor | None = None, seen: torch.Tensor | None = None) -> torch.Tensor:
    """What a model with `start_map` reads beside its memory frames: each row's start frame of the map
    camera (geometry.map_camera, which sees the whole scene) redrawn through the ground plane in the
    camera its chunk heads for, then encoded, so that ground the moving camera has not yet seen is
    known from the start.

    maps (B, 3, S, S) uint8, dst_poses (B, 4, 4), present (B,) bool (rows with a map; default all) ->
    (B, C + 1, s, s): the codec's latent of the redrawn frame and a mask of the latent cells the map
    sees (the latent 0 elsewhere, and all 0 in rows without a map). Pixel-space redrawing keeps the
    map's detail: its frame is at a coarser scale than the moving camera's. `seen` (B, s, s) bool
    (a model with map_unseen): cells whose ground the episode's frames have shown, masked out too."""
    if geometry.map_camera is None or geometry.map_pose is None or geometry.map_fovy is None:
        raise ValueError("a world model with start_map reads the start frame of the task's map camera, and this "
                         "task's geometry names none (the probe's map_camera, map_camera_fovy, map_camera_pose)")
    b, dev, size = len(maps), next(codec.buffers()).device, codec.cfg.image_size
    maps = maps.to(dev)
    src = torch.as_tensor(np.asarray(geometry.map_pose, np.float64), device=dev).expand(b, 1, 4, 4)
    if present is not None:
        src = src * present.to(dev).view(b, 1, 1, 1)
    dst = dst_poses.to(dev, torch.float64)
    drawn = reproject(maps[:, None].float(), src, dst, geometry, size, size, geometry.map_fovy)  # (B, 1, 4, S, S)
    latent = codec.encode(drawn[:, 0, :3].round().clamp(0, 255).to(torch.uint8))  # (B, C, s, s)
    s = latent.shape[-1]
    mask = reproject(latent.new_zeros(b, 1, 1, s, s), src, dst, geometry, size, codec.padded_size,
                     geometry.map_fovy)[:, 0, -1:]  # (B, 1, s, s)
    if seen is not None:
        mask = mask * (~seen.to(dev)).view(b, 1, s, s).to(mask.dtype)
    return torch.cat([latent * mask, mask], dim=1)


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


def revisit_labels(episodes: Sequence[Episode], geometry: MemoryGeometry,
                   gap: int = 20) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per episode (revisit (T+1,) bool, first_visit (T+1,) bool) from its camera poses and the ground
    plane (memory.revisits): a revisit shows mostly a place the camera left more than `gap` frames
    earlier, a first visit almost nothing seen that long ago."""
    k = geometry.intrinsics(LABEL_SIZE)
    out = []
    for ep in episodes:
        poses = np.asarray(geometry.pose_fn(ep.state), np.float64)  # (T+1, 4, 4)
        depths = np.stack([plane_depth(k, p, (LABEL_SIZE, LABEL_SIZE), geometry.plane_z) for p in poses])
        out.append(revisits(depths, k, poses, gap=gap))
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
        if model.cfg.map_unseen:  # the map is hidden where the episode has looked: the cache keeps where that is
            self.cfg = replace(self.cfg, track_seen=True)
        self.size = model.codec_cfg.image_size
        self.k = geometry.intrinsics(self.size)
        self.bank = MemoryBank(rows, self.cfg)
        self.t = np.zeros(rows, np.int64)  # index of each row's newest frame
        self.newest_pos: list[np.ndarray | None] = [None] * rows  # each row's newest agent_pos (D,)
        self.last_heads: dict[str, torch.Tensor] = {}  # the heads' readings of the last frames observed
        self.planned: np.ndarray | None = None
        """(B, H, D) where the next observed chunk's frames were taken, when the caller knows (a learned
        simulator dead-reckoning its agent, world_models/env.py); used by that observe only."""
        self.maps = None  # (rows, 3, S, S) uint8: each episode's start frame of the map camera (start_map)
        if model.cfg.start_map:
            self.maps = torch.zeros(rows, 3, self.size, self.size, dtype=torch.uint8, device=model.state_mean.device)

    def reset(self, rows: Sequence[int], latents: torch.Tensor, agent_pos: np.ndarray,
              maps: torch.Tensor | None = None) -> None:
        """New episodes in `rows`: their real start frames (m, C, s, s) at agent positions (m, D); for a
        model with start_map also their start frames of the map camera, maps (m, 3, S, S) uint8."""
        rows = list(rows)
        if self.maps is not None:
            if maps is None or tuple(maps.shape) != (len(rows), *self.maps.shape[1:]):
                raise ValueError(f"this world model reads the start frame of the map camera "
                                 f"{self.geometry.map_camera!r} (start_map): pass maps ({len(rows)}, "
                                 f"{', '.join(map(str, self.maps.shape[1:]))}) uint8, got "
                                 f"{None if maps is None else tuple(maps.shape)}")
            self.maps[rows] = maps.to(self.maps.device, torch.uint8)
        self.bank.reset(rows)
        for j, row in enumerate(rows):
            self.t[row], self.newest_pos[row] = 0, None
            self._offer(row, latents[j], np.asarray(agent_pos[j]))

    def observe(self, latents: torch.Tensor, rows: Sequence[int] | None = None) -> None:
        """Offer each row's newly generated frames (B, H, C, s, s), posed by `planned` where the caller
        set it, else by the heads' agent_pos (or by `poses`). The heads' readings stay in `last_heads`, so a caller that needs them too need not
        run them again."""
        if self.poses is not None:
            self.last_heads, pos = {}, np.asarray(self.poses(latents))  # (B, H, D)
        else:
            self.last_heads = self.model.predict_heads(latents)  # each (B, H, ...)
            pos = self.last_heads["agent_pos"].cpu().numpy() if self.planned is None else self.planned  # (B, H, D)
        self.planned = None
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
        frame's camera); none from the frames its context holds (the newest K). A model with start_map
        gets (B, M + 1, C + 1, s, s): the map (`map_slot`) last."""
        rows = list(range(len(self.bank))) if rows is None else list(rows)
        acts = None if actions is None else actions.detach().cpu().double().numpy()  # (B, H, A)
        m, kk = self.model.cfg.memory_frames, self.model.cfg.context
        c, s = self.model.codec.latent_channels, self.model.codec.latent_size
        dev = self.model.state_mean.device
        dst = np.zeros((len(rows), 4, 4))
        lat = torch.zeros(len(rows), m, c, s, s, device=dev)
        src = torch.zeros(len(rows), m, 4, 4, dtype=torch.float64)
        for j, row in enumerate(rows):
            if self.newest_pos[row] is None:
                continue  # nothing placed yet: an empty memory
            dst[j] = self.geometry.chunk_pose(self.newest_pos[row], None if acts is None else acts[j])
            if not np.isfinite(dst[j]).all():
                continue  # no pose to draw in: an empty memory
            found = self.bank[row].retrieve(self.k, dst[j], (self.size, self.size),
                                            exclude_after=int(self.t[row]) - kk, k=m)
            for slot, (_, (latent, pose), _) in enumerate(found):
                lat[j, slot], src[j, slot] = latent, torch.from_numpy(pose)
        placed = torch.from_numpy(np.isfinite(dst).all((1, 2)) & dst.any((1, 2)))  # (B,) rows with a view
        dst = torch.from_numpy(np.nan_to_num(dst))
        out = reproject(lat, src.to(dev), dst.to(dev), self.geometry, self.size, self.model.codec.padded_size)
        if self.maps is None:
            return out
        seen = None
        if self.model.cfg.map_unseen:  # (B, s, s) the ground each row's episode has shown: the map hidden there
            cells = ground_cells(dst.numpy(), self.geometry, self.size, self.model.codec.padded_size, s)  # (B, s*s, 3)
            seen = torch.from_numpy(np.stack([self.bank[row].was_seen(cells[j]).reshape(s, s)
                                              for j, row in enumerate(rows)]))
        drawn = map_slot(self.model.codec, self.maps[rows], dst.to(dev), self.geometry, placed, seen)  # (B, C + 1, s, s)
        return torch.cat([out, drawn[:, None].to(out)], dim=1)

    def _offer(self, row: int, latent: torch.Tensor, agent_pos: np.ndarray) -> None:
        pose = np.asarray(self.geometry.pose_fn(agent_pos), np.float64)
        if not np.isfinite(pose).all():  # heads that read no position (a diverged model): nothing to place
            return
        depth = plane_depth(self.k, pose, (self.size, self.size), self.geometry.plane_z)
        self.bank[row].add(int(self.t[row]), depth, self.k, pose, payload=(latent.detach().clone(), pose))
        self.newest_pos[row] = np.asarray(agent_pos, np.float64)
