"""`relabel_goal`: the same recorded motion under another goal, checked against the real env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from wmsuite.envs import make_env
from wmsuite.envs.experts import make_expert
from wmsuite.envs.push_cube import PushCubeEnv, detect_cube_xy, random_goal, relabel_goal
from wmsuite.rollout import RolloutConfig, rollout
from wmsuite.types import Episode


@pytest.fixture(scope="module")
def env():
    env = PushCubeEnv()
    yield env
    env.close()


@pytest.fixture(scope="module")
def episode() -> Episode:
    """One expert episode recorded by the rollout engine, as `wmsuite collect` records it (sim states included)."""
    vec = gym.vector.SyncVectorEnv([lambda: make_env("wmsuite/PushCube-v0")],
                                   autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    (ep,) = rollout(make_expert("wmsuite/PushCube-v0", skill=1.0, seed=3), vec,
                    RolloutConfig(episodes=1, seed=3, progress=False))
    vec.close()
    assert ep.success and ep.length > 4  # a pushed cube that reaches its goal
    return ep


def test_own_goal_gives_the_recorded_episode_back(env, episode):
    same = relabel_goal(env, episode, episode.env_state[0, 4:6])
    np.testing.assert_array_equal(same.obs["top"], episode.obs["top"])  # re-rendered bit for bit
    np.testing.assert_array_equal(same.env_state, episode.env_state)
    np.testing.assert_array_equal(same.rewards, episode.rewards)
    np.testing.assert_allclose(same.sim_states, episode.sim_states, atol=1e-6)
    assert (same.success, same.terminated, same.truncated, same.length) == (True, True, False, episode.length)


def test_moved_goal_moves_only_the_goal(env, episode):
    cube0 = episode.env_state[0, :2]
    goal = random_goal(np.random.default_rng(1), cube0)
    far = -np.sign(episode.env_state[-1, :2]) * 0.2  # the opposite corner from where the cube ends
    for new in (goal, far):
        moved = relabel_goal(env, episode, new)
        np.testing.assert_allclose(moved.env_state[:, 4:6], np.broadcast_to(new, (moved.length + 1, 2)), atol=1e-6)
        assert not np.array_equal(moved.obs["top"][0], episode.obs["top"][0])  # the disk is drawn elsewhere
        # the cube (and so the physics) is untouched: the detector finds it where it was
        n = moved.length + 1
        np.testing.assert_allclose(detect_cube_xy(moved.obs["top"]), detect_cube_xy(episode.obs["top"][:n]),
                                   atol=2e-3)
    assert not moved.success and moved.truncated and moved.length == episode.length
    assert moved.rewards.sum() == 0 and moved.meta["relabelled_goal"] == pytest.approx(list(far))


def test_goal_on_the_cube_path_ends_the_episode_there(env, episode):
    t = episode.length // 2
    moved = relabel_goal(env, episode, episode.env_state[t, :2])  # the cube's centre at step t
    assert moved.success and moved.terminated and 1 <= moved.length <= t
    assert moved.rewards[-1] == 1.0 and moved.rewards[:-1].sum() == 0
    np.testing.assert_array_equal(moved.actions, episode.actions[: moved.length])


def test_needs_simulator_states(env, episode):
    bare = Episode(obs=episode.obs, state=episode.state, actions=episode.actions, rewards=episode.rewards,
                   success=episode.success, env_state=episode.env_state)
    with pytest.raises(ValueError, match="sim_states"):
        relabel_goal(env, bare, [0.0, 0.0])
