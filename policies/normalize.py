"""Normalisation statistics of a policy's inputs and outputs, computed from its training data.

Actions are scaled to [-1, 1] by their per-dimension min/max (the generator samples there);
`agent_pos` and `environment_state` are standardised by mean/std. The statistics travel in the
checkpoint's config.json; building a policy without one it needs is an error, never a pass-through.

    stats = compute_stats(episodes, use_env_state=False)
    # {"action": {"min": [...], "max": [...]}, "agent_pos": {"mean": [...], "std": [...]}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wmsuite.types import Episode

EPS = 1e-6


def required_stats(use_env_state: bool) -> dict[str, tuple[str, str]]:
    """Stat name -> the two fields it must hold."""
    need = {"action": ("min", "max"), "agent_pos": ("mean", "std")}
    if use_env_state:
        need["environment_state"] = ("mean", "std")
    return need


def compute_stats(episodes: Sequence[Episode], use_env_state: bool) -> dict[str, dict[str, list[float]]]:
    """Per-dimension statistics over every step of every episode."""
    if not episodes:
        raise ValueError("compute_stats needs at least one episode")
    actions = np.concatenate([ep.actions for ep in episodes])  # (N, A)
    state = np.concatenate([ep.state for ep in episodes])  # (N', D)
    stats: dict[str, dict[str, list[float]]] = {
        "action": {"min": actions.min(0).tolist(), "max": actions.max(0).tolist()},
        "agent_pos": {"mean": state.mean(0).tolist(), "std": state.std(0).tolist()},
    }
    if use_env_state:
        env_state = np.concatenate([ep.env_state for ep in episodes])  # (N', E)
        stats["environment_state"] = {"mean": env_state.mean(0).tolist(), "std": env_state.std(0).tolist()}
    return stats


class Normalizer(nn.Module):
    """Applies the statistics; holds them as non-persistent buffers (the JSON copy is the source)."""

    def __init__(self, stats: dict[str, Any], use_env_state: bool, dims: dict[str, int]) -> None:
        super().__init__()
        if not isinstance(stats, dict):
            raise ValueError("normalisation statistics are missing: the checkpoint/config has no 'normalization' "
                             "entry; retrain with `wmsuite train-policy`, which computes them from the data")
        self.stats = stats
        for name, fields in required_stats(use_env_state).items():
            entry = stats.get(name)
            if not isinstance(entry, dict) or any(f not in entry for f in fields):
                raise ValueError(f"normalisation statistics lack {name!r} {list(fields)} (have {sorted(stats)}); "
                                 "they are computed from the training data by `wmsuite train-policy`")
            for f in fields:
                values = torch.tensor(entry[f], dtype=torch.float32)
                if values.shape != (dims[name],):
                    raise ValueError(f"normalisation stat {name}.{f} has shape {tuple(values.shape)}, "
                                     f"the policy expects ({dims[name]},)")
                self.register_buffer(f"{name}_{f}", values, persistent=False)

    def action_to_unit(self, a: torch.Tensor) -> torch.Tensor:
        """(..., A) env actions -> [-1, 1]."""
        lo, hi = self.action_min, self.action_max
        return 2.0 * (a - lo) / (hi - lo).clamp_min(EPS) - 1.0

    def action_from_unit(self, u: torch.Tensor) -> torch.Tensor:
        """(..., A) [-1, 1] -> env actions."""
        lo, hi = self.action_min, self.action_max
        return (u + 1.0) * 0.5 * (hi - lo).clamp_min(EPS) + lo

    def standardize(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> zero mean, unit variance under the training statistics of `name`."""
        return (x - getattr(self, f"{name}_mean")) / getattr(self, f"{name}_std").clamp_min(EPS)
