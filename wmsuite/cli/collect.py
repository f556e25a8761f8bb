"""`wmsuite collect`: record episodes of a policy in an environment to robomimic-format HDF5.

    wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill 0.9 --episodes 200 --out data/pushcube.hdf5

Episodes are streamed to `<out>.parts/` as they finish; rerunning the same command after an
interruption records only the missing episodes, then merges everything into `--out`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from wmsuite.cli.common import resolve_policy, seed_everything
from wmsuite.data import count_episodes
from wmsuite.data.stream import EpisodeStream
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout


@dataclass
class CollectConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the environment."""
    policy: str = "expert"
    """What acts: 'expert' (the env's scripted expert at --skill), a checkpoint directory written by
    `wmsuite train-policy`, or 'package.module:attr' with optional JSON kwargs."""
    skill: float = 0.9
    """Skill of the scripted expert in [0, 1] (with --policy expert)."""
    episodes: int = 200
    """How many episodes to record."""
    out: str = "data/pushcube.hdf5"
    """Output HDF5 file (robomimic format)."""
    num_envs: int = 2
    """Parallel environments (separate worker processes when > 1)."""
    seed: int = 0
    """Episode i uses seed `seed + i` (after the episodes already in --out when appending)."""
    image_size: int = 64
    """Camera image size in pixels."""
    append: bool = False
    """Add episodes to an existing --out instead of refusing to touch it."""
    device: str = "cpu"
    """Torch device for learned policies."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if not 0.0 <= self.skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {self.skill}")
        if self.image_size < 8:
            raise ValueError(f"image_size must be >= 8, got {self.image_size}")


CONFIG = CollectConfig


def run(cfg: CollectConfig) -> int:
    out = Path(cfg.out)
    parts = out.with_name(out.name + ".parts")
    existing = count_episodes(out) if out.exists() else 0
    if existing and not cfg.append and not parts.exists():
        raise SystemExit(f"{out} already holds {existing} episodes; pass --append to add more or choose another --out")
    seed_everything(cfg.seed)
    policy = resolve_policy(cfg.policy, env_id=cfg.env, skill=cfg.skill, seed=cfg.seed, device=cfg.device)
    env = make_vector_env(cfg.env, cfg.num_envs, env_kwargs={"image_size": cfg.image_size})
    policy_id = cfg.policy if cfg.policy != "expert" else f"expert@{cfg.skill:g}"
    env_args = {"env_name": cfg.env, "type": "wmsuite", "env_kwargs": {"image_size": cfg.image_size}}
    rcfg = RolloutConfig(episodes=cfg.episodes, seed=cfg.seed + existing, policy_id=policy_id, env_id=cfg.env)
    start, successes, steps = time.perf_counter(), 0, 0
    try:
        with EpisodeStream(out, env_args) as stream:
            done = stream.done_indices()
            for ep in rollout(policy, env, rcfg, skip=done):
                stream.add(ep)
                successes += ep.success
                steps += ep.length
    finally:
        env.close()
    wall = time.perf_counter() - start
    new = cfg.episodes - len(done)
    print(f"recorded {new} episodes ({steps} steps) in {wall:.1f}s: success {successes}/{max(new, 1)}, "
          f"{new / wall * 60:.1f} episodes/min; {out} now holds {count_episodes(out)} episodes")
    return 0
