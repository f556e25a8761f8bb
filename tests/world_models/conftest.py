"""Tiny world models and synthetic episodes shared by the world-model tests."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmsuite.types import Episode
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.train import state_stats

torch.set_num_threads(1)


def moving_square_episode(t: int = 12, size: int = 16, seed: int = 0) -> Episode:
    """A white 4x4 square that the action moves by (dx, dy) pixels per step on a black frame; the state
    is its position, env_state its position and a fixed goal; success when it reaches the right edge."""
    rng = np.random.default_rng(seed)
    pos = np.array([2.0 + rng.integers(0, 3), 2.0 + rng.integers(0, 6)])
    actions = rng.choice([-1.0, 0.0, 1.0], size=(t, 2)).astype(np.float32)
    actions[:, 0] = 1.0  # always drift right, so the episode ends at the edge
    frames, states = [], []
    for i in range(t + 1):
        img = np.zeros((size, size, 3), np.uint8)
        x, y = int(pos[0]), int(pos[1])
        img[y : y + 4, x : x + 4] = 255
        frames.append(img)
        states.append(pos.copy())
        if i < t:
            pos = np.clip(pos + actions[i], 0, size - 4)
    states = np.asarray(states, np.float32)
    env_state = np.concatenate([states, np.full((t + 1, 2), 7.0, np.float32)], 1)
    success = bool(states[-1, 0] >= size - 4)
    rewards = np.zeros(t, np.float32)
    rewards[-1] = float(success)
    return Episode(obs={"top": np.stack(frames)}, state=states, env_state=env_state, actions=actions,
                   rewards=rewards, success=success, terminated=success, truncated=not success)


@pytest.fixture(scope="session")
def episodes() -> list[Episode]:
    return [moving_square_episode(seed=s) for s in range(4)]


def tiny_config(**overrides) -> WorldModelConfig:
    kwargs = dict(context=2, chunk=2, action_dim=2, state_dim=2, env_state_dim=4, channels=(32, 32),
                  sampling_steps=2, motion_weight=0.0, camera="top")
    kwargs.update(overrides)
    return WorldModelConfig(**kwargs)


def tiny_model(episodes: list[Episode], codec_kind: str = "pixel", seed: int = 0, **overrides) -> LatentWorldModel:
    torch.manual_seed(seed)
    codec_cfg = CodecConfig(kind=codec_kind, image_size=16, downsample=4, width=16, blocks=1)
    model = LatentWorldModel(tiny_config(**overrides), codec_cfg, state_stats(episodes))
    frames = torch.from_numpy(np.concatenate([ep.obs["top"] for ep in episodes]).transpose(0, 3, 1, 2).copy())
    model.codec.fit_latent_stats(frames)
    return model


def overfit(model: LatentWorldModel, batch: dict, steps: int = 200, lr: float = 2e-3) -> None:
    """`steps` Adam steps of the joint loss on one fixed batch (seeded): what a model can learn at all."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    torch.manual_seed(0)
    for _ in range(steps):
        loss, _ = model.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
