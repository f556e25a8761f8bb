"""`wmsuite eval-policy`: success rate of a policy in a real simulator, with a Wilson 95% interval.

    wmsuite eval-policy --env wmsuite/PushCube-v0 --policy runs/flow-pushcube --episodes 50 --seed 0 --out OUT
    wmsuite eval-policy --env wmsuite/PushCube-v0 --policy expert --skill 0.5 --out OUT

Writes OUT/episodes.jsonl (one row per episode: index, seed, success, length, return),
OUT/videos/episode_XXXX.mp4 for the first --videos episodes (cameras side by side) and
OUT/metrics.json with keys:
    success_rate, ci_low, ci_high   successes / episodes and its Wilson 95% interval
    episodes, successes             counts
    mean_length                     mean number of env steps per episode
    wall_seconds                    time of the whole evaluation
and with --instruction TEXT, also:
    instruction                     TEXT
    other_task                      {episodes, successes, success_rate, ci_low, ci_high} over the episodes
                                    whose own task is not TEXT (where following TEXT cannot succeed
                                    by doing what was asked)
episodes.jsonl rows carry the env's own `task` where it has one (a language task's instruction).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmsuite.cli.common import check_policy_cameras, env_kwargs_for, resolve_policy, seed_everything
from wmsuite.logging import write_metrics
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout
from wmsuite.runs import dumps_strict
from wmsuite.stats import wilson_interval
from wmsuite.video import tile_frames, write_mp4


@dataclass
class EvalPolicyConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the environment."""
    policy: str = "expert"
    """What acts: 'expert' (the env's scripted expert at --skill), a checkpoint directory (or
    'assets:policies/...'), or 'package.module:attr' with optional JSON kwargs."""
    skill: float = 1.0
    """Skill of the scripted expert in [0, 1] (with --policy expert)."""
    episodes: int = 50
    """Number of episodes; episode i is reset with seed `seed + i`."""
    seed: int = 0
    """Seed of the first episode (and of the policy's sampling noise)."""
    out: str = "runs/eval"
    """Output directory (metrics.json, episodes.jsonl, videos/)."""
    num_envs: int = 2
    """Parallel environments (worker processes when > 1)."""
    image_size: int = 64
    """Camera image size in pixels (must match what a learned policy was trained on)."""
    cameras: tuple[str, ...] | None = None
    """Cameras the env renders: unset, its own; names; empty (`--cameras` alone) for a state-only env that
    renders nothing (a state policy needs no frames; robosuite steps far faster without). A policy that
    reads pixels needs its cameras here."""
    n_action_steps: int | None = None
    """Actions executed per predicted chunk (default: the policy's own setting)."""
    videos: int = 4
    """Write mp4 videos of this many first episodes."""
    fps: int = 10
    """Frame rate of the videos."""
    device: str = "cpu"
    """Torch device for learned policies."""
    trust_code: bool = False
    """Let specs nested in --policy (a wrapper's `inner`) name `module:attr` code (wmsuite/specs.py)."""
    threads: int = 2
    """torch.set_num_threads on CPU."""
    instruction: str = ""
    """Tell the policy this task instruction (obs["task"]) instead of the env's own; the env still
    judges its own task. What a language-conditioned policy does when told another task in the same
    scenes (PushColors); a policy that reads no language is unchanged."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if not 0.0 <= self.skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {self.skill}")
        if self.videos < 0:
            raise ValueError(f"videos must be >= 0, got {self.videos}")
        if self.n_action_steps is not None and self.n_action_steps < 1:
            raise ValueError(f"n_action_steps must be >= 1 or None, got {self.n_action_steps}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.videos and self.cameras == ():
            raise ValueError("--videos needs a camera and --cameras is empty (state only); pass --videos 0 or name a camera")


CONFIG = EvalPolicyConfig


def run(cfg: EvalPolicyConfig) -> int:
    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    policy = resolve_policy(cfg.policy, env_id=cfg.env, skill=cfg.skill, seed=cfg.seed, device=cfg.device,
                            trust_code=cfg.trust_code)
    check_policy_cameras(policy, cfg.cameras)
    policy_id = cfg.policy if cfg.policy != "expert" else f"expert@{cfg.skill:g}"
    if cfg.instruction:
        from wmsuite.policies.wrappers import Instructed

        policy = Instructed(policy, cfg.instruction)
    metrics = evaluate(policy, cfg.env, cfg.episodes, cfg.seed, Path(cfg.out), num_envs=cfg.num_envs,
                       image_size=cfg.image_size, cameras=cfg.cameras, n_action_steps=cfg.n_action_steps, videos=cfg.videos,
                       fps=cfg.fps, policy_id=policy_id, instruction=cfg.instruction)
    print(f"{policy_id} on {cfg.env}: success {metrics['successes']}/{metrics['episodes']} = "
          f"{metrics['success_rate']:.3f} (95% CI {metrics['ci_low']:.3f}-{metrics['ci_high']:.3f}), "
          f"mean length {metrics['mean_length']:.1f}, {metrics['wall_seconds']:.1f}s; wrote {cfg.out}/metrics.json")
    o = metrics.get("other_task")
    if o and o["episodes"]:
        print(f"told {cfg.instruction!r}: on the {o['episodes']} episodes whose own task differs, success "
              f"{o['successes']}/{o['episodes']} (95% CI {o['ci_low']:.3f}-{o['ci_high']:.3f})")
    return 0


def _other_task(rows: list[dict[str, Any]], instruction: str) -> dict[str, Any]:
    """Success over the episodes (episodes.jsonl rows) whose own task is not `instruction`."""
    other = [r for r in rows if r.get("task", "") != instruction]
    wins = sum(r["success"] for r in other)
    if not other:  # every episode's own task was the one told: nothing to report
        return {"episodes": 0, "successes": 0, "success_rate": None, "ci_low": None, "ci_high": None}
    low, high = wilson_interval(wins, len(other))
    return {"episodes": len(other), "successes": wins, "success_rate": wins / len(other), "ci_low": low, "ci_high": high}


def evaluate(policy: Any, env_id: str, episodes: int, seed: int, out: Path | None, num_envs: int = 2,
             image_size: int = 64, n_action_steps: int | None = None, videos: int = 0, fps: int = 10,
             policy_id: str = "", progress: bool = True, cameras: tuple[str, ...] | None = None,
             instruction: str = "") -> dict[str, Any]:
    """Run `episodes` episodes (seeds seed .. seed+episodes-1) and return the metrics; with `out`,
    also write episodes.jsonl, videos and metrics.json there. `cameras`: what the env renders (None:
    its own; () none). `instruction`: what the policy was told instead of the env's own task (it is
    wrapped already); adds `instruction` and `other_task` to the metrics."""
    start = time.perf_counter()
    env = make_vector_env(env_id, num_envs, env_kwargs=env_kwargs_for(image_size, cameras))
    rcfg = RolloutConfig(episodes=episodes, seed=seed, n_action_steps=n_action_steps, record_frames=videos > 0,
                         progress=progress, policy_id=policy_id, env_id=env_id)
    rows = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        jsonl = open(out / "episodes.jsonl", "w", buffering=1)  # noqa: SIM115
    try:
        for ep in rollout(policy, env, rcfg):
            idx = int(ep.meta["episode_index"])
            row = {"episode_index": idx, "seed": int(ep.meta["seed"]), "success": bool(ep.success),
                   "length": ep.length, "return": float(ep.rewards.sum())}
            if ep.task:
                row["task"] = ep.task
            rows.append(row)
            if out is not None:
                jsonl.write(dumps_strict(row, indent=None) + "\n")
                if idx < videos and ep.obs:
                    frames = tile_frames([ep.obs[c] for c in sorted(ep.obs)])  # (T+1, H, W', 3)
                    write_mp4(out / "videos" / f"episode_{idx:04d}.mp4", frames, fps=fps)
    finally:
        env.close()
        if out is not None:
            jsonl.close()
    successes = sum(r["success"] for r in rows)
    low, high = wilson_interval(successes, len(rows))
    metrics = {"success_rate": successes / len(rows), "ci_low": low, "ci_high": high, "episodes": len(rows),
               "successes": successes, "mean_length": float(np.mean([r["length"] for r in rows])),
               "wall_seconds": time.perf_counter() - start}
    if instruction:
        metrics.update(instruction=instruction, other_task=_other_task(rows, instruction))
    if out is not None:
        write_metrics(out, metrics)
    return metrics

