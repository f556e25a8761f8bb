"""World-model rollout throughput next to the real MuJoCo env, measured in the same run.

`bench_world_model` steps a `WorldModelEnv` (contexts from the real env's resets) with random action
chunks at several batch sizes; `bench_real_env` steps the real env with rendering on. Medians over
`repeats` timed runs after a warm-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from wmsuite.world_models import LatentWorldModel
from wmsuite.world_models.env import GymResetContext, WorldModelEnv


def bench_world_model(model: LatentWorldModel, make_env: Callable[[], gym.Env], batch_sizes: Sequence[int],
                      steps: int = 4, repeats: int = 3, seed: int = 0) -> dict[int, dict[str, float]]:
    """{batch: {"frames_per_s", "action_steps_per_s", "step_ms"}} for WorldModelEnv.step.

    frames_per_s counts the 64 px observation frames returned (one per sub-env and step); each step
    also generates H-1 intermediate latent frames, counted in action_steps_per_s (= H x frames_per_s).
    """
    source = GymResetContext(make_env)
    out = {}
    rng = np.random.default_rng(seed)
    for b in batch_sizes:
        env = WorldModelEnv(model, source, num_envs=b, horizon=10**6, seed=seed)
        env.reset(seed=seed)
        env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))  # warm-up
        times = []
        for _ in range(repeats):
            acts = [rng.uniform(-1, 1, env.action_space.shape).astype(np.float32) for _ in range(steps)]
            start = time.perf_counter()
            for a in acts:
                env.step(a)
            times.append((time.perf_counter() - start) / steps)
        step_s = float(np.median(times))
        out[b] = {"frames_per_s": b / step_s, "action_steps_per_s": b * model.cfg.chunk / step_s,
                  "step_ms": 1000 * step_s}
    source.close()
    return out


def bench_real_env(make_env: Callable[[], gym.Env], steps: int = 200, repeats: int = 3, seed: int = 0) -> float:
    """Median rendered steps/s of one real env (random actions, resetting when an episode ends)."""
    env = make_env()
    env.reset(seed=seed)
    env.action_space.seed(seed)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        rates.append(steps / (time.perf_counter() - start))
    env.close()
    return float(np.median(rates))


def torch_threads() -> int:
    return torch.get_num_threads()
