"""`wmsuite zoo`: build a task's policy zoo, policies whose real success spans ~0-100%, for
validating learned simulators (the evaluation issue reads the manifest).

    wmsuite zoo --env wmsuite/PushCube-v0 --task pushcube --data data/pushcube_expert.hdf5

Steps:
1. Train (or resume) a policy per kind in --kinds and data size in --data-sizes on --data, into
   <runs-dir>/<kind>-<task>-n<size>/ (skipped when that run already reached --train-steps).
2. Ship checkpoint steps --ship-steps of every run (and any --checkpoints) as fp16 copies to <assets>/policies/<run>-s<step>
   (a few hundred kB each), named by `assets:policies/...` specs that work from any checkout.
3. Add the scripted experts at --skills and a deliberately biased policy: the last shipped policy
   of the first run with --bias added to action dimension 0 (an ActionOffset wrapper spec).
4. Evaluate every policy over --episodes fixed seeds (--seed ...) in the real simulator and write
   <assets>/zoo/<task>.json:
       {"task", "env_id", "seed", "episodes", "policies": [{"name", "spec", "real_success",
        "episodes", "ci_low", "ci_high", "mean_length", "kind"}]}
   where each spec is exactly what `--policy` accepts.
<runs-dir>/run.json records the settings and the data's content hash: a rerun with the same ones
resumes (finished training runs are kept), a different one is refused (--force-new moves it aside).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from wmsuite.cli.common import resolve_policy, seed_everything
from wmsuite.cli.eval_policy import evaluate
from wmsuite.config import to_dict
from wmsuite.policies.config import POLICY_TRAINER, PolicyConfig
from wmsuite.runs import ensure_writable, open_run, write_json
from wmsuite.specs import file_digest
from wmsuite.stats import wilson_interval


@dataclass
class ZooConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the task."""
    task: str = "pushcube"
    """Short task name: the manifest is <assets>/zoo/<task>.json."""
    data: str | None = "data/pushcube_expert.hdf5"
    """Expert episodes to train on (None: train nothing, ship only --checkpoints)."""
    checkpoints: list[str] = field(default_factory=list)
    """Further existing checkpoint directories (runs/<run>/step_N) to ship and include."""
    kinds: list[str] = field(default_factory=lambda: ["flow", "diffusion"])
    """Policy kinds to train."""
    data_sizes: list[int] = field(default_factory=lambda: [200])
    """Numbers of training episodes (one run per kind and size)."""
    train_steps: int = 3000
    """Optimizer steps of each run."""
    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(cameras=(), use_env_state=True))
    """The trained policies (the library's PolicyConfig; its kind is set by --kinds)."""
    ship_steps: list[int] = field(default_factory=lambda: [500, 3000])
    """Checkpoint steps of each run that join the zoo (each a multiple of save_every = 500)."""
    skills: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    """Skills of the scripted experts in the zoo."""
    bias: float = 0.5
    """Constant added to action dimension 0 of the biased policy (0: no biased policy)."""
    episodes: int = 50
    """Evaluation episodes per policy (fixed seeds seed .. seed+episodes-1)."""
    seed: int = 1000
    """First evaluation seed (keep it away from the seeds the training data was collected with)."""
    runs_dir: str = "runs/zoo"
    """Where training runs live."""
    assets: str | None = None
    """Assets folder to write policies/ and zoo/ into (default: the installed wmsuite.assets)."""
    num_envs: int = 2
    """Parallel environments per evaluation."""
    threads: int = 1
    """torch.set_num_threads."""
    force_new: bool = False
    """Start over when --runs-dir holds a zoo built with other settings (it is moved aside, not deleted)."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        if any(not 0.0 <= s <= 1.0 for s in self.skills):
            raise ValueError(f"skills must lie in [0, 1], got {self.skills}")
        if any(s < 1 for s in self.data_sizes):
            raise ValueError(f"data_sizes must be >= 1, got {self.data_sizes}")
        if any(s < 1 or s > self.train_steps for s in self.ship_steps):
            raise ValueError(f"ship_steps must lie in [1, train_steps={self.train_steps}], got {self.ship_steps}")
        if not self.task.isidentifier():
            raise ValueError(f"task must be a short identifier like 'pushcube', got {self.task!r}")


CONFIG = ZooConfig


def run(cfg: ZooConfig) -> int:
    from wmsuite.policies import load_policy, save_policy

    torch.set_num_threads(cfg.threads)
    seed_everything(0)
    assets = Path(cfg.assets) if cfg.assets else _installed_assets()
    if cfg.data and not Path(cfg.data).is_file():
        raise FileNotFoundError(f"--data {cfg.data} does not exist; record expert episodes with `wmsuite collect`")
    ensure_writable(assets, "--assets")
    identity = {**{k: v for k, v in to_dict(cfg).items() if k not in ("threads", "force_new")},
                "data": file_digest(cfg.data) if cfg.data else "",
                "checkpoints": {c: file_digest(c) for c in cfg.checkpoints if Path(c).exists()}}
    open_run(cfg.runs_dir, "zoo", identity, force_new=cfg.force_new)
    runs = [_train_run(cfg, kind, size) for kind in cfg.kinds for size in cfg.data_sizes] if cfg.data else []
    ckpts = [run_dir / f"step_{step}" for run_dir in runs for step in cfg.ship_steps]
    ckpts += [Path(c) for c in cfg.checkpoints]
    entries: list[dict[str, str]] = []
    for skill in cfg.skills:
        # `expert@<skill>`: resolved against the evaluated env, so the expert can plan whole chunks
        entries.append({"name": f"expert-skill{skill:g}", "kind": "expert", "spec": f"expert@{skill:g}"})
    shipped = []
    for ckpt in ckpts:
        if not ckpt.is_dir() or not ckpt.name.startswith("step_"):
            raise FileNotFoundError(f"{ckpt} is not a checkpoint directory runs/<run>/step_N (ship_steps "
                                    "must be multiples of the save interval, 500, and at most the run's steps)")
        name = f"{ckpt.parent.name}-s{int(ckpt.name[5:])}"
        save_policy(load_policy(ckpt), assets / "policies" / name, dtype=torch.float16, extra={"source": str(ckpt)})
        spec = f"assets:policies/{name}"
        shipped.append(spec)
        entries.append({"name": name, "kind": load_policy(spec).cfg.kind, "spec": spec})
    if cfg.bias and shipped:
        action_dim = load_policy(shipped[-1]).dims["action"]
        offset = [cfg.bias] + [0.0] * (action_dim - 1)
        kwargs = json.dumps({"inner": shipped[-1], "offset": offset})
        entries.append({"name": f"{Path(shipped[-1]).name}-offset{cfg.bias:g}", "kind": "biased",
                        "spec": f"wmsuite.policies.wrappers:ActionOffset{kwargs}"})
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"two zoo policies share a name in {names}; ship checkpoints from runs with distinct names")
    manifest = {"task": cfg.task, "env_id": cfg.env, "seed": cfg.seed, "episodes": cfg.episodes,
                "config": to_dict(cfg), "policies": []}
    for entry in entries:
        t0 = time.perf_counter()
        policy = resolve_policy(entry["spec"], env_id=cfg.env, seed=cfg.seed)
        m = evaluate(policy, cfg.env, cfg.episodes, cfg.seed, None, num_envs=cfg.num_envs, policy_id=entry["name"],
                     progress=False)
        low, high = wilson_interval(m["successes"], m["episodes"])
        manifest["policies"].append({**entry, "real_success": m["success_rate"], "episodes": m["episodes"],
                                     "ci_low": low, "ci_high": high, "mean_length": m["mean_length"]})
        print(f"{entry['name']:<40} success {m['success_rate']:.2f} [{low:.2f}, {high:.2f}] "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)
    out = assets / "zoo" / f"{cfg.task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, manifest)
    print(f"wrote {out} ({len(manifest['policies'])} policies)")
    return 0


def _installed_assets() -> Path:
    import wmsuite.assets

    return Path(wmsuite.assets.__file__).parent


def _train_run(cfg: ZooConfig, kind: str, size: int) -> Path:
    """The run <runs_dir>/<kind>-<task>-n<size>, trained (or resumed) up to cfg.train_steps."""
    from wmsuite.checkpoint import is_checkpoint, load_checkpoint

    run_dir = Path(cfg.runs_dir) / f"{kind}-{cfg.task}-n{size}"
    state = run_dir / "train_state" / "policy"
    if is_checkpoint(state) and load_checkpoint(state)[1]["step"] >= cfg.train_steps:
        return run_dir
    from wmsuite.data import load_episodes
    from wmsuite.logging import RunLogger
    from wmsuite.policies.train import train_policy
    from wmsuite.train import Trainer

    episodes = [ep for ep in load_episodes(cfg.data) if ep.success][:size]
    if len(episodes) < size:
        raise ValueError(f"{cfg.data} holds only {len(episodes)} successful episodes, data size {size} was asked")
    log = RunLogger(run_dir, config={"zoo": cfg.task, **to_dict(cfg)})
    try:
        result = train_policy(Trainer(run_dir, logger=log), episodes, replace(cfg.policy, kind=kind),
                              replace(POLICY_TRAINER, steps=cfg.train_steps), resume=is_checkpoint(state))
    finally:
        log.close()
    print(f"trained {run_dir} in {result.seconds:.0f}s")
    return run_dir
