"""Small, fully known episodes and environments for testing the core without a simulator."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from wmsuite.types import Episode


def make_episode(t: int = 6, size: int = 8, seed: int = 0, cameras: tuple[str, ...] = ("top",),
                 success: bool = True) -> Episode:
    rng = np.random.default_rng(seed)
    return Episode(
        obs={c: rng.integers(0, 256, (t + 1, size, size, 3), dtype=np.uint8) for c in cameras},
        state=rng.normal(size=(t + 1, 2)).astype(np.float32),
        env_state=rng.normal(size=(t + 1, 4)).astype(np.float32),
        actions=rng.uniform(-1, 1, (t, 2)).astype(np.float32),
        rewards=rng.normal(size=t).astype(np.float32),
        success=success,
        terminated=success,
        truncated=not success,
        intervention=rng.random(t) < 0.3,
        sim_states=rng.normal(size=(t + 1, 5)),
        task="push the cube",
        meta={"env_id": "test", "seed": seed, "policy_id": "p", "episode_index": seed},
    )


class CounterEnv(gym.Env):
    """A 1-D walk whose position is the sum of actions: everything about an episode is known.

    Success when the position reaches `goal`; truncated after `horizon` steps. The seed sets the
    start position to `seed % 5`, so the engine's per-episode seeding can be checked exactly.
    """

    metadata = {"render_modes": []}

    def __init__(self, goal: float = 3.0, horizon: int = 10, image_size: int = 4) -> None:
        self.goal, self.horizon, self.size = goal, horizon, image_size
        self.observation_space = gym.spaces.Dict({
            "pixels": gym.spaces.Dict({"top": gym.spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)}),
            "agent_pos": gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
            "environment_state": gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
        })
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def _obs(self):
        img = np.full((self.size, self.size, 3), int(self.pos * 10) % 256, np.uint8)
        return {"pixels": {"top": img}, "agent_pos": np.array([self.pos], np.float32),
                "environment_state": np.array([self.t], np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.start = float((seed or 0) % 5)
        self.pos, self.t = self.start, 0
        return self._obs(), {"is_success": False, "task": "count"}

    def step(self, action):
        self.pos += float(np.asarray(action).reshape(-1)[0])
        self.t += 1
        success = self.pos >= self.goal
        return self._obs(), float(success), success, self.t >= self.horizon and not success, {"is_success": success}


class ConstantPolicy:
    """Always +value; predicts chunks of `horizon` actions."""

    def __init__(self, value: float = 1.0, horizon: int = 3) -> None:
        self.value, self.horizon, self.calls = value, horizon, []

    def reset(self) -> None:
        self.calls.clear()

    def predict_action_chunk(self, obs):
        b = len(obs["agent_pos"])
        self.calls.append(b)
        return np.full((b, self.horizon, 1), self.value, np.float32)
