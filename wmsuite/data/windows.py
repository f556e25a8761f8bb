"""Training windows `(context frames, action chunk, future frames)` sampled from episodes.

For an anchor time t (the last context frame) a window holds

    context   observations t-K+1 .. t          (K = context)
    actions   actions      t .. t+H-1          (H = chunk)
    future    observations t+1 .. t+F          (F = future; F = H pairs each action with its result)

Indices before the episode start repeat the first observation and indices past its end repeat the
last observation/action; `*_is_pad` masks say which entries are padding (LeRobot's convention), so
losses can ignore them. Policies use (context, actions) with F = 0; world models use all three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from wmsuite.types import Episode


@dataclass
class WindowConfig:
    context: int = 1
    """K: observations up to and including the anchor step."""
    chunk: int = 8
    """H: actions from the anchor step on."""
    future: int = 0
    """F: observations after the anchor step (0 for policies)."""
    stride: int = 1
    """Distance between consecutive anchor steps."""
    pad_actions: bool = True
    """Allow windows whose chunk runs past the episode end (padded, marked in `action_is_pad`)."""

    def __post_init__(self) -> None:
        for name in ("context", "chunk", "stride"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.future < 0:
            raise ValueError(f"future must be >= 0, got {self.future}")


class WindowDataset(Dataset):
    """Windows over a list of episodes (or an HDF5 path), all held in memory as numpy.

    Item (a dict of tensors, `cam` over the episodes' cameras):
        context_frames[cam]  uint8   (K, 3, H, W)
        context_state        float32 (K, D)
        context_env_state    float32 (K, E)
        context_is_pad       bool    (K,)
        actions              float32 (Hc, A)
        action_is_pad        bool    (Hc,)
        future_frames[cam]   uint8   (F, 3, H, W)
        future_state         float32 (F, D)
        future_env_state     float32 (F, E)
        future_is_pad        bool    (F,)
        rewards              float32 (Hc,)    reward of each chunk action (0 on padding)
        success              bool    ()       the episode's outcome
        reached_success      bool    (F,)     future step is at/after the episode's success (Episode.success_from)
        episode_index, t     int64   ()
    """

    def __init__(self, episodes: Sequence[Episode] | str | Path, cfg: WindowConfig | None = None,
                 cameras: Sequence[str] | None = None) -> None:
        if isinstance(episodes, (str, Path)):
            from wmsuite.data import load_episodes

            episodes = load_episodes(episodes)
        self.cfg = cfg or WindowConfig()
        if not episodes:
            raise ValueError("WindowDataset needs at least one episode")
        self.episodes = list(episodes)
        first = self.episodes[0]
        self.cameras = list(cameras) if cameras is not None else first.cameras
        for i, ep in enumerate(self.episodes):
            missing = set(self.cameras) - set(ep.obs)
            if missing:
                raise ValueError(f"episode {i} lacks camera(s) {sorted(missing)}; it has {ep.cameras}")
            if ep.actions.shape[1] != first.actions.shape[1] or ep.state.shape[1] != first.state.shape[1]:
                raise ValueError(f"episode {i} has action/state sizes {ep.actions.shape[1]}/{ep.state.shape[1]}, "
                                 f"episode 0 has {first.actions.shape[1]}/{first.state.shape[1]}")
        self.index: list[tuple[int, int]] = []
        for e, ep in enumerate(self.episodes):
            last = ep.length - 1 if self.cfg.pad_actions else ep.length - self.cfg.chunk
            self.index += [(e, t) for t in range(0, last + 1, self.cfg.stride)]
        if not self.index:
            raise ValueError(f"no window of chunk {self.cfg.chunk} fits in these episodes; "
                             "shorten the chunk or allow padding")

    @property
    def action_dim(self) -> int:
        return int(self.episodes[0].actions.shape[1])

    @property
    def state_dim(self) -> int:
        return int(self.episodes[0].state.shape[1])

    @property
    def env_state_dim(self) -> int:
        return int(self.episodes[0].env_state.shape[1])

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> dict[str, object]:
        e, t = self.index[i]
        ep, cfg = self.episodes[e], self.cfg
        n_obs = ep.length + 1
        ctx = np.arange(t - cfg.context + 1, t + 1)  # (K,)
        act = np.arange(t, t + cfg.chunk)  # (Hc,)
        fut = np.arange(t + 1, t + 1 + cfg.future)  # (F,)
        done_from = ep.success_from  # first frame showing the task done, or None
        ctx_c, act_c, fut_c = ctx.clip(0, n_obs - 1), act.clip(0, ep.length - 1), fut.clip(0, n_obs - 1)

        def frames(idx: np.ndarray) -> dict[str, torch.Tensor]:
            return {c: torch.from_numpy(np.ascontiguousarray(ep.obs[c][idx].transpose(0, 3, 1, 2)))
                    for c in self.cameras}

        act_pad = act >= ep.length
        rewards = ep.rewards[act_c].copy()
        rewards[act_pad] = 0.0
        return {
            "context_frames": frames(ctx_c),
            "context_state": torch.from_numpy(ep.state[ctx_c]),
            "context_env_state": torch.from_numpy(ep.env_state[ctx_c]),
            "context_is_pad": torch.from_numpy(ctx < 0),
            "actions": torch.from_numpy(ep.actions[act_c]),
            "action_is_pad": torch.from_numpy(act_pad),
            "future_frames": frames(fut_c),
            "future_state": torch.from_numpy(ep.state[fut_c]),
            "future_env_state": torch.from_numpy(ep.env_state[fut_c]),
            "future_is_pad": torch.from_numpy(fut >= n_obs),
            "rewards": torch.from_numpy(rewards),
            "success": torch.tensor(ep.success),
            "reached_success": torch.from_numpy(fut >= done_from if done_from is not None else np.zeros(len(fut), bool)),
            "episode_index": torch.tensor(e),
            "t": torch.tensor(t),
            "task": ep.task,  # the language instruction (a list of strings once batched)
        }
