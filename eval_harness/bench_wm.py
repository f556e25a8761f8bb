"""World-model rollout throughput next to the real MuJoCo env, measured in the same run.

`bench_world_model` steps a `WorldModelEnv` (contexts from the real env's resets) with random action
chunks at several batch sizes; `bench_real_env` steps the real env with rendering on. Medians over
`repeats` timed runs after a warm-up. `bench_round_trip` times the round-trip trust signal
(world_models/trust.py) against the forward rollout it checks, same depth, same batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from wmsuite.world_models import LatentWorldModel
from wmsuite.world_models.codec import stack_cameras
from wmsuite.world_models.contexts import GymResetContext
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.model import FORWARD
from wmsuite.world_models.rollout import WorldModelState, rollout
from wmsuite.world_models.trust import check_backward_model, round_trip_chunks, round_trip_error


def bench_world_model(model: LatentWorldModel, make_env: Callable[[], gym.Env], batch_sizes: Sequence[int],
                      steps: int = 4, repeats: int = 3, seed: int = 0) -> dict[int, dict[str, float]]:
    """{batch: {"frames_per_s", "action_steps_per_s", "step_ms", "first_step_s"}} for WorldModelEnv.step
    (first_step_s: the untimed warm-up step, which holds any compilation).

    frames_per_s counts the 64 px observation frames returned (one per sub-env and step); each step
    also generates H-1 intermediate latent frames, counted in action_steps_per_s (= H x frames_per_s).
    """
    source = GymResetContext(make_env)
    out = {}
    rng = np.random.default_rng(seed)
    for b in batch_sizes:
        env = WorldModelEnv(model, source, num_envs=b, horizon=10**6, seed=seed)
        env.reset(seed=seed)
        start = time.perf_counter()
        env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))  # warm-up
        first = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            acts = [rng.uniform(-1, 1, env.action_space.shape).astype(np.float32) for _ in range(steps)]
            start = time.perf_counter()
            for a in acts:
                env.step(a)
            times.append((time.perf_counter() - start) / steps)
        step_s = float(np.median(times))
        out[b] = {"frames_per_s": b / step_s, "action_steps_per_s": b * model.cfg.chunk / step_s,
                  "step_ms": 1000 * step_s, "first_step_s": first}
    source.close()
    return out


def bench_round_trip(model: LatentWorldModel, make_env: Callable[[], gym.Env], batch_sizes: Sequence[int],
                     depth: int = 8, repeats: int = 3, seed: int = 0,
                     backward: LatentWorldModel | None = None) -> dict[int, dict[str, float]]:
    """{batch: {"forward_ms", "round_trip_ms", "cost_ratio", "chunks"}}: median time of a forward
    rollout of `depth` chunks from real first frames, of the round trip back from its end (through
    `backward`, else `model` itself), and their ratio (what --round-trip adds to an imagined episode
    of that depth); `chunks` is the number of chunks the round trip generates (round_trip_chunks)."""
    check_backward_model(model, backward)
    h, dev = model.cfg.chunk, model.state_mean.device
    source = GymResetContext(make_env)
    rng = np.random.default_rng(seed)
    out = {}
    for b in batch_sizes:
        frames = np.stack([stack_cameras(source(seed + i)["pixels"], model.cfg.camera) for i in range(b)])[:, None]  # (B, 1, S, S, 3)
        actions = torch.as_tensor(rng.uniform(-1, 1, (b, depth * h, model.cfg.action_dim)), dtype=torch.float32,
                                  device=dev)
        fwd, back = [], []
        for r in range(repeats + 1):  # the first is a warm-up
            gen = torch.Generator(device=dev).manual_seed(seed + r)
            state = WorldModelState.from_frames(model, frames, device=dev)
            start = state.newest.clone()
            t0 = time.perf_counter()
            _, state = rollout(model, state, actions, FORWARD, generator=gen)
            t1 = time.perf_counter()
            round_trip_error(model, start, state.context, actions, generator=gen, backward=backward)
            t2 = time.perf_counter()
            if r:
                fwd.append(t1 - t0)
                back.append(t2 - t1)
        f, rt = float(np.median(fwd)), float(np.median(back))
        out[b] = {"forward_ms": 1000 * f, "round_trip_ms": 1000 * rt, "cost_ratio": rt / f,
                  "chunks": round_trip_chunks(depth * h, model.cfg.context, h)}
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
