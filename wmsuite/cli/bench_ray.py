"""`wmsuite bench ray`: rollout throughput with the simulator in Ray actors against the local engine.

The same policy, env, seeds and sub-environment count run on the local engine (every sub-env in
this process, as `wmsuite eval`'s real side runs them) and on Ray with each `--workers` count, the
modes interleaved within every repeat (median over repeats; actor start-up is outside the timing,
one mode's actors alive at a time).
Policy inference stays in this process in every mode, as it does in `collect` and `eval`.

Figures (printed; `--out DIR` writes DIR/metrics.json):
  local_episodes_per_s, ray<W>_episodes_per_s   median episodes per second of each mode
  ray<W>_over_local                              its ratio to the local engine (> 1: Ray is faster)
  ray<Wmax>_over_ray<Wmin>                       scaling from the fewest to the most workers
  ray<Wmin>_overhead_ms_per_episode              extra wall time per episode of the Ray path at the
                                                 fewest workers against the local engine
  records_identical                              1 when every mode recorded the same episodes
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from wmsuite.cli.common import check_env_id, resolve_policy, seed_everything
from wmsuite.logging import write_metrics
from wmsuite.rollout import Backend, RolloutConfig, make_vector_env, rollout


@dataclass
class BenchRayConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the simulator."""
    policy: str = "expert"
    """What acts, in `collect`'s forms ('expert', a checkpoint directory, 'package.module:attr')."""
    skill: float = 0.5
    """Skill of the scripted expert (with --policy expert)."""
    episodes: int = 16
    """Episodes per timed run."""
    num_envs: int = 4
    """Sub-environments in every mode."""
    workers: tuple[int, ...] = (1, 2)
    """Ray actor counts to measure."""
    repeats: int = 3
    """Timed runs per mode (interleaved; the median is reported)."""
    image_size: int = 64
    """Camera image size in pixels."""
    address: str | None = None
    """A running Ray cluster to join ('auto' or 'HOST:6379'); unset starts a local one."""
    out: str | None = None
    """Directory for metrics.json (nothing written when unset)."""

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.num_envs < 1 or self.repeats < 1 or not self.workers or min(self.workers) < 1:
            raise ValueError(f"need episodes, num_envs, repeats and every worker count >= 1; got {self.episodes}, "
                             f"{self.num_envs}, {self.repeats}, {self.workers}")


CONFIG = BenchRayConfig


def run(cfg: BenchRayConfig) -> int:
    check_env_id(cfg.env)
    # the policy's modules (torch, diffusers and the triton they import) load before any renderer:
    # triton loaded after Mesa's EGL crashes the process
    resolve_policy(cfg.policy, env_id=cfg.env, skill=cfg.skill, seed=0)
    modes = ["local", *(f"ray{w}" for w in sorted(set(cfg.workers)))]
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    actions: dict[str, list[np.ndarray]] = {}
    for r in range(cfg.repeats + 1):  # run 0 warms every mode up and is not timed
        for m in modes:  # one mode's actors at a time: each takes a CPU of the cluster
            env = make_vector_env(cfg.env, cfg.num_envs, asynchronous=False, env_kwargs={"image_size": cfg.image_size},
                                  backend=None if m == "local" else Backend("ray", int(m[3:]), cfg.address))
            try:
                env.reset(seed=0)  # the actors are up and their envs built before the clock starts
                seed_everything(0)  # a learned policy's noise: every mode draws the same
                policy = resolve_policy(cfg.policy, env_id=cfg.env, skill=cfg.skill, seed=0)
                start = time.perf_counter()
                eps = list(rollout(policy, env, RolloutConfig(episodes=cfg.episodes, seed=0, progress=False,
                                                              record_frames=False)))
                if r:
                    seconds[m].append(time.perf_counter() - start)
            finally:
                env.close()
            actions[m] = [e.actions for e in sorted(eps, key=lambda e: e.meta["episode_index"])]
        if r:
            print(f"repeat {r}/{cfg.repeats}: " + ", ".join(f"{m} {seconds[m][-1]:.2f}s" for m in modes))
    rate = {m: cfg.episodes / statistics.median(s) for m, s in seconds.items()}
    metrics: dict[str, float] = {f"{m}_episodes_per_s": v for m, v in rate.items()}
    rays = modes[1:]
    for m in rays:
        metrics[f"{m}_over_local"] = rate[m] / rate["local"]
    if len(rays) > 1:
        metrics[f"{rays[-1]}_over_{rays[0]}"] = rate[rays[-1]] / rate[rays[0]]
    metrics[f"{rays[0]}_overhead_ms_per_episode"] = 1000 * (1 / rate[rays[0]] - 1 / rate["local"])
    same = all(len(actions[m]) == len(actions["local"]) and all(np.array_equal(a, b) for a, b in
                                                                 zip(actions[m], actions["local"], strict=True))
               for m in rays)
    metrics["records_identical"] = float(same)
    for key, value in metrics.items():
        print(f"{key:<34} {value:10.3f}")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0
