"""`wmsuite collect`: record episodes of a policy in an environment to robomimic-format HDF5.

    wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill 0.9 --episodes 200 --out data/pushcube.hdf5
    wmsuite collect --policy runs/bc/latest --intervene expert@1 --episodes 100 --out data/bc_rounds.hdf5
    wmsuite collect --env wmsuite/robosuite-Lift-v0 --policy expert --after-success 16 --out data/lift.hdf5

Episodes are streamed to `<out>.parts/` as they finish; rerunning the same command after an
interruption records only the missing episodes, then merges everything into `--out`. Each episode's
randomness (its env seed and the policy's draws) comes from (seed, episode index) alone, so the
resumed file holds exactly the episodes an uninterrupted run writes. `<out>.parts/run.json` records
what the collection is (env, policy and its checkpoint's content hash, skill, seed, counts); a
rerun with other settings is refused rather than mixed in (--force-new moves the old shards aside).

On-policy collection with interventions (`--intervene SPEC`): an expert watches the policy, takes
over where the two disagree by more than `--intervene-threshold` and hands back after
`--intervene-steps` actions (wmsuite/rollout/intervene.py); each episode's `intervention` mask marks
the expert's actions, and its success label is the episode's own.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from wmsuite.cli.common import (
    SimBackendFlags,
    check_env_id,
    check_policy_cameras,
    env_kwargs_for,
    resolve_policy,
    seed_everything,
)
from wmsuite.data import count_episodes
from wmsuite.data.stream import EpisodeStream, held_runs
from wmsuite.rollout import Intervention, RolloutConfig, make_vector_env, rollout
from wmsuite.runs import ensure_writable, holds_run, open_run
from wmsuite.specs import check_trust, spec_fingerprint, trust_code


@dataclass
class CollectConfig(SimBackendFlags):
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
    cameras: tuple[str, ...] | None = None
    """Cameras the env renders and the episodes store: unset, the env's own; empty (`--cameras` alone)
    for state-only episodes, all a state policy trains on, far faster to record in robosuite."""
    append: bool = False
    """Add episodes to an existing --out instead of refusing to touch it (rerunning a finished
    --append command adds nothing: it finds its episodes; pass another --seed to add more)."""
    device: str = "cpu"
    """Torch device for learned policies."""
    force_new: bool = False
    """Start over when <out>.parts/ holds shards of an unfinished collection with other settings
    (they are moved aside, not deleted) instead of refusing."""
    trust_code: bool = False
    """Let specs nested in --policy (a wrapper's `inner`) name `module:attr` code (wmsuite/specs.py)."""
    intervene: str = ""
    """An expert that takes over where the policy drifts, in --policy's forms ('expert@1': the env's
    scripted expert at skill 1); empty: no interventions."""
    intervene_threshold: float = 0.5
    """Mean absolute difference between the policy's and the expert's chunk (actions in [-1, 1]) above
    which the expert takes over."""
    intervene_steps: int = 8
    """Actions the expert keeps control for once it takes over (rounded up to whole chunks)."""
    after_success: int = 0
    """Record this many steps past each episode's first success instead of ending there (the env is made
    with terminate_on_success=False): a world model then sees what a done task looks like, where the
    success frame alone shows little (robosuite Lift: a cube just leaving the table). Each such episode
    stores where success began (meta "success_step"), which the world model's success labels use."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if not 0.0 <= self.skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {self.skill}")
        if self.image_size < 8:
            raise ValueError(f"image_size must be >= 8, got {self.image_size}")
        self.sim_backend()  # validates the backend flags
        if self.after_success < 0:
            raise ValueError(f"after_success must be >= 0, got {self.after_success}")
        if not self.intervene_threshold >= 0 or self.intervene_steps < 1:
            raise ValueError(f"need intervene_threshold >= 0 and intervene_steps >= 1, got "
                             f"{self.intervene_threshold}, {self.intervene_steps}")


CONFIG = CollectConfig


def run(cfg: CollectConfig) -> int:
    out = Path(cfg.out)
    parts = out.with_name(out.name + ".parts")
    check_env_id(cfg.env)
    ensure_writable(out.parent, "--out's folder")
    if parts.is_dir() and not (parts / "run.json").exists() and not any(parts.glob("episode_*.hdf5")):
        shutil.rmtree(parts)  # what a kill at the very end of a merge leaves: an emptied folder
    existing = count_episodes(out) if out.exists() else 0
    expert = cfg.policy == "expert"
    policy_id = f"expert@{cfg.skill:g}" if expert else cfg.policy
    with trust_code(cfg.trust_code):
        check_trust(cfg.policy, trusted=True)
    identity = {"env": cfg.env, "policy": policy_id, "policy_files": {} if expert else spec_fingerprint(cfg.policy),
                "seed": cfg.seed, "episodes": cfg.episodes, "image_size": cfg.image_size, "append": cfg.append}
    if cfg.after_success:  # only then, so collections recorded before the flag keep their ids
        identity["after_success"] = cfg.after_success
    if cfg.cameras is not None:  # likewise
        identity["cameras"] = list(cfg.cameras)
    if cfg.intervene:
        check_trust(cfg.intervene, trusted=True)
        identity["intervene"] = {"expert": cfg.intervene, "files": spec_fingerprint(cfg.intervene),
                                 "threshold": cfg.intervene_threshold, "steps": cfg.intervene_steps}
    # a finished collection rerun (a kill as it exited, or a script of several --append commands run
    # again, perhaps with a later collection's shards waiting in <out>.parts/): its id names the
    # episodes --out held when it began, so look for it at every such count
    if existing and not holds_run(parts, identity):  # <out>.parts/ of another collection, or none
        held = held_runs(out)
        starts = range(existing - cfg.episodes + 1) if cfg.append else [0]
        if any(held.get(_run_id(identity, s)) == set(range(cfg.episodes)) for s in starts):
            print(f"{out} already holds the {cfg.episodes} episodes of this collection; nothing to do")
            return 0
    if existing and not cfg.append and not parts.exists():
        raise FileExistsError(f"{out} already holds {existing} episodes; pass --append to add more or choose "
                              "another --out")
    record = open_run(parts, "collect", identity, force_new=cfg.force_new, state={"start": existing})
    start = int(record["state"]["start"])  # episodes --out held when this collection began
    run_id = _run_id(identity, start)
    seed_everything(cfg.seed)
    policy = resolve_policy(cfg.policy, env_id=cfg.env, skill=cfg.skill, seed=cfg.seed, device=cfg.device,
                            trust_code=cfg.trust_code)
    check_policy_cameras(policy, cfg.cameras)
    guard = None
    if cfg.intervene:  # the expert plans chunks as long as the policy's
        expert = resolve_policy(cfg.intervene, env_id=cfg.env, seed=cfg.seed, device=cfg.device,
                                horizon=int(getattr(policy, "n_action_steps", 1) or 1), trust_code=cfg.trust_code)
        guard = Intervention(expert, cfg.intervene_threshold, cfg.intervene_steps)
    env_kwargs = env_kwargs_for(cfg.image_size, cfg.cameras)
    env_args = {"env_name": cfg.env, "type": "wmsuite", "env_kwargs": env_kwargs}
    rcfg = RolloutConfig(episodes=cfg.episodes, seed=cfg.seed + start, policy_id=policy_id, env_id=cfg.env,
                         episode_rng=True)
    stream = EpisodeStream(out, env_args, run_id=run_id)
    done = stream.done_indices() | stream.merged_indices()
    began, successes, steps, intervened = time.perf_counter(), 0, 0, 0
    if len(done) < cfg.episodes:
        env = make_vector_env(cfg.env, cfg.num_envs, env_kwargs=env_kwargs,
                              backend=cfg.sim_backend(), after_success=cfg.after_success)
        try:
            for ep in rollout(policy, env, rcfg, skip=done, intervene=guard):
                stream.add(ep)
                successes += ep.success
                steps += ep.length
                intervened += int(ep.intervention.sum())
        finally:
            env.close()
    merged = stream.merge()
    wall = time.perf_counter() - began
    new = cfg.episodes - len(done)
    print(f"recorded {new} episodes ({steps} steps) in {wall:.1f}s: success {successes}/{max(new, 1)}, "
          f"{new / max(wall, 1e-9) * 60:.1f} episodes/min; merged {merged}; {out} now holds "
          f"{count_episodes(out)} episodes" + (f"; the expert took {intervened} of the {steps} actions" if guard else ""))
    return 0


def _run_id(identity: dict, start: int) -> str:
    """The collection's id, stored in each of its episodes' meta: the same command gives the same id."""
    return hashlib.sha256(json.dumps([identity, start], sort_keys=True).encode()).hexdigest()[:16]
