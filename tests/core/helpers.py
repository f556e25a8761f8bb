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


def check_expert_zoo(zoo: str, env_id: str, rerun: str, episodes: int | None = None) -> None:
    """A zoo manifest written by experiments/scripts/expert_zoo.py: its env, at least 10 policies from ~0
    to ~1 real success, two splits that `wmsuite eval` reads with their seeds, and policy `rerun` run
    again from its split's seed (chunks of 4) to exactly its recorded rate. `episodes`: rerun only the
    first ones (for slow simulators), which must then all succeed or all fail, as a rerun policy
    recorded at rate 1 or 0 does."""
    import json

    from wmsuite.cli.common import resolve_policy
    from wmsuite.cli.eval import EvalConfig
    from wmsuite.cli.eval_policy import evaluate
    from wmsuite.cli.eval_setup import policy_entries
    from wmsuite.specs import resolve_asset

    manifest = json.loads(resolve_asset(zoo).read_text())
    rates = {p["name"]: p["real_success"] for p in manifest["policies"]}
    assert manifest["env_id"] == env_id
    assert len(rates) >= 10 and min(rates.values()) <= 0.05 and max(rates.values()) >= 0.95
    for split in ("validation", "test"):
        entries, _, seed = policy_entries(EvalConfig(env=env_id, zoo=zoo, split=split))
        assert len(entries) >= 2 and seed == manifest["splits"][split]["seed"]
    entry = next(p for p in manifest["policies"] if p["name"] == rerun)
    policy = resolve_policy(entry["spec"], env_id=env_id, seed=0, horizon=4)
    if episodes is not None:
        assert entry["real_success"] in (0.0, 1.0), "a partial rerun needs a policy recorded at rate 0 or 1"
    again = evaluate(policy, env_id, episodes or manifest["episodes"], manifest["splits"][entry["split"]]["seed"],
                     out=None, n_action_steps=4, progress=False)
    assert again["success_rate"] == entry["real_success"]  # the same seeds give the same episodes
