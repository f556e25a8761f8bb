"""Training data of the world model: episodes' frames as latents, windows over them, head targets.

    latents = encode_episodes(codec, episode_frames(episodes, camera))
    data = LatentWindows(episodes, latents, context=4, chunk=4)
    batch = data.batch(sample_windows(data, 16, 0.0, gen))     # what LatentWorldModel.loss takes

Windows come from the core `WindowDataset` (context K, chunk H, future H+K-1: the extra K-1 future
frames are the context of backward windows); its indices and padding rules are reused and the
latent frames are gathered beside it. Batches are CPU tensors; the trainer moves them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.types import Episode
from wmsuite.world_models.codec import FrameCodec, stack_cameras
from wmsuite.world_models.config import camera_names
from wmsuite.world_models.latent_memory import (
    LatentMemory,
    MemoryGeometry,
    episode_retrievals,
    episode_seen,
    map_slot,
    reproject,
    revisit_labels,
)
from wmsuite.world_models.model import LatentWorldModel, instruction_tokens
from wmsuite.world_models.rollout import WorldModelState, rollout


def episode_frames(episodes: Sequence[Episode], camera: str) -> list[torch.Tensor]:
    """Per episode, its camera's frames as (T+1, 3, S, S) uint8 tensors; with several cameras
    ('front+wrist'), stacked on channels, (T+1, 3 M, S, S) (codec.stack_cameras)."""
    out = []
    for i, ep in enumerate(episodes):
        missing = [c for c in camera_names(camera) if c not in ep.obs]
        if missing:
            raise ValueError(f"episode {i} has no camera {missing[0]!r}; it has {ep.cameras}")
        out.append(torch.from_numpy(np.ascontiguousarray(stack_cameras(ep.obs, camera).transpose(0, 3, 1, 2))))
    return out


def time_reversed(ep: Episode) -> Episode:
    """The episode played backward, as the world model's backward windows see it: observation j is
    the original's T-j and action j is the original's T-1-j, the action that joins them (carried by
    the direction flag BACKWARD). Per-step arrays are reversed the same way; success, termination,
    task and meta are the trajectory's and stay. Reversing twice gives the episode back exactly."""
    flip = functools.partial(np.flip, axis=0)
    return Episode(obs={cam: np.ascontiguousarray(flip(f)) for cam, f in ep.obs.items()},
                   state=flip(ep.state).copy(), actions=flip(ep.actions).copy(), rewards=flip(ep.rewards).copy(),
                   success=ep.success, terminated=ep.terminated, truncated=ep.truncated,
                   env_state=flip(ep.env_state).copy(), intervention=flip(ep.intervention).copy(),
                   sim_states=flip(ep.sim_states).copy(), task=ep.task, meta=dict(ep.meta))


def state_stats(episodes: Sequence[Episode]) -> dict[str, list[float]]:
    """Mean/std of agent_pos and environment_state over every step of the episodes."""
    state = np.concatenate([ep.state for ep in episodes])
    env = np.concatenate([ep.env_state for ep in episodes])
    return {"state_mean": state.mean(0).tolist(), "state_std": state.std(0).tolist(),
            "env_state_mean": env.mean(0).tolist(), "env_state_std": env.std(0).tolist()}


MOVING_THRESHOLD = 0.01
"""A window is `moving` when |environment_state[t + H] - environment_state[t]| exceeds this, in the
environment state's own units (1 cm where positions are in metres): an object moved over the chunk."""

REVISIT_GAP = 20
"""A window is `revisiting` when its chunk ends on a frame that shows mostly a place the camera left more
than this many frames earlier (eval-wm's revisit label, with its default gap)."""


class LatentWindows:
    """Training windows over latents: the core WindowDataset's items, frames replaced by latents."""

    def __init__(self, episodes: Sequence[Episode], latents: list[torch.Tensor], context: int, chunk: int,
                 instruction_buckets: int | None = None, memory_frames: int = 0,
                 geometry: MemoryGeometry | None = None, image_size: int = 0, padded_size: int = 0,
                 map_codec: FrameCodec | None = None, map_unseen: bool = False) -> None:
        """`map_codec`: for a model with start_map, its codec; each window's memory then ends in one more
        slot, the episode's start frame of the map camera redrawn in the window's view (map_slot), with
        `map_unseen` only where the episode's frames up to the window have not shown the ground."""
        self.k, self.h = context, chunk
        self.windows = WindowDataset(episodes, WindowConfig(context=context, chunk=chunk, future=chunk + context - 1),
                                     cameras=[])
        self.latents = latents  # per episode (T+1, C, s, s)
        self.actions = [torch.from_numpy(np.asarray(ep.actions, np.float32)) for ep in episodes]  # (T, A)
        # per episode (W,) word ids of its task instruction, for a model that reads them (buckets > 0); else None
        self.instructions = (instruction_tokens([ep.task for ep in episodes], instruction_buckets)
                             if instruction_buckets else None)
        # spatial memory: per episode its camera poses (T+1, 4, 4) and, per newest context frame, the
        # memory_frames frame indices retrieved for it (T+1, M), -1 where a slot is empty
        self.memory_frames, self.geometry = memory_frames, geometry
        self.image_size, self.padded_size = image_size, padded_size or image_size
        if memory_frames:
            if geometry is None or image_size < 1:
                raise ValueError("memory_frames > 0 needs the task's camera geometry (MemoryGeometry, from its probe) "
                                 "and the frames' image size")
            self.poses = [np.asarray(geometry.pose_fn(ep.state), np.float64) for ep in episodes]
            # per episode, the camera window t's memory is drawn in: where its chunk's actions lead (T+1, 4, 4)
            self.views = [geometry.chunk_pose(ep.state, _chunks(ep.actions, chunk)) for ep in episodes]
            self.retrieved = [episode_retrievals(p, geometry, image_size, context, memory_frames, views=v)
                              for p, v in tqdm(list(zip(self.poses, self.views)), desc="memory: retrieve",
                                               unit="ep", leave=False)]
        self.map_codec, self.maps = map_codec, None
        if map_codec is not None:
            cam = geometry.map_camera if memory_frames else None
            missing = [i for i, ep in enumerate(episodes) if cam not in ep.obs]
            if cam is None:
                raise ValueError("a model with start_map reads each episode's start frame of the task's map camera, "
                                 "and the task probe names none (map_camera)")
            if missing:
                raise ValueError(f"a model with start_map reads each episode's start frame of the map camera {cam!r}; "
                                 f"episode {missing[0]} records only {sorted(episodes[missing[0]].obs)}: record the "
                                 f"data with {cam!r} too")
            # per episode (3, S, S) uint8, the map camera's first frame
            self.maps = torch.from_numpy(np.stack([ep.obs[cam][0] for ep in episodes])).permute(0, 3, 1, 2).contiguous()
        self.seen = None  # per episode (T+1, s, s) bool: window t's cells whose ground frames 0..t showed
        if map_codec is not None and map_unseen:
            s = map_codec.latent_size
            self.seen = [episode_seen(p, v, geometry, image_size, self.padded_size, s)
                         for p, v in tqdm(list(zip(self.poses, self.views)), desc="memory: seen", unit="ep", leave=False)]

    @functools.cached_property
    def moving(self) -> torch.Tensor:
        """Indices of the windows whose environment_state changes by more than MOVING_THRESHOLD over
        the chunk (computed on first use: only --moving-fraction needs it)."""
        eps = self.windows.episodes
        change = [np.linalg.norm(eps[e].env_state[min(t + self.h, eps[e].length)] - eps[e].env_state[t])
                  for e, t in self.windows.index]
        return torch.from_numpy(np.flatnonzero(np.asarray(change) > MOVING_THRESHOLD))

    @functools.cached_property
    def revisiting(self) -> torch.Tensor:
        """Indices of the windows whose chunk ends on a revisit frame (latent_memory.revisit_labels: the
        camera shows mostly a place it left more than REVISIT_GAP frames earlier), the windows only a
        memory can predict well; computed on first use (only revisit_fraction needs it) from the task's
        geometry, which a model without memory is given for it too."""
        if self.geometry is None:
            raise ValueError("revisit windows are found from the task's camera geometry (MemoryGeometry); "
                             "LatentWindows was built without one")
        eps = self.windows.episodes
        labels = [revisit for revisit, _ in revisit_labels(eps, self.geometry, REVISIT_GAP)]
        ends = [labels[e][min(t + self.h, eps[e].length)] for e, t in self.windows.index]
        return torch.from_numpy(np.flatnonzero(ends))

    def __len__(self) -> int:
        return len(self.windows)

    def batch(self, idx: Sequence[int], history_chunks: int = 0) -> dict[str, torch.Tensor]:
        """The windows `idx`; with `history_chunks` R > 0 also the real context R chunks before each
        window, the R*H actions from there to the window and the H+K real frames from there on
        (`history*`, for the chained and cycle objectives)."""
        items = [self.windows[int(i)] for i in idx]
        ctx, fut, hist, hist_act, hist_valid, hist_tgt = [], [], [], [], [], []
        span = history_chunks * self.h
        for it in items:
            e = int(it["episode_index"])
            lat = self.latents[e]
            t, n = int(it["t"]), len(lat)
            ctx.append(lat[torch.arange(t - self.k + 1, t + 1).clamp(0, n - 1)])
            fut.append(lat[torch.arange(t + 1, t + self.h + self.k).clamp(0, n - 1)])
            if span:
                t0 = max(t - span, 0)
                hist.append(lat[torch.arange(t0 - self.k + 1, t0 + 1).clamp(0, n - 1)])
                hist_tgt.append(lat[torch.arange(t0, t0 + self.h + self.k).clamp(0, n - 1)])
                hist_valid.append(t >= span)
                hist_act.append(self.actions[e][t0 : t0 + span] if t >= span
                                else torch.zeros(span, self.actions[e].shape[1]))
        keys = ("actions", "action_is_pad", "future_is_pad", "future_state", "future_env_state",
                "reached_success", "rewards")
        out = {k: torch.stack([it[k] for it in items]) for k in keys}
        out["future_state"], out["future_env_state"] = out["future_state"][:, : self.h], out["future_env_state"][:, : self.h]
        out["context"], out["future"] = torch.stack(ctx), torch.stack(fut)
        if self.instructions is not None:
            out["instruction"] = self.instructions[[int(it["episode_index"]) for it in items]]  # (B, W)
        if self.memory_frames:
            out["memory"] = self._memory(items)
        if span:
            out.update(history=torch.stack(hist), history_actions=torch.stack(hist_act),
                       history_valid=torch.tensor(hist_valid), history_target=torch.stack(hist_tgt))
        return out


    def _memory(self, items: list[dict]) -> torch.Tensor:
        """(B, M, C+1, s, s): each window's retrieved frames reprojected into the camera its chunk is
        expected to end in (MemoryGeometry.chunk_pose; the newest context frame's where the task's
        geometry cannot tell); with a map codec, the map slot last (B, M + 1, C+1, s, s)."""
        lat, src, dst = [], [], []
        for it in items:
            e, t = int(it["episode_index"]), int(it["t"])
            idx = torch.from_numpy(self.retrieved[e][t])  # (M,)
            lat.append(self.latents[e][idx.clamp_min(0)] * (idx >= 0).view(-1, 1, 1, 1))
            src.append(torch.from_numpy(self.poses[e][idx.clamp_min(0).numpy()]) * (idx >= 0).view(-1, 1, 1))
            dst.append(torch.from_numpy(self.views[e][t]))
        out = reproject(torch.stack(lat), torch.stack(src), torch.stack(dst), self.geometry, self.image_size,
                        self.padded_size)
        if self.maps is None:
            return out
        seen = None if self.seen is None else torch.from_numpy(np.stack(
            [self.seen[int(it["episode_index"])][int(it["t"])] for it in items]))  # (B, s, s)
        drawn = map_slot(self.map_codec, self.maps[[int(it["episode_index"]) for it in items]], torch.stack(dst),
                         self.geometry, seen=seen)  # (B, C + 1, s, s)
        return torch.cat([out, drawn[:, None].to(out)], dim=1)


def _chunks(actions: np.ndarray, h: int) -> np.ndarray:
    """(T, A) -> (T+1, H, A): the H actions from each frame on, zero (standing still) past the end."""
    padded = np.concatenate([np.asarray(actions, np.float64), np.zeros((h, actions.shape[1]))])
    return np.lib.stride_tricks.sliding_window_view(padded, h, axis=0).transpose(0, 2, 1)[: len(actions) + 1]


@torch.no_grad()
def encode_episodes(codec: FrameCodec, frames: list[torch.Tensor], batch: int = 256) -> list[torch.Tensor]:
    """Per episode (T+1, 3, S, S) uint8 -> (T+1, C, s, s) latents, encoded on the codec's device, kept on the CPU."""
    device = next(codec.buffers()).device
    out = []
    for f in tqdm(frames, desc="encode", unit="ep", leave=False):
        out.append(torch.cat([codec.encode(f[i : i + batch].to(device)).cpu() for i in range(0, len(f), batch)]))
    return out


def sample_windows(data: LatentWindows, batch_size: int, moving_fraction: float, gen: torch.Generator,
                   revisit_fraction: float = 0.0) -> list[int]:
    """Window indices of one batch: round(moving_fraction * B) of them from `data.moving`,
    round(revisit_fraction * B) from `data.revisiting`, the rest uniform over all windows (with both 0,
    exactly the draw of plain uniform sampling)."""
    pools = []
    for name, pool, fraction, what in (
            ("moving", "moving", moving_fraction, "moves an object (environment_state never changes by more "
                                                  f"than {MOVING_THRESHOLD} over a chunk)"),
            ("revisit", "revisiting", revisit_fraction, "ends its chunk on a revisit frame")):
        n = round(fraction * batch_size)
        if n and not len(getattr(data, pool)):
            raise ValueError(f"{name}_fraction > 0 but no training window {what}; use {name}_fraction 0")
        pools.append((pool, n))
    idx = torch.randint(len(data), (batch_size - sum(n for _, n in pools),), generator=gen)
    for pool, n in pools:
        if n:
            windows = getattr(data, pool)
            idx = torch.cat([windows[torch.randint(len(windows), (n,), generator=gen)], idx])
    return idx.tolist()


def frame_targets(episodes: Sequence[Episode]) -> dict[str, torch.Tensor]:
    """Per-frame head targets over all episodes: state (N, D), env_state (N, E), success (N,) (the frames
    from Episode.success_from on: the last of a successful episode, or every frame of one recorded past its
    success), reward (N,) (of the action leading there)."""
    success, reward = [], []
    for ep in episodes:
        s = np.zeros(ep.length + 1, np.float32)
        if ep.success_from is not None:
            s[ep.success_from :] = 1.0
        success.append(s)
        reward.append(np.concatenate([[0.0], ep.rewards]).astype(np.float32))
    return {"state": torch.from_numpy(np.concatenate([ep.state for ep in episodes])),
            "env_state": torch.from_numpy(np.concatenate([ep.env_state for ep in episodes])),
            "success": torch.from_numpy(np.concatenate(success)), "reward": torch.from_numpy(np.concatenate(reward))}


@torch.no_grad()
def generated_head_data(model: LatentWorldModel, episodes: Sequence[Episode], latents: torch.Tensor,
                        windows: int, chunks: int, seed: int = 0, batch: int = 64,
                        geometry: MemoryGeometry | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames the world model generates, paired with the index of the real frame each stands for.

    From `windows` random start frames (the start frame repeated as context, as a rollout from a reset
    begins, or the K real frames before it), roll the model open-loop for up to `chunks` chunks with
    the episode's true actions. latents: every real frame of every episode, concatenated (N, C, s, s).
    A model with spatial memory needs `geometry` (the task's moving camera): its memory holds the
    start frame alone after a reset-like start, else every real frame up to the start, then each
    generated frame, posed by the episode's recorded agent positions (the heads being trained cannot
    pose them yet). Returns generated latents (M, C, s, s) and their real frame indices into `latents` (M,).
    """
    if model.cfg.memory_frames and geometry is None:
        raise ValueError("a world model with spatial memory (memory_frames > 0) generates with its memory: pass "
                         "geometry, the task's moving camera (wmsuite.cli.common.memory_geometry)")
    k, h = model.cfg.context, model.cfg.chunk
    offsets = np.cumsum([0] + [ep.length + 1 for ep in episodes])
    buckets = model.cfg.instruction_buckets
    instructions = instruction_tokens([ep.task for ep in episodes], buckets).to(latents.device) if buckets else None
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=latents.device).manual_seed(seed)
    eps = rng.integers(len(episodes), size=windows)
    starts = np.array([rng.integers(0, max(episodes[e].length - h + 1, 1)) for e in eps])
    single = rng.random(windows) < 0.5
    out_lat, out_idx = [], []
    for i in tqdm(range(0, windows, batch), desc="heads: generate", unit="batch", leave=False):
        e, t0, one = eps[i : i + batch], starts[i : i + batch], single[i : i + batch]
        ctx_idx = np.stack([offsets[a] + (np.full(k, t) if o else np.clip(np.arange(t - k + 1, t + 1), 0, None))
                            for a, t, o in zip(e, t0, one)])  # (b, K) rows of `latents`
        words = instructions[torch.from_numpy(e)] if instructions is not None else None  # (b, W)
        state = WorldModelState(latents[torch.from_numpy(ctx_idx).to(latents.device)], words)  # context (b, K, C, s, s)
        memory = _true_pose_memory(model, geometry, episodes, latents, offsets, e, t0, one, h) \
            if model.cfg.memory_frames else None
        for c in range(chunks):
            t = t0 + c * h  # first action of this chunk
            alive = np.array([tt + h <= episodes[a].length for a, tt in zip(e, t)])
            if not alive.any():
                break
            act = np.zeros((len(e), h, model.cfg.action_dim), np.float32)
            for j, (a, tt) in enumerate(zip(e, t)):
                if alive[j]:
                    act[j] = episodes[a].actions[tt : tt + h]
            lat, state = rollout(model, state, torch.from_numpy(act).to(latents.device), generator=gen,
                                 memory=memory)  # (b, H, C, s, s)
            rows = np.flatnonzero(alive)
            out_lat.append(lat[torch.from_numpy(rows).to(latents.device)].flatten(0, 1).cpu())
            out_idx.append(torch.from_numpy((offsets[e[rows]] + t[rows])[:, None] + np.arange(1, h + 1)).flatten())
    return torch.cat(out_lat).to(latents.device), torch.cat(out_idx).to(latents.device)


def map_frame(episode: Episode, geometry: MemoryGeometry, t: int = 0) -> torch.Tensor:
    """(1, 3, S, S) uint8: frame t of the map camera, where a start_map model's imagined episode starts."""
    if geometry.map_camera not in episode.obs:
        raise ValueError(f"a model with start_map reads the map camera {geometry.map_camera!r}, which these episodes "
                         f"do not record (cameras {sorted(episode.obs)})")
    return torch.from_numpy(episode.obs[geometry.map_camera][t]).permute(2, 0, 1)[None].contiguous()


def _true_pose_memory(model: LatentWorldModel, geometry: MemoryGeometry, episodes: Sequence[Episode],
                      latents: torch.Tensor, offsets: np.ndarray, eps: np.ndarray, starts: np.ndarray,
                      single: np.ndarray, h: int) -> LatentMemory:
    """generated_head_data's memory for one batch of windows: each row's real frames up to its start
    (the start alone for a reset-like window), then its generated frames, posed by the recorded agent
    positions of the frames they stand for."""
    frames = [latents[offsets[a] : offsets[a] + episodes[a].length + 1] for a in eps]
    return recorded_memory(model, geometry, [episodes[a] for a in eps], frames, np.where(single, starts, 0), starts)


def recorded_memory(model: LatentWorldModel, geometry: MemoryGeometry, episodes: Sequence[Episode],
                    frames: Sequence[torch.Tensor], first: Sequence[int], upto: Sequence[int]) -> LatentMemory:
    """The memory of rollouts along recorded episodes: row j starts at episode frame first[j] (its map
    frame there, for a start_map model) and holds frames[j][first[j] .. upto[j]] (each (T+1, C, s, s),
    indexed by episode frame); the frames a rollout adds later are posed by the recorded agent positions
    of the frames they stand for."""

    def recorded(lat: torch.Tensor) -> np.ndarray:  # (b, H, C, s, s) -> (b, H, D)
        newest = np.asarray(first) + memory.t  # the episode frame of each row's newest frame, before these
        return np.stack([ep.state[np.minimum(np.arange(n + 1, n + lat.shape[1] + 1), ep.length)]
                         for ep, n in zip(episodes, newest)])

    memory = LatentMemory(model, geometry, len(episodes), poses=recorded)
    for j, (ep, f0, t) in enumerate(zip(episodes, first, upto)):
        memory.reset([j], frames[j][f0][None], ep.state[f0][None],
                     map_frame(ep, geometry, f0) if model.cfg.start_map else None)
        for f in range(f0 + 1, t + 1):
            memory.append(j, frames[j][f], ep.state[f])
    return memory
