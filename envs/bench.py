"""Rendered env steps/s: one env in this process, and a Gymnasium AsyncVectorEnv of worker processes.

    from wmsuite.envs.bench import bench_envs
    bench_envs(["wmsuite/PushCube-v0"], steps=1000)   # {"PushCube-v0.single_steps_per_s": ..., ...}
    python -m wmsuite.envs.bench                      # every built-in id, prints the dict as JSON

Actions are uniform random from the seeded action space; episodes that end are reset inside the timed
loop (a vector env resets them itself), as they would be while collecting data. Each env is created
in its worker by `gymnasium.make`, after importing wmsuite.envs there (workers are spawned, not
forked: a forked EGL context is not safe). Workers default OMP_NUM_THREADS and LP_NUM_THREADS (Mesa's
software rasteriser) to 1, so N workers use N cores. For a one-core single-env figure run with
`LP_NUM_THREADS=1 taskset -c 0`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from wmsuite.envs import ENV_IDS, make_env


def bench_envs(
    env_ids: Sequence[str] = ENV_IDS,
    steps: int = 500,
    image_size: int = 64,
    num_envs: int = 2,
    seed: int = 0,
    warmup: int = 20,
) -> dict[str, float]:
    """Measure env steps per second for each id; returns flat keys per task name (the id without "wmsuite/"):

        <name>.single_steps_per_s          one env stepped `steps` times in this process (wall clock)
        <name>.single_cpu_steps_per_s      the same per second of this process's CPU time: what an idle
                                           core would give, when the machine is shared
        <name>.vector<N>_steps_per_s       N worker processes stepped together `steps` times (N * steps env steps)
        <name>.vector<N>_speedup           vector over single

    `num_envs=0` skips the vector measurement.
    """
    if steps < 1 or warmup < 0 or num_envs < 0:
        raise ValueError(f"need steps >= 1, warmup >= 0, num_envs >= 0; got {steps}, {warmup}, {num_envs}")
    results: dict[str, float] = {}
    for env_id in env_ids:
        name = env_id.split("/")[-1]
        env = make_env(env_id, image_size=image_size)
        try:
            wall, cpu = _time_single(env, steps, warmup, seed)
        finally:
            env.close()
        single = steps / wall
        results[f"{name}.single_steps_per_s"] = single
        results[f"{name}.single_cpu_steps_per_s"] = steps / cpu
        if num_envs:
            make_one = partial(_make_in_worker, env_id, {"image_size": image_size})
            venv = gym.vector.AsyncVectorEnv([make_one] * num_envs, context="spawn")
            try:
                vector = num_envs * steps / _time_vector(venv, steps, warmup, seed)
            finally:
                venv.close()
            results[f"{name}.vector{num_envs}_steps_per_s"] = vector
            results[f"{name}.vector{num_envs}_speedup"] = vector / single
    return results


def _time_single(env: gym.Env, steps: int, warmup: int, seed: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) for `steps` steps after `warmup` untimed ones."""
    env.action_space.seed(seed)
    env.reset(seed=seed)
    start = cpu_start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            start, cpu_start = time.perf_counter(), time.process_time()
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start, time.process_time() - cpu_start


def _time_vector(venv: gym.vector.VectorEnv, steps: int, warmup: int, seed: int) -> float:
    venv.action_space.seed(seed)
    venv.reset(seed=seed)
    start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        venv.step(venv.action_space.sample())  # ended episodes reset on the next step (autoreset)
    return time.perf_counter() - start


def _make_in_worker(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """Runs in a spawned worker: one thread, register the ids, then `gymnasium.make`."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("LP_NUM_THREADS", "1")  # Mesa's llvmpipe rasteriser: one thread per worker
    import wmsuite.envs  # noqa: F401  (registers the ids in this process)

    return gym.make(env_id, **kwargs)


if __name__ == "__main__":
    figures = bench_envs()
    print(json.dumps({k: float(np.round(v, 2)) for k, v in figures.items()}, indent=2))
