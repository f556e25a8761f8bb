"""`wmsuite bench wm`: world-model rollout frames/s (batch 1/16/64) next to the real env's steps/s.

    wmsuite bench wm --out runs/bench-wm                     # the default simulator, eager
    wmsuite bench wm --compile --out runs/bench-wm-compiled  # steady state after torch.compile

metrics.json keys: wm_frames_per_s (batch 64), wm_frames_per_s_b<B> and wm_action_steps_per_s_b<B>
for every batch, sim_steps_per_s (one real env, rendering 64 px), ratio_b64 (= wm_frames_per_s /
sim_steps_per_s), first_step_s_b<B> (the untimed first step: with --compile, the compile), compiled,
device, torch_threads; with --round-trip-wm (or a world model trained to step backward
too), round_trip_ms_b<B> and round_trip_cost_b<B>: the round-trip trust signal's time for a rollout
of --round-trip-depth chunks and its ratio to that rollout's own time (what `wmsuite eval
--round-trip` adds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from wmsuite.cli.common import check_precision
from wmsuite.logging import write_metrics


@dataclass
class BenchWMConfig:
    wm: str = "assets/wm/pushcube-fast"
    """World-model checkpoint (or run directory); the default is `wmsuite eval`'s."""
    env: str = "wmsuite/PushCube-v0"
    """Real env: the reference simulator and the source of the context frames."""
    batch_sizes: list[int] = field(default_factory=lambda: [1, 16, 64])
    """WorldModelEnv batch sizes to time."""
    steps: int = 4
    """World-model steps per timed run."""
    repeats: int = 3
    """Timed runs per figure (median reported)."""
    sim_steps: int = 200
    """Real env steps per timed run."""
    sampling_steps: int = 0
    """Euler steps per chunk (0: the checkpoint's default)."""
    precision: str = ""
    """Number format of the world model at inference: 'float32', 'bfloat16' (faster on CPUs with
    bfloat16 instructions and on GPUs) or '' (the checkpoint's default)."""
    device: str = "cpu"
    """Torch device of the world model ('cuda' on a GPU; the real env and its frames stay on the CPU)."""
    compile: bool = False
    """torch.compile the denoiser, heads and inverse dynamics (LatentWorldModel.compile_inference, one
    graph per batch size) before timing: steady-state speed of long rollouts; the compile itself is
    the first step, reported apart (first_step_s_b<B>)."""
    out: str = ""
    """Directory for metrics.json (nothing written when empty)."""
    seed: int = 0
    """Seed of the random actions and contexts."""
    round_trip_depth: int = 8
    """Chunks of the rollout whose round trip is timed (with --round-trip-wm, or for a world model
    trained with backward windows)."""
    round_trip_wm: str = ""
    """A backward copy of --wm that plays its rollouts back (`wmsuite eval --round-trip-wm`); the round
    trip is timed through it ('': through --wm, if it was trained with backward windows)."""

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ValueError(f"batch_sizes must be positive, got {self.batch_sizes}")
        for name in ("steps", "repeats", "sim_steps", "round_trip_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


CONFIG = BenchWMConfig


@torch.no_grad()
def run(cfg: BenchWMConfig) -> int:
    from wmsuite.envs import make_env
    from wmsuite.eval_harness.bench_wm import bench_real_env, bench_round_trip, bench_world_model
    from wmsuite.world_models import load_world_model
    from wmsuite.world_models.trust import check_backward_model

    model = load_world_model(cfg.wm, device=cfg.device, sampling_steps=cfg.sampling_steps or None,
                             precision=cfg.precision or None)
    back = None
    if cfg.round_trip_wm:
        back = load_world_model(cfg.round_trip_wm, device=cfg.device, sampling_steps=cfg.sampling_steps or None,
                                precision=cfg.precision or None)
        check_backward_model(model, back)  # before any timing
    if cfg.compile:
        model.compile_inference(dynamic=False)
    size = model.codec_cfg.image_size

    def real() -> object:
        return make_env(cfg.env, image_size=size)

    sim = bench_real_env(real, steps=cfg.sim_steps, repeats=cfg.repeats, seed=cfg.seed)
    wm = bench_world_model(model, real, cfg.batch_sizes, steps=cfg.steps, repeats=cfg.repeats, seed=cfg.seed)
    print(f"real env {cfg.env}: {sim:.0f} rendered steps/s ({size} px, one env)")
    print(f"world model: chunk {model.cfg.chunk}, {model.cfg.sampling_steps} sampling step(s), {model.cfg.precision}, "
          f"{torch.get_num_threads()} torch threads{', compiled' if cfg.compile else ''}")
    print(f"{'batch':>6} {'frames/s':>9} {'action steps/s':>15} {'ms/step':>8} {'vs sim':>7} {'first step s':>13}")
    metrics: dict[str, float | str] = {"sim_steps_per_s": sim, "torch_threads": torch.get_num_threads(),
                                       "sampling_steps": model.cfg.sampling_steps, "precision": model.cfg.precision,
                                       "compiled": int(cfg.compile), "device": cfg.device}
    for b, r in wm.items():
        print(f"{b:>6} {r['frames_per_s']:>9.1f} {r['action_steps_per_s']:>15.1f} {r['step_ms']:>8.1f} "
              f"{r['frames_per_s'] / sim:>7.2f} {r['first_step_s']:>13.2f}")
        metrics[f"wm_frames_per_s_b{b}"] = r["frames_per_s"]
        metrics[f"wm_action_steps_per_s_b{b}"] = r["action_steps_per_s"]
        metrics[f"first_step_s_b{b}"] = r["first_step_s"]
    last = max(wm)
    metrics["wm_frames_per_s"] = wm[64]["frames_per_s"] if 64 in wm else wm[last]["frames_per_s"]
    metrics["ratio_b64"] = metrics["wm_frames_per_s"] / sim
    if back is not None or model.cfg.p_backward > 0:
        rt = bench_round_trip(model, real, cfg.batch_sizes, depth=cfg.round_trip_depth, repeats=cfg.repeats,
                              seed=cfg.seed, backward=back)
        print(f"round trip after {cfg.round_trip_depth} chunks: {'batch':>6} {'forward ms':>11} {'round trip ms':>14} "
              f"{'ratio':>6}")
        for b, r in rt.items():
            print(f"{'':>31}{b:>6} {r['forward_ms']:>11.1f} {r['round_trip_ms']:>14.1f} {r['cost_ratio']:>6.2f}")
            metrics[f"round_trip_ms_b{b}"] = r["round_trip_ms"]
            metrics[f"round_trip_cost_b{b}"] = r["cost_ratio"]
    else:
        print("round trip: not timed (the world model was trained forward only; time a backward copy with "
              "--round-trip-wm)")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0
