"""Tiny policies and synthetic episodes shared by the policy tests."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.core.helpers import make_episode
from wmsuite.policies import PolicyConfig, make_policy
from wmsuite.policies.normalize import compute_stats

TINY = {"image_size": 16, "channels": (8, 16), "feature_dim": 32, "hidden_dim": 64, "head_layers": 2,
        "horizon": 4, "n_action_steps": 2, "num_inference_steps": 5, "cameras": ("top",)}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def episodes():
    return [make_episode(t=12, size=16, seed=i) for i in range(3)]


def tiny_policy(kind: str, episodes, **overrides):
    torch.manual_seed(0)
    ep = episodes[0]
    dims = {"action": ep.actions.shape[1], "agent_pos": ep.state.shape[1], "environment_state": ep.env_state.shape[1]}
    cfg = {**TINY, **overrides}
    return make_policy(kind, dims, compute_stats(episodes, PolicyConfig(kind=kind, **cfg).reads_env_state), **cfg)


def obs_batch(episodes, b: int = 3):
    """Env-layout observations: pixels (B, S, S, 3) uint8, agent_pos (B, D), environment_state (B, E)."""
    ep = episodes[0]
    return {"pixels": {"top": ep.obs["top"][:b]}, "agent_pos": ep.state[:b],
            "environment_state": ep.env_state[:b]}


def window_batch(episodes, b: int = 4, horizon: int = 4):
    from torch.utils.data import default_collate

    from wmsuite.data.windows import WindowConfig, WindowDataset

    ds = WindowDataset(episodes, WindowConfig(context=1, chunk=horizon))
    return default_collate([ds[i] for i in np.linspace(0, len(ds) - 1, b).astype(int)])
