"""`wmsuite bench envs`: rendered env steps/s (one env, and 2 worker processes) and collection throughput.

Prints one row per built-in task; with `--out DIR` writes DIR/metrics.json with the keys
`<task>_steps_per_s`, `<task>_vec<N>_steps_per_s` and `<task>_collect_episodes_per_min`
(`<task>` is the id's name in lower case without version: `pushcube`, `pickplace`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from wmsuite.envs import ENV_IDS
from wmsuite.envs.bench import bench_envs
from wmsuite.envs.experts import make_expert
from wmsuite.logging import write_metrics
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout


@dataclass
class BenchEnvsConfig:
    envs: tuple[str, ...] = ENV_IDS
    """Gymnasium ids to measure."""
    steps: int = 1000
    """Timed steps per measurement (after a short warm-up)."""
    image_size: int = 64
    """Camera image size in pixels."""
    num_envs: int = 2
    """Worker processes for the vectorised measurement and the collection run."""
    episodes: int = 10
    """Episodes recorded (expert at skill 1.0, frames kept) to measure collection throughput; 0 skips it."""
    out: str | None = None
    """Directory for metrics.json (nothing written when unset)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.num_envs < 1 or self.episodes < 0:
            raise ValueError(f"need steps >= 1, num_envs >= 1, episodes >= 0; got {self.steps}, "
                             f"{self.num_envs}, {self.episodes}")


CONFIG = BenchEnvsConfig


def task_key(env_id: str) -> str:
    """'wmsuite/PushCube-v0' -> 'pushcube'."""
    return env_id.split("/")[-1].rsplit("-v", 1)[0].replace("-", "_").lower()


def run(cfg: BenchEnvsConfig) -> int:
    raw = bench_envs(cfg.envs, steps=cfg.steps, image_size=cfg.image_size, num_envs=cfg.num_envs)
    metrics: dict[str, float] = {}
    print(f"{'task':<12} {'steps/s':>9} {f'vec{cfg.num_envs} steps/s':>14} {'episodes/min':>13}")
    for env_id in cfg.envs:
        name, key = env_id.split("/")[-1], task_key(env_id)
        metrics[f"{key}_steps_per_s"] = raw[f"{name}.single_steps_per_s"]
        metrics[f"{key}_vec{cfg.num_envs}_steps_per_s"] = raw[f"{name}.vector{cfg.num_envs}_steps_per_s"]
        if cfg.episodes:
            metrics[f"{key}_collect_episodes_per_min"] = _collect_rate(env_id, cfg)
        print(f"{key:<12} {metrics[f'{key}_steps_per_s']:>9.0f} {metrics[f'{key}_vec{cfg.num_envs}_steps_per_s']:>14.0f} "
              f"{metrics.get(f'{key}_collect_episodes_per_min', float('nan')):>13.1f}")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0


def _collect_rate(env_id: str, cfg: BenchEnvsConfig) -> float:
    """Episodes/minute through the rollout engine with the expert, frames recorded (as `collect` does)."""
    env = make_vector_env(env_id, cfg.num_envs, env_kwargs={"image_size": cfg.image_size})
    try:
        policy = make_expert(env_id, skill=1.0, seed=0)
        start = time.perf_counter()
        for _ in rollout(policy, env, RolloutConfig(episodes=cfg.episodes, progress=False)):
            pass
        return cfg.episodes / (time.perf_counter() - start) * 60
    finally:
        env.close()
