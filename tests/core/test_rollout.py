"""The rollout engine against an environment whose every trajectory is known."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.core.helpers import ConstantPolicy, CounterEnv
from wmsuite.rollout import RolloutConfig, rollout


def vec(n: int) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: CounterEnv() for _ in range(n)],
                                    autoreset_mode=gym.vector.AutoresetMode.DISABLED)


@pytest.mark.parametrize("num_envs", [1, 3, 8])
def test_every_episode_once_with_its_seed(num_envs):
    eps = list(rollout(ConstantPolicy(1.0), vec(num_envs), RolloutConfig(episodes=7, seed=10, progress=False)))
    assert sorted(e.meta["episode_index"] for e in eps) == list(range(7))
    for e in eps:
        start = (10 + e.meta["episode_index"]) % 5  # CounterEnv starts at seed % 5
        assert e.meta["seed"] == 10 + e.meta["episode_index"]
        assert e.state[0, 0] == start
        # +1 per step until pos >= 3: steps = max(3 - start, 1)
        assert e.length == max(3 - start, 1) and e.success and e.terminated
        np.testing.assert_array_equal(e.state[:, 0], start + np.arange(e.length + 1))
        assert e.obs["top"].shape == (e.length + 1, 4, 4, 3)


def test_failures_truncate_and_skip_resumes():
    cfg = RolloutConfig(episodes=4, seed=0, progress=False)
    eps = list(rollout(ConstantPolicy(-1.0), vec(2), cfg, skip={1, 2}))
    assert sorted(e.meta["episode_index"] for e in eps) == [0, 3]
    assert all(e.truncated and not e.success and e.length == 10 for e in eps)


def test_chunks_are_executed_then_replanned():
    policy = ConstantPolicy(0.5, horizon=4)
    eps = list(rollout(policy, vec(1), RolloutConfig(episodes=1, seed=0, n_action_steps=2, progress=False)))
    assert eps[0].length == 6  # 0 -> 3 in steps of 0.5
    assert len(policy.calls) == 3  # re-planned every 2 actions


class ChunkEnv(CounterEnv):
    """Takes a whole (3, 1) chunk per step, like a world model."""

    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Box(-1, 1, (3, 1), np.float32)

    def step(self, action):
        return super().step(np.asarray(action).sum(0))


def test_chunk_env_gets_whole_chunks():
    env = gym.vector.SyncVectorEnv([ChunkEnv, ChunkEnv], autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    eps = list(rollout(ConstantPolicy(0.5, horizon=5), env, RolloutConfig(episodes=2, seed=0, progress=False)))
    e = next(e for e in eps if e.meta["episode_index"] == 0)
    assert e.length == 6 and e.actions.shape == (6, 1)  # two chunks of three actions, +1.5 each
    assert e.state[-1, 0] == 3.0


def test_policy_with_wrong_action_size_is_refused():
    class Wide(ConstantPolicy):
        def predict_action_chunk(self, obs):
            return np.zeros((len(obs["agent_pos"]), 2, 3), np.float32)

    with pytest.raises(ValueError, match="actions of size 3"):
        list(rollout(Wide(), vec(1), RolloutConfig(episodes=1, progress=False)))


def test_stateful_policy_sees_full_batch_and_env_resets():
    class Stateful(ConstantPolicy):
        def __init__(self):
            super().__init__(1.0, horizon=1)
            self.resets = []

        def reset_envs(self, idx):
            self.resets.append(list(idx))

    p = Stateful()
    list(rollout(p, vec(3), RolloutConfig(episodes=5, seed=0, progress=False)))
    assert set(p.calls) == {3}
    assert p.resets[0] == [0, 1, 2] and sum(len(r) for r in p.resets) == 5


def test_stateful_policy_with_env_indices_is_asked_only_for_rows_that_need_a_chunk():
    class Indexed(ConstantPolicy):
        def __init__(self):
            super().__init__(1.0, horizon=2)
            self.asked = []

        def reset_envs(self, idx):
            pass

        def predict_action_chunk(self, obs, env_indices=None):
            self.asked.append(list(env_indices))
            return super().predict_action_chunk(obs)

    p = Indexed()
    # CounterEnv episodes of seeds 0..4 last 3, 2, 1, 1, 1 steps: the sub-envs fall out of step
    list(rollout(p, vec(3), RolloutConfig(episodes=5, seed=0, act_every=2, progress=False)))
    assert p.asked[0] == [0, 1, 2] and any(len(a) < 3 for a in p.asked)
    assert set(p.calls) == {len(a) for a in p.asked}


@pytest.mark.parametrize("env_id", ["wmsuite/PickPlace-v0", "wmsuite/PushCube-v0"])
def test_chunked_expert_episodes_do_not_depend_on_the_number_of_envs(env_id):
    """A scripted expert planning 4-action chunks, its sub-envs out of step (episodes end at any step):
    every episode is what it is when run alone (asked for the whole batch, the expert planned and
    advanced rows whose chunk was thrown away)."""
    from wmsuite.envs.experts import make_expert
    from wmsuite.rollout import make_vector_env

    def run(n):
        env = make_vector_env(env_id, n, asynchronous=False, env_kwargs={"cameras": ()})
        cfg = RolloutConfig(episodes=6, seed=40, act_every=4, episode_rng=True, record_frames=False, progress=False)
        eps = {e.meta["episode_index"]: e for e in rollout(make_expert(env_id, skill=0.5, seed=3, horizon=4), env, cfg)}
        env.close()
        return eps

    alone, batched = run(1), run(3)
    assert len({e.length for e in alone.values()}) > 1  # lengths differ: the sub-envs do fall out of step
    for i, e in alone.items():
        np.testing.assert_array_equal(batched[i].actions, e.actions)


def test_idle_envs_that_finish_are_reset():
    # one episode, four envs: three idle envs run zeros; CounterEnv starting at >= 3 succeeds at once
    eps = list(rollout(ConstantPolicy(0.0), vec(4), RolloutConfig(episodes=1, seed=3, progress=False)))
    assert len(eps) == 1 and eps[0].success and eps[0].length == 1


def test_short_chunks_are_repeated_for_chunk_envs_and_act_every():
    env = gym.vector.SyncVectorEnv([ChunkEnv], autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    one = ConstantPolicy(0.5, horizon=1)
    eps = list(rollout(one, env, RolloutConfig(episodes=1, seed=0, progress=False)))
    assert eps[0].length == 6 and len(one.calls) == 6  # three queries on one observation per chunk
    # the same protocol on a per-step env: query every 3 steps, three queries each time
    one = ConstantPolicy(0.5, horizon=1)
    eps = list(rollout(one, vec(1), RolloutConfig(episodes=1, seed=0, act_every=3, progress=False)))
    assert eps[0].length == 6 and len(one.calls) == 6
    long = ConstantPolicy(0.5, horizon=8)
    list(rollout(long, vec(1), RolloutConfig(episodes=1, seed=0, act_every=3, progress=False)))
    assert len(long.calls) == 2  # 8-action chunks cut to 3: re-planned after 3 actions


class ChunkFramesEnv(ChunkEnv):
    """A chunk env that, like a world model, reports every observation of the chunk in info["chunk"]."""

    def step(self, action):
        seen = []
        for a in np.asarray(action):
            obs, reward, terminated, truncated, info = CounterEnv.step(self, a)
            seen.append(obs)
        chunk = {"agent_pos": np.stack([o["agent_pos"] for o in seen]),
                 "environment_state": np.stack([o["environment_state"] for o in seen]),
                 "pixels": {"top": np.stack([o["pixels"]["top"] for o in seen])}}
        self.t = self.t - len(seen) + 1  # one step of the counter per chunk, as ChunkEnv counts
        obs["environment_state"] = np.array([self.t], np.float32)
        return obs, reward, terminated, truncated, {**info, "chunk": chunk}


@pytest.mark.parametrize("frames", [False, True])
def test_chunk_env_observations_between_actions_come_from_its_info(frames):
    """With info["chunk"], an episode holds the observation after every action (the walk's exact
    positions), not the chunk's first one repeated; without it (ChunkEnv), the repeated one."""
    cfg = RolloutConfig(episodes=1, seed=0, progress=False, record_frames=frames)
    make = lambda cls: gym.vector.SyncVectorEnv([cls], autoreset_mode=gym.vector.AutoresetMode.DISABLED)  # noqa: E731
    e = next(iter(rollout(ConstantPolicy(0.5, horizon=3), make(ChunkFramesEnv), cfg)))
    assert e.length == 6 and e.success
    np.testing.assert_array_equal(e.state[:, 0], 0.5 * np.arange(7))  # every action's own position
    if frames:
        np.testing.assert_array_equal(e.obs["top"][:, 0, 0, 0], (0.5 * np.arange(7) * 10).astype(np.uint8))
    old = next(iter(rollout(ConstantPolicy(0.5, horizon=3), make(ChunkEnv), cfg)))
    np.testing.assert_array_equal(old.state[:, 0], [0, 0, 0, 1.5, 1.5, 1.5, 3.0])
