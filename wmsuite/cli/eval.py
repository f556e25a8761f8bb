"""`wmsuite eval`: the main job. Evaluate policies in the real simulator and in a learned simulator
from the same initial states, and report how well the learned one predicts success.

    wmsuite eval                                     # built-in default: PushCube, shipped WM, shipped zoo
    wmsuite eval --policies runs/flow-pushcube 'mypkg.mod:MyPolicy{"k": 1}' --wm runs/wm-pushcube --out runs/eval

Writes OUT/metrics.json, OUT/report.md, OUT/scatter.png, OUT/episodes.jsonl (per-episode, streamed:
rerun the same command to resume an interrupted evaluation) and side-by-side real/imagined mp4s.

Every policy has a unique label: `label=spec` on the command line, the manifest's `name`, or one
derived from the spec (its last path part or attribute, the whole spec where those collide).
OUT/run.json records the settings and the content hash of the world model and of every policy; a
rerun with other settings is refused (one more policy is fine: only it runs). Specs read from a
manifest, and specs nested in another spec, may name checkpoints, `assets:` entries and experts;
`module:attr` code there runs only with --trust-code.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from wmsuite.cli.common import SimBackendFlags, check_env_id, check_precision
from wmsuite.cli.eval_setup import (
    _holds_static,
    calibrated_trust,
    load_model,
    load_round_trip_model,
    make_env_factory,
    make_policy_factory,
    policy_entries,
    resolve_judge,
)
from wmsuite.eval_harness.abstention import plot_curves
from wmsuite.eval_harness.evaluate import EvalSetup, evaluate
from wmsuite.eval_harness.real_reuse import add_records, real_key, real_records, write_real_key
from wmsuite.eval_harness.report import judge_names, side_by_side, write_report
from wmsuite.rollout import RolloutConfig, rollout
from wmsuite.runs import open_run
from wmsuite.specs import file_digest, resolve_asset, spec_fingerprint, trust_code


@dataclass
class EvalConfig(SimBackendFlags):
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the real simulator."""
    zoo: str = "assets:zoo/pushcube.json"
    """Policy zoo manifest (a JSON file with a list `policies` of {name, spec}); used when --policies is empty."""
    policies: tuple[str, ...] = ()
    """Policy specs to evaluate instead of the zoo, each optionally labelled 'label=spec': checkpoint
    dirs, 'assets:policies/<name>', 'expert@<skill>' or 'package.module:attr{json kwargs}'."""
    wm: str = "assets:wm/pushcube-fast"
    """World-model checkpoint (or training run) directory; 'assets:' resolves against the installed package.
    The default is PushCube's one-step student (its model card says how it compares with its teacher,
    assets:wm/pushcube)."""
    episodes: int = 50
    """Episodes per policy in each simulator."""
    num_envs: int = 50
    """Sub-environments run as one batch (the policy and the world model see batches of this size); the
    default runs the default 50 episodes of a policy in one wave, which batches best."""
    seed: int | None = None
    """Episode i of every policy starts from seed `seed + i` in both simulators (None: the seed the
    manifest names for --split, else 0)."""
    split: str = "all"
    """Which of the manifest's policies to run: 'validation' (tune checkpoints, recipes and judges on
    these), 'test' (report these) or 'all'. A split's episodes start from the seed the manifest names for it."""
    round_trip: bool = False
    """Measure each imagined episode's round-trip error when it ends (a backward pass to the real start;
    `trust_round_trip_*` in episodes.jsonl and the policy rows). The backward pass runs through
    --round-trip-wm, else through --wm itself, which must then have been trained with backward windows
    (`p_backward` > 0). Doubles the world model's work."""
    round_trip_wm: str = ""
    """With --round-trip: a backward copy of --wm that plays the imagined episodes back, so that --wm
    imagines exactly as without the round trip (fine-tuned from --wm on backward windows only;
    STAGE=train bash experiments/scripts/trust_backward_copy.sh for the shipped model). Its landing
    point is read with --wm's heads. '' : --wm plays its own episodes back."""
    calibration: str = ""
    """With --round-trip: the calibrator (JSON, world_models/calibrator.py) that turns each imagined episode's
    round-trip error, inverse-dynamics error, depth and start-reading error into one trust score in
    [0, 1], the predicted probability that the episode's error is tolerable (a calibrator with a
    novelty gate also scores each real start frame with novelty.safetensors beside it); adds per-policy
    `mean_trust`, abstention and `trust_error_spearman` to the metrics ('': calibration.json beside
    --round-trip-wm, or beside --wm without one, if there is one)."""
    idm_stop: float = 0.0
    """Stop an imagined episode at the first step whose inverse-dynamics error (recovered vs given
    actions, mean over the chunk) exceeds this (0: never). A stopped episode counts as a failure in
    `predicted_success`; `predicted_success_unstopped` and `idm_stop_abstain` give the figures with it
    left out instead. Choose the value on training rollouts: experiments/scripts/idm_threshold.py."""
    real_episodes: int = 0
    """Run only the first this many episodes of each policy in the real simulator (0: all --episodes) and
    report, next to the real-only and imagined-only rates, the prediction-powered estimate of the real
    success rate that combines them, with its interval at confidence 0.95 (`ppi_success`, `ppi_ci`)."""
    real_from: str = ""
    """The --out folder of an earlier evaluation whose real-simulator episodes this one reuses instead of
    playing them again (same env, image size, --num-envs, seed, device and world-model chunk, which fix them;
    refused otherwise): policies it holds under the same name, spec and files are copied, the others run.
    For comparing world models, judges or trust settings on one zoo without paying for the real side twice."""
    image_size: int = 0
    """Side of the camera frames both simulators render (0: the world model's). It reaches the env as
    its `image_size` keyword (wmsuite's, robosuite's and LIBERO's envs take one); a size other than the
    world model's, or an env that renders other frames, is refused before any rollout."""
    videos: int = 3
    """Side-by-side real/imagined videos to write (one episode each of the first policies)."""
    sampling_steps: int = 0
    """Euler steps per generated chunk in the world model (0: the checkpoint's default)."""
    noise_seed: int = 0
    """Another stream of the world model's sampling noise (0: the default one): the same starts and
    real episodes, each imagined episode drawn again. Two runs that differ only in it show which
    outcomes the model is unsure of (experiments/scripts/sampling_disagreement.py)."""
    precision: str = ""
    """Number format of the world model at inference: 'float32', 'bfloat16' (faster on CPUs with
    bfloat16 instructions and on GPUs) or '' (the checkpoint's default)."""
    compile: bool = False
    """torch.compile the world model's networks (LatentWorldModel.compile_inference): faster steps once
    compiled, after a compile that costs the first steps seconds to a minute on a CPU, so it pays in
    long evaluations (many policies or episodes), not the default one. Imagined episodes differ from
    eager ones in the last bits, so it is part of the run's settings."""
    judge: str = "auto"
    """What ends an imagined episode as a success: 'head' (the learned success head), 'state' (the
    task's success rule on the environment_state head's reading of each generated frame), 'both',
    'tracked' (the rule on an object position that moves only while the agent is within reach of it),
    'latched' (tracked, and an object the gripper closed on within reach moves with the agent until it
    opens, or on PickPlace until the fingers close on nothing; tasks with a gripper command: Lift,
    PickPlace), or 'auto': the task probe's `auto_judge`, the judge chosen on its zoo's validation split
    ('tracked' on the pushing tasks, 'latched' on PickPlace and Lift, 'head' where the task has no probe).
    Every judge's firing step is recorded per episode either way (episodes.jsonl, judge_* figures)."""
    hold_static: bool = True
    """Hold the state the task fixes at reset (PushCube's goal, PickPlace's target; the task probe's
    `static_state`) at its real start value in every imagined frame's reading, for the observation and
    the rule-based judges, instead of the value the heads read off generated frames (which can drift
    toward where the objects are). No effect for tasks whose probe names no fixed state."""
    parallel: bool = True
    """Run the real simulator's episodes in a worker process while the world model runs (where the
    machine has two cores or more; not with --backend ray, whose actors run them). The records are
    those of a sequential run (--no-parallel)."""
    device: str = "cpu"
    """Torch device for the world model and learned policies."""
    out: str = "runs/eval-pushcube"
    """Output directory (rerun with the same one to resume)."""
    force_new: bool = False
    """Start over when --out holds an evaluation with other settings (it is moved aside, not deleted)."""
    trust_code: bool = False
    """Let the manifest's specs, and specs nested in any spec, name `module:attr` code (read it first)."""

    def __post_init__(self) -> None:
        from wmsuite.world_models.env import JUDGES

        check_precision(self.precision)
        self.sim_backend()  # validates the backend flags
        if self.split not in ("all", "validation", "test"):
            raise ValueError(f"--split must be all, validation or test, got {self.split!r}")
        if self.judge not in (*JUDGES, "auto"):
            raise ValueError(f"--judge must be auto or one of {', '.join(JUDGES)}, got {self.judge!r}")
        if (self.calibration or self.round_trip_wm) and not self.round_trip:
            flag = "--calibration scores" if self.calibration else "--round-trip-wm plays back"
            raise ValueError(f"{flag} the round trip of imagined episodes; add --round-trip")
        if not (math.isfinite(self.idm_stop) and self.idm_stop >= 0):
            raise ValueError(f"--idm-stop must be 0 (off) or a positive inverse-dynamics error, got {self.idm_stop}")
        if not 0 <= self.real_episodes < self.episodes:
            raise ValueError(f"--real-episodes must be 0 (all) or below --episodes ({self.episodes}), "
                             f"got {self.real_episodes}")
        if self.image_size < 0:
            raise ValueError(f"--image-size must be 0 (the world model's) or a side in pixels, got {self.image_size}")
        if self.noise_seed < 0:
            raise ValueError(f"--noise-seed must be >= 0 (0: the default noise stream), got {self.noise_seed}")
        if self.episodes < 1 or self.num_envs < 1 or self.videos < 0 or self.sampling_steps < 0:
            raise ValueError(f"need episodes >= 1, num_envs >= 1, videos >= 0, sampling_steps >= 0; got "
                             f"{self.episodes}, {self.num_envs}, {self.videos}, {self.sampling_steps}")


CONFIG = EvalConfig


def run(cfg: EvalConfig) -> int:
    from wmsuite.world_models import resolve_checkpoint

    out = Path(cfg.out)
    entries, trusted, seed = policy_entries(cfg)
    check_env_id(cfg.env)
    cfg = replace(cfg, seed=seed, judge=resolve_judge(cfg))
    model = load_model(cfg)  # a checkpoint that is not a world model fails here, before any rollout
    back = load_round_trip_model(cfg, model)  # so do round-trip settings that cannot work
    wm_digest = file_digest(resolve_checkpoint(resolve_asset(cfg.wm)))
    trust_score = calibrated_trust(cfg, model.cfg.chunk, wm_digest) if cfg.round_trip else None
    with trust_code(cfg.trust_code):
        policies = {e.name: {"spec": e.spec, "files": spec_fingerprint(e.spec)} for e in entries}
    identity = {"env": cfg.env, "wm": wm_digest, "episodes": cfg.episodes,
                "num_envs": cfg.num_envs, "seed": cfg.seed, "sampling_steps": cfg.sampling_steps, "device": cfg.device,
                **({"judge": cfg.judge} if cfg.judge != "head" else {}),  # records from before judges stay valid
                **({"hold_static": True} if cfg.hold_static and _holds_static(cfg.env) else {}),
                **({"real_episodes": cfg.real_episodes} if cfg.real_episodes else {}),
                **({"round_trip": True} if cfg.round_trip else {}),
                **({"round_trip_wm": file_digest(resolve_checkpoint(resolve_asset(cfg.round_trip_wm)))}
                   if cfg.round_trip_wm else {}),
                **({"idm_stop": cfg.idm_stop} if cfg.idm_stop else {}),
                **({"noise_seed": cfg.noise_seed} if cfg.noise_seed else {}),
                **({"novelty": file_digest(trust_score.novelty_path)}
                   if trust_score is not None and trust_score.novelty is not None else {}),
                **({"precision": model.cfg.precision} if model.cfg.precision != "float32" else {}),
                **({"compile": True} if cfg.compile else {}),
                "policies": policies}
    chunk = model.cfg.chunk  # actions per world-model step: both simulators query the policy this often
    setup = EvalSetup(env_id=cfg.env, policies=entries, episodes=cfg.episodes, num_envs=cfg.num_envs,
                      seed=cfg.seed, make_policy=make_policy_factory(cfg, chunk, trusted),
                      make_env=make_env_factory(cfg, model, back, trust_score.novelty if trust_score else None),
                      act_every=chunk,
                      real_episodes=cfg.real_episodes or None, trust_score=trust_score, parallel=cfg.parallel and cfg.backend == "local")
    key = real_key(cfg.env, setup.make_env.env_kwargs, cfg.num_envs, cfg.seed, chunk, cfg.device, policies)
    reused = real_records(Path(cfg.real_from), key, setup.count("real")) if cfg.real_from else {}
    open_run(out, "eval", identity, force_new=cfg.force_new, growable=("policies",))
    if cfg.real_from:
        add_records(out, reused)
        print(f"--real-from {cfg.real_from}: the real episodes of {len(reused)} of {len(entries)} policies reused"
              + "".join(f"; {e.name} runs" for e in entries if e.name not in reused))
    write_real_key(out, key)
    metrics = evaluate(setup, out)
    if trust_score is not None:  # which calibrator scored the episodes (it is not part of the run's identity)
        metrics["calibration"] = {"path": str(trust_score.path), "sha256": file_digest(trust_score.path)}
    videos = _videos(cfg, setup, out) if cfg.videos else []
    report = write_report(metrics, out, videos)
    judges = judge_names(metrics)
    w = max(28, *(len(p["name"]) for p in metrics["policies"]))
    print(f"\n{'policy':<{w}} {'real':>6} {'predicted':>10} {'length real/imagined':>21}  "
          + "  ".join(f"{'fired ' + j:>12}" for j in judges))
    for p in metrics["policies"]:
        print(f"{p['name']:<{w}} {p['real_success']:>6.2f} {p['predicted_success']:>10.2f} "
              f"{p['real_length']:>10.0f} / {p['wm_length']:<8.0f}  "
              + "  ".join(f"{p.get(f'judge_{j}_rate', math.nan):>12.2f}" for j in judges))
    if any("ppi_success" in p for p in metrics["policies"]):
        n = metrics["real_episodes_per_policy"]
        print(f"\n{'policy':<{w}} {f'real ({n} episodes)':>22} {f'imagined ({cfg.episodes})':>22} "
              f"{'prediction-powered':>22}   (95% intervals)")
        for p in metrics["policies"]:
            print(f"{p['name']:<{w}} " + " ".join(f"{p[k]:>6.2f} [{p[c][0]:.2f}, {p[c][1]:.2f}]".rjust(22) for k, c in (
                ("real_success", "real_ci"), ("predicted_success", "predicted_ci"), ("ppi_success", "ppi_ci"))))
    if "idm_stop_abstain" in metrics:
        k = metrics["idm_stop_abstain"]
        stopped = np.mean([p.get("trust_idm_stop_max", 0.0) for p in metrics["policies"]])
        print(f"\n--idm-stop {cfg.idm_stop}: {stopped:.1%} of imagined episodes stopped, counted as failures above; "
              f"left out instead: Pearson {k.get('pearson', math.nan):.3f}  MMRV {k.get('mmrv', math.nan):.3f}  "
              f"mean |error| {k['mean_abs_error']:.3f}")
    if "abstention" in metrics:
        _print_trust(metrics, w)
        plot_curves(metrics["abstention"], out / "selective.png")
    for family, f in metrics.get("families", {}).items():
        print(f"family {family:<21} n={f['n_policies']:<3} Pearson {f.get('pearson', math.nan):.3f}  "
              f"MMRV {f.get('mmrv', math.nan):.3f}  mean |error| {f['mean_abs_error']:.3f}")
    print(f"\nPearson {metrics.get('pearson', math.nan):.3f}  MMRV {metrics.get('mmrv', math.nan):.3f}  "
          f"Spearman {metrics.get('spearman', math.nan):.3f}  Kendall {metrics.get('kendall', math.nan):.3f}  "
          f"mean |error| {metrics.get('mean_abs_error', math.nan):.3f}  ({metrics['n_policies']} policies x "
          f"{cfg.episodes} episodes, {metrics['wall_time_s']:.0f} s)")
    print(f"report: {report}")
    return 0


def _print_trust(metrics: dict, w: int) -> None:
    a, k = metrics["abstention"], metrics["abstained"]
    kept = f"kept {a['coverage']:.0%}"
    print(f"\n{'policy':<{w}} {'mean trust':>10} {'predicted':>10} {kept:>10} {'real':>6}")
    for p in metrics["policies"]:
        print(f"{p['name']:<{w}} {p['mean_trust']:>10.2f} {p['predicted_success']:>10.2f} "
              f"{p['predicted_success_kept']:>10.2f} {p['real_success']:>6.2f}")
    print(f"episodes misjudged: {a['error_all']:.3f} over all, {a['error_at_coverage']:.3f} over the {a['coverage']:.0%} "
          f"most trusted ({a['depth_error_at_coverage']:.3f} keeping the shortest); Spearman(|error|, distrust) "
          f"across policies {metrics['trust_error_spearman']:.3f}; kept only: Pearson {k.get('pearson', math.nan):.3f} "
          f"MMRV {k.get('mmrv', math.nan):.3f}")


def _videos(cfg: EvalConfig, setup: EvalSetup, out: Path) -> list[Path]:
    """Episode 0 of the first policies, in both simulators, with frames kept (envs built only when a
    video is missing, so a finished run's rerun builds none)."""
    paths = []
    envs: dict[str, object] = {}
    try:
        for entry in setup.policies[: cfg.videos]:
            path = out / f"video_{video_name(entry.name)}.mp4"
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


def video_name(label: str) -> str:
    """A file-name-safe form of a label, unique per label (a hash is added where characters were replaced)."""
    safe = re.sub(r"[^A-Za-z0-9._@-]+", "_", label)[:80]
    return safe if safe == label else f"{safe}-{zlib.crc32(label.encode()):08x}"
