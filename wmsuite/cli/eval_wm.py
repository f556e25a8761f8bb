"""`wmsuite eval-wm`: open-loop fidelity of a world model on held-out episodes.

    wmsuite eval-wm --wm assets/wm/pushcube --data data/pushcube_heldout.hdf5 --out runs/eval-wm

The task (`--env`, by default the env id the data file records) gives the world model's figures their
meaning through its probe (wmsuite.envs.probes): where the object is, how success follows from
environment_state, and the detector that reads the object off generated frames.

Prints and writes to `--out DIR/metrics.json` (flat keys; per-horizon figures are objects keyed by
horizon in actions): psnr, ssim, object_error (metres, by the task's object detector),
object_error_median, object_detect_rate, state_error, success_agreement (success head on the last
generated frame vs the real outcome; with --repeats R, pooled over R rollouts of every episode, and
success_agreement_per_repeat), success_agreement_detector, success_agreement_state,
success_head_accuracy, success_head_balanced_accuracy, idm_error_real, idm_error_generated,
reconstruction_psnr, contact (teacher-forced: does the generated object move when the real one does, and as
far, head-on and in glancing contact?). See wmsuite/eval_harness/fidelity.py for the definitions. The
detector figures are None (and skipped in the printout, with a note) where the task has no detector or
the world model generates another camera than the one the detector reads.

On a task whose camera moves with the agent (its probe names the moving camera, PushCubeEgo) and a
model of that camera, the figures gain the revisit figures of wmsuite/eval_harness/revisits.py,
whether or not the model reads a spatial memory (so a model and its no-memory baseline compare):
revisit_psnr, first_visit_psnr, revisit_object_error, first_visit_object_error, the object's
position relative to the agent on the frames that show it (*_relative_object_error), revisit_frames,
first_visit_frames (one chunk from real context at every window; --revisit-gap frames away counts as
left).
A model with spatial memory is rolled out open loop with its memory (and its start map), each
generated frame posed by the episode's recorded agent position.

With --replays, the real simulator replays every episode's actions from the starts whose first frame
is identical to the episode's (wmsuite/eval_harness/replays.py) and the figures gain
success_agreement_ceiling (the most any model reading the frame can agree over those replays),
success_agreement_sampler (a perfect simulator's agreement from a random one of those starts),
success_agreement_replays (this model's agreement over them), replay_flip_rate_successes /
replay_flip_rate_failures, replay_end_shift_median, and on the episodes alone, beside success_agreement,
success_agreement_sampler_episodes and success_agreement_mode_episodes (a perfect simulator started
from a random frame-identical start, or answering with the frame's likelier outcome).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from wmsuite.cli.common import check_precision, memory_geometry, recorded_env_id, seed_everything
from wmsuite.data import load_episodes
from wmsuite.logging import write_metrics

if TYPE_CHECKING:
    from wmsuite.envs.probes import TaskProbe


@dataclass
class EvalWMConfig:
    wm: str = "assets/wm/pushcube"
    """World-model checkpoint directory, or a `wmsuite train-wm` run directory (uses latest/)."""
    data: str = "data/pushcube_heldout.hdf5"
    """Held-out episodes (recorded with other seeds than the training data)."""
    env: str = ""
    """Task (env id) whose probe scores the generated frames: object detector, success rule, object and
    agent slices. Empty: the env id recorded in --data (`wmsuite collect` stores it)."""
    out: str = ""
    """Directory for metrics.json (nothing written when empty)."""
    horizons: list[int] = field(default_factory=lambda: [1, 8, 16, 32, 64])
    """Horizons (actions since the first frame) at which frames are compared."""
    max_episodes: int = 0
    """Evaluate only the first N episodes (0: all)."""
    batch_size: int = 64
    """Episodes rolled out together."""
    sampling_steps: int = 0
    """Euler steps per generated chunk (0: the checkpoint's default)."""
    precision: str = ""
    """Number format of the world model at inference: 'float32', 'bfloat16' (faster on CPUs with
    bfloat16 instructions and on GPUs) or '' (the checkpoint's default)."""
    device: str = "cpu"
    """Torch device."""
    seed: int = 0
    """Seed of the sampling noise."""
    repeats: int = 1
    """Open-loop rollouts of every episode, each with other sampling noise; the figures pool them and
    success_agreement_per_repeat shows how far one rollout's agreement can move (5 for the docs' figures)."""
    backward: bool = False
    """Also play every episode backward (from its last frame, with its actions reversed and the
    direction flag BACKWARD) and report its open-loop figures under `backward` in metrics.json, next
    to the forward ones: how well the model says what came before. Needs a model trained with
    backward windows (`p_backward` > 0)."""
    drop_bad: bool = False
    """Skip episodes with non-finite or malformed values (counted) instead of refusing the data."""
    revisit_gap: int = 20
    """Frames the camera must have been away from a place for a return to count as a revisit (the
    revisit figures, on tasks with a moving camera; 0 skips them)."""
    replays: bool = False
    """Also replay every episode in the real simulator from the starts (object nudged by the grid below,
    through the task probe's start perturbation) whose first frame is bit-identical to its own, for
    success_agreement_ceiling and success_agreement_replays: how much of the outcome the frame can decide at all."""
    replay_shifts_mm: list[float] = field(default_factory=lambda: [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    """Object shifts along x and along y (every pair) tried for --replays, in mm."""
    replay_turns_deg: list[float] = field(default_factory=lambda: [-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0])
    """Object turns about the vertical tried with every shift for --replays, in degrees."""

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.revisit_gap < 0:
            raise ValueError(f"revisit_gap must be >= 0 frames (0: no revisit figures), got {self.revisit_gap}")
        if not self.horizons or min(self.horizons) < 1:
            raise ValueError(f"horizons must be positive action counts, got {self.horizons}")
        if self.max_episodes < 0 or self.batch_size < 1 or self.sampling_steps < 0 or self.repeats < 1:
            raise ValueError(f"need max_episodes >= 0, batch_size >= 1, sampling_steps >= 0, repeats >= 1; got "
                             f"{self.max_episodes}, {self.batch_size}, {self.sampling_steps}, {self.repeats}")
        if not Path(self.data).is_file():
            raise ValueError(f"--data {self.data} does not exist; record held-out episodes with `wmsuite collect "
                             "--seed 100000`")


CONFIG = EvalWMConfig


@torch.no_grad()
def run(cfg: EvalWMConfig) -> int:
    from wmsuite.envs import get_probe
    from wmsuite.eval_harness.fidelity import check_task, evaluate_fidelity, frame_detector
    from wmsuite.world_models import BACKWARD, load_world_model

    seed_everything(cfg.seed)
    model = load_world_model(cfg.wm, device=cfg.device, precision=cfg.precision or None)
    episodes = load_episodes(cfg.data, limit=cfg.max_episodes or None, drop_bad=cfg.drop_bad)
    env_id = cfg.env or recorded_env_id(cfg.data, episodes)
    probe = get_probe(env_id)
    check_task(model, probe)
    if cfg.backward and model.cfg.p_backward <= 0:
        raise ValueError(f"--backward needs a model trained with backward windows, and {cfg.wm} was trained "
                         "forward only (p_backward = 0)")
    if frame_detector(probe, model.cfg.camera) is None:
        reason = (f"{env_id}'s probe has no object detector" if probe.object_xy_from_frames is None else
                  f"{env_id}'s object detector reads the {probe.camera!r} camera, the world model generates "
                  f"{model.cfg.camera!r}")
        print(f"note: {reason}; the detector figures (object_error, object_detect_rate, "
              "success_agreement_detector, contact) are skipped")
    # a model with memory on a task that cannot serve it: refused here, before any rollout
    geometry = memory_geometry(env_id, model.cfg.camera, model.cfg.start_map) if model.cfg.memory_frames else None
    replays = _replays(cfg, probe, episodes, model.cfg.camera) if cfg.replays else {}
    start = time.time()
    metrics = evaluate_fidelity(model, episodes, probe, horizons=cfg.horizons,
                                batch_size=cfg.batch_size, seed=cfg.seed, steps=cfg.sampling_steps or None,
                                repeats=cfg.repeats, replay_p_success=replays.get("replay_p_success"),
                                geometry=geometry)
    if cfg.backward:
        metrics["backward"] = evaluate_fidelity(model, episodes, probe, horizons=cfg.horizons,
                                                batch_size=cfg.batch_size, seed=cfg.seed,
                                                steps=cfg.sampling_steps or None, repeats=cfg.repeats,
                                                direction=BACKWARD)
    if cfg.revisit_gap and probe.moving_camera is not None and model.cfg.camera == probe.moving_camera:
        from wmsuite.eval_harness.revisits import revisit_fidelity

        metrics.update(revisit_fidelity(model, episodes, memory_geometry(env_id, model.cfg.camera, model.cfg.start_map),
                                        probe.object_xy,
                                        gap=cfg.revisit_gap, batch_size=cfg.batch_size, seed=cfg.seed,
                                        steps=cfg.sampling_steps or None))
    metrics.update({k: v.tolist() if hasattr(v, "tolist") else v for k, v in replays.items()})
    metrics["wall_seconds"] = time.time() - start
    metrics["wm"], metrics["data"], metrics["env"] = str(cfg.wm), str(cfg.data), env_id
    _print(metrics)
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0


def _replays(cfg: EvalWMConfig, probe: TaskProbe, episodes: list, camera: str) -> dict:
    from wmsuite.envs import make_env
    from wmsuite.eval_harness.replays import frame_identical_outcomes, nudge_grid

    env = make_env(probe.env_id, cameras=()).unwrapped
    env.reset(seed=0)
    try:
        return frame_identical_outcomes(env, episodes, nudge_grid(cfg.replay_shifts_mm, cfg.replay_turns_deg),
                                        probe, camera)
    finally:
        env.close()


def _print(m: dict) -> None:
    print(f"{m['episodes']} held-out episodes (real success rate {m['real_success_rate']:.2f}), "
          f"chunk {m['chunk']}, {m['sampling_steps']} sampling step(s), {m['repeats']} rollout(s) each")
    _print_open_loop(m)
    if "backward" in m:
        print("played backward (from the last frame, actions reversed):")
        _print_open_loop(m["backward"])
    rest = {k: m[k] for k in ("success_agreement", "success_agreement_detector", "success_agreement_state",
                              "success_head_accuracy", "success_head_balanced_accuracy", "idm_error_real",
                              "idm_error_generated", "reconstruction_psnr")}
    print(json.dumps(rest, indent=1))
    if m.get("revisit_frames") is not None:
        print(f"one chunk from real context: revisits ({m['revisit_frames']} frames, away > {m['revisit_gap']}) "
              f"PSNR {_f(m['revisit_psnr'])} dB, object {_m(m['revisit_object_error'])}; first visits "
              f"({m['first_visit_frames']}) PSNR {_f(m['first_visit_psnr'])} dB, object {_m(m['first_visit_object_error'])}")
        print(f"  object relative to the agent, frames that show it: revisits ({m['revisit_in_view_frames']}) "
              f"{_m(m['revisit_relative_object_error'])}; first visits ({m['first_visit_in_view_frames']}) "
              f"{_m(m['first_visit_relative_object_error'])}")
    if m.get("success_agreement_ceiling") is not None:
        print(f"real simulator from frame-identical starts ({m['replay_nudges']} nudges tried, median "
              f"{np.median(m['replay_identical_starts']):.1f} identical): {_r(m['replay_flip_rate_successes'])} of "
              f"the successes' replays fail, and a replay's object ends a median {_m(m['replay_end_shift_median'])} "
              f"from the episode's; any model reading the frame agrees over them at most "
              f"{m['success_agreement_ceiling']:.3f}, a perfect simulator from a random one of them "
              f"{m['success_agreement_sampler']:.3f}, this model {m['success_agreement_replays']:.3f}")
        print(f"on the episodes alone: this model {m['success_agreement']:.3f}; a perfect simulator from a random "
              f"frame-identical start {m['success_agreement_sampler_episodes']:.3f}, one answering with the "
              f"frame's likelier outcome {m['success_agreement_mode_episodes']:.3f}")
    if m["repeats"] > 1:
        per = m["success_agreement_per_repeat"]
        print(f"success_agreement per rollout: {', '.join(f'{a:.3f}' for a in per)} (min {min(per):.3f}, "
              f"max {max(per):.3f})")
    c = m["contact"]
    if c is None:
        print("contact: skipped (no object detector for the world model's camera)")
        return
    print(f"contact (teacher-forced, {c['moving_windows']} windows where the real object moves): real "
          f"displacement {_m(c['real_displacement'])}, generated {_m(c['generated_displacement'])}, end error "
          f"{_m(c['moving_end_error'])}; {c['still_windows']} still windows: end error {_m(c['still_end_error'])}")
    print(f"object/agent displacement, median real vs generated: head-on ({c['headon_windows']} windows) "
          f"{_r(c['headon_ratio_real'])} vs {_r(c['headon_ratio_generated'])}, glancing ({c['glancing_windows']} "
          f"windows) {_r(c['glancing_ratio_real'])} vs {_r(c['glancing_ratio_generated'])}")
    print(f"generated object's progress along the real path (1 = as far as the real object): all moving "
          f"{_r(c['along_ratio'])}, head-on {_r(c['headon_along_ratio'])}, glancing {_r(c['glancing_along_ratio'])}")


def _print_open_loop(m: dict) -> None:
    print(f"{'horizon':>8} {'n':>4} {'PSNR dB':>8} {'SSIM':>6} {'object err m':>12} {'median':>7} {'found':>6} "
          f"{'state err':>9}")
    for hz, n in m["count"].items():
        def f(key: str, fmt: str, hz: str = hz) -> str:
            v = m[key][hz]
            return format(v, fmt) if v is not None else "-"
        print(f"{hz:>8} {n:>4} {f('psnr', '8.2f')} {f('ssim', '6.3f')} {f('object_error', '12.4f')} "
              f"{f('object_error_median', '7.4f')} {f('object_detect_rate', '6.2f')} {f('state_error', '9.4f')}")


def _m(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} m"


def _r(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
