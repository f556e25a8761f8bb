"""WorldModelEnv: Gymnasium vector-env expectations, real context at reset, and the rollout engine."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.core.helpers import ConstantPolicy, CounterEnv
from tests.world_models.conftest import tiny_model
from wmsuite.rollout import RolloutConfig, rollout
from wmsuite.types import Episode
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.env import EpisodeContext, GymResetContext, WorldModelEnv
from wmsuite.world_models.model import LatentWorldModel


def _episode_env(episodes, n=3, horizon=3, seed=0):
    return WorldModelEnv(tiny_model(episodes), EpisodeContext(episodes), num_envs=n, horizon=horizon, seed=seed)


def test_spaces_and_step_contract(episodes):
    env = _episode_env(episodes)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
    assert env.single_action_space.shape == (2, 2) and env.action_space.shape == (3, 2, 2)
    obs, info = env.reset(seed=[0, 1, 2])
    assert env.observation_space.contains(obs)
    assert info["is_success"].dtype == bool and info["is_success"].shape == (3,)
    env.action_space.seed(0)
    obs, reward, term, trunc, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    assert reward.shape == (3,) and reward.dtype == np.float32
    assert term.dtype == bool and trunc.dtype == bool and term.shape == trunc.shape == (3,)
    assert info["trust/idm_error"].shape == (3,) and np.isfinite(info["trust/idm_error"]).all()
    assert ((info["trust/success_prob"] >= 0) & (info["trust/success_prob"] <= 1)).all()
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(np.zeros((3, 5, 2), np.float32))


def test_reset_uses_real_context_and_is_seeded(episodes):
    env = _episode_env(episodes)
    obs, _ = env.reset(seed=[2, 0, 1])
    for row, ep_index in enumerate([2, 0, 1]):
        ep = episodes[ep_index]
        # The pixel codec is lossless, so the observation after reset is exactly the real first frame.
        np.testing.assert_array_equal(obs["pixels"]["top"][row], ep.obs["top"][0])
        np.testing.assert_array_equal(obs["agent_pos"][row], ep.state[0])
        np.testing.assert_array_equal(obs["environment_state"][row], ep.env_state[0])
    # Same seeds and actions -> the same imagined trajectory, in a fresh env too.
    acts = np.random.default_rng(0).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = _episode_env(episodes, seed=7)
        env.reset(seed=[2, 0, 1])
        runs.append([env.step(a)[0]["pixels"]["top"] for a in acts])
    np.testing.assert_array_equal(np.stack(runs[0]), np.stack(runs[1]))


def test_reset_mask_resets_only_masked_envs_and_horizon_truncates(episodes):
    env = _episode_env(episodes, horizon=2)
    env.reset(seed=[0, 1, 2])
    chunk = np.zeros((3, 2, 2), np.float32)
    obs1, *_ = env.step(chunk)
    obs, _ = env.reset(seed=[3, None, None], options={"reset_mask": np.array([True, False, False])})
    np.testing.assert_array_equal(obs["pixels"]["top"][0], episodes[3].obs["top"][0])
    np.testing.assert_array_equal(obs["pixels"]["top"][1:], obs1["pixels"]["top"][1:])
    _, _, term, trunc, _ = env.step(chunk)
    assert not trunc[0] and (trunc[1:] | term[1:]).all()  # env 0 restarted its clock; 1 and 2 hit horizon 2


def _counter_model() -> LatentWorldModel:
    """A tiny model sized for CounterEnv (8x8 frames, agent_pos (1,), environment_state (1,), 1-D actions)."""
    torch.manual_seed(0)
    cfg = WorldModelConfig(context=2, chunk=3, action_dim=1, state_dim=1, env_state_dim=1, channels=(32,))
    stats = {"state_mean": [0.0], "state_std": [1.0], "env_state_mean": [0.0], "env_state_std": [1.0]}
    return LatentWorldModel(cfg, CodecConfig(kind="pixel", image_size=8, downsample=2), stats)


def _counter_env() -> CounterEnv:
    return CounterEnv(image_size=8)


def test_gym_reset_context_matches_the_real_env():
    env = WorldModelEnv(_counter_model(), GymResetContext(_counter_env), num_envs=2, horizon=4)
    real = _counter_env()
    obs, _ = env.reset(seed=[3, 9])
    for row, seed in enumerate([3, 9]):
        real_obs, _ = real.reset(seed=seed)
        np.testing.assert_array_equal(obs["pixels"]["top"][row], real_obs["pixels"]["top"])
        np.testing.assert_array_equal(obs["agent_pos"][row], real_obs["agent_pos"])


def test_runs_under_the_rollout_engine():
    env = WorldModelEnv(_counter_model(), GymResetContext(_counter_env), num_envs=2, horizon=4)
    policy = ConstantPolicy(value=0.5, horizon=5)  # predicts 5, the env takes chunks of 3
    episodes: list[Episode] = list(rollout(policy, env, RolloutConfig(episodes=5, seed=10, progress=False)))
    assert sorted(ep.meta["episode_index"] for ep in episodes) == list(range(5))
    real = _counter_env()
    for ep in episodes:
        assert ep.length % 3 == 0 and 3 <= ep.length <= 4 * 3
        np.testing.assert_allclose(ep.actions, 0.5)
        assert ep.terminated or ep.truncated
        assert len(ep.meta["trust"]["trust/idm_error"]) == ep.length // 3
        first, _ = real.reset(seed=ep.meta["seed"])  # the episode starts from the real env's reset
        np.testing.assert_array_equal(ep.obs["top"][0], first["pixels"]["top"])


def test_seed_list_reset_reseeds_sampling_noise(episodes):
    """One env, the same seed list twice: the noise restarts with it (waves of a resumed evaluation)."""
    env = _episode_env(episodes, seed=7)
    acts = np.random.default_rng(1).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    runs = []
    for _ in range(2):
        env.reset(seed=[2, 0, 1])
        runs.append([env.step(a)[0]["pixels"]["top"] for a in acts])
    np.testing.assert_array_equal(np.stack(runs[0]), np.stack(runs[1]))
