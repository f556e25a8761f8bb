"""`wmsuite eval`: the main job. Evaluate policies in the real simulator and in a learned simulator
from the same initial states, and report how well the learned one predicts success.

    wmsuite eval                                     # built-in default: PushCube, shipped WM, shipped zoo
    wmsuite eval --policies runs/flow-pushcube 'mypkg.mod:MyPolicy{"k": 1}' --wm runs/wm-pushcube --out runs/eval

Writes OUT/metrics.json, OUT/report.md, OUT/scatter.png, OUT/episodes.jsonl (per-episode, streamed:
rerun the same command to resume an interrupted evaluation) and side-by-side real/imagined mp4s.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from wmsuite.cli.common import resolve_policy, setup_logging
from wmsuite.eval_harness.evaluate import EvalSetup, PolicyEntry, evaluate
from wmsuite.eval_harness.report import side_by_side, write_report
from wmsuite.policies import resolve_path
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout


@dataclass
class EvalConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the real simulator."""
    zoo: str = "assets:zoo/pushcube.json"
    """Policy zoo manifest (a JSON file with a list `policies` of {name, spec}); used when --policies is empty."""
    policies: tuple[str, ...] = ()
    """Policy specs to evaluate instead of the zoo: checkpoint dirs, 'assets:policies/<name>',
    'expert@<skill>' or 'package.module:attr{json kwargs}'."""
    wm: str = "assets:wm/pushcube"
    """World-model checkpoint (or training run) directory; 'assets:' resolves against the installed package."""
    episodes: int = 50
    """Episodes per policy in each simulator."""
    num_envs: int = 16
    """Sub-environments run as one batch (the policy and the world model see batches of this size)."""
    seed: int = 0
    """Episode i of every policy starts from seed `seed + i` in both simulators."""
    videos: int = 3
    """Side-by-side real/imagined videos to write (one episode each of the first policies)."""
    sampling_steps: int = 0
    """Euler steps per generated chunk in the world model (0: the checkpoint's default)."""
    device: str = "cpu"
    """Torch device for the world model and learned policies."""
    out: str = "runs/eval-pushcube"
    """Output directory (rerun with the same one to resume)."""

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.num_envs < 1 or self.videos < 0 or self.sampling_steps < 0:
            raise ValueError(f"need episodes >= 1, num_envs >= 1, videos >= 0, sampling_steps >= 0; got "
                             f"{self.episodes}, {self.num_envs}, {self.videos}, {self.sampling_steps}")


CONFIG = EvalConfig


def policy_entries(cfg: EvalConfig) -> list[PolicyEntry]:
    if cfg.policies:
        return [PolicyEntry(name=Path(s).name if "{" not in s else s.split("{")[0], spec=s) for s in cfg.policies]
    path = resolve_path(cfg.zoo)
    if not path.is_file():
        raise SystemExit(f"no zoo manifest at {path}; build one with `wmsuite zoo` or pass --policies")
    manifest = json.loads(path.read_text())
    entries = [PolicyEntry(name=p["name"], spec=p["spec"]) for p in manifest.get("policies", [])]
    if len(entries) < 2:
        raise SystemExit(f"{path} lists {len(entries)} policies; comparing simulators needs at least 2")
    return entries


def make_policy_factory(cfg: EvalConfig, horizon: int):
    def make(spec: str, seed: int):
        return resolve_policy(spec, env_id=cfg.env, seed=seed, device=cfg.device, horizon=horizon)

    return make


def load_model(cfg: EvalConfig):
    """The world model, loaded once: its chunk sets both simulators' control protocol, and every
    learned-simulator env of the run (evaluation and videos) shares it."""
    from wmsuite.world_models import load_world_model

    return load_world_model(resolve_path(cfg.wm), device=cfg.device, sampling_steps=cfg.sampling_steps or None)


def make_env_factory(cfg: EvalConfig, model):
    """sim ('real' | 'wm') -> a fresh VectorEnv of `cfg.num_envs` sub-envs; 'wm' wraps `model`."""
    import wmsuite.envs  # noqa: F401  (registers the ids the learned simulator takes its horizon and resets from)
    from wmsuite.world_models import make_world_model_env

    def make(sim: str):
        if sim == "real":
            return make_vector_env(cfg.env, cfg.num_envs, asynchronous=False)
        return make_world_model_env(model, cfg.env, cfg.num_envs, device=cfg.device,
                                    sampling_steps=cfg.sampling_steps or None, seed=cfg.seed)

    return make


def run(cfg: EvalConfig) -> int:
    setup_logging()
    out = Path(cfg.out)
    entries = policy_entries(cfg)
    model = load_model(cfg)
    chunk = model.cfg.chunk  # actions per world-model step: both simulators query the policy this often
    setup = EvalSetup(env_id=cfg.env, policies=entries, episodes=cfg.episodes, num_envs=cfg.num_envs,
                      seed=cfg.seed, make_policy=make_policy_factory(cfg, chunk),
                      make_env=make_env_factory(cfg, model), act_every=chunk)
    metrics = evaluate(setup, out)
    videos = _videos(cfg, setup, out) if cfg.videos else []
    report = write_report(metrics, out, videos)
    print(f"\n{'policy':<28} {'real':>6} {'predicted':>10}")
    for p in metrics["policies"]:
        print(f"{p['name']:<28} {p['real_success']:>6.2f} {p['predicted_success']:>10.2f}")
    print(f"\nPearson {metrics.get('pearson', math.nan):.3f}  MMRV {metrics.get('mmrv', math.nan):.3f}  "
          f"Spearman {metrics.get('spearman', math.nan):.3f}  Kendall {metrics.get('kendall', math.nan):.3f}  "
          f"mean |error| {metrics.get('mean_abs_error', math.nan):.3f}  ({metrics['n_policies']} policies x "
          f"{cfg.episodes} episodes, {metrics['wall_time_s']:.0f} s)")
    print(f"report: {report}")
    return 0


def _videos(cfg: EvalConfig, setup: EvalSetup, out: Path) -> list[Path]:
    """Episode 0 of the first policies, in both simulators, with frames kept (envs built only when a
    video is missing, so a finished run's rerun builds none)."""
    paths = []
    envs: dict[str, object] = {}
    try:
        for entry in setup.policies[: cfg.videos]:
            path = out / f"video_{re.sub(r'[^A-Za-z0-9._@-]+', '_', entry.name)}.mp4"
            if path.exists():
                paths.append(path)
                continue
            if not envs:
                envs = {sim: setup.make_env(sim) for sim in ("real", "wm")}
            eps = {}
            for sim, env in envs.items():
                policy = setup.make_policy(entry.spec, cfg.seed)
                rcfg = RolloutConfig(episodes=1, seed=cfg.seed, progress=False, policy_id=entry.name,
                                     act_every=setup.act_every)
                eps[sim] = next(iter(rollout(policy, env, rcfg)))
            camera = sorted(eps["wm"].obs)[0]
            paths.append(side_by_side(eps["real"], eps["wm"], camera, path))
    finally:
        for env in envs.values():
            env.close()
    return paths
