"""`wmsuite train-wm`: train the latent video diffusion world model (codec, then dynamics + heads).

    wmsuite train-wm --data data/pushcube_mixed.hdf5 --out runs/wm-pushcube
    wmsuite train-wm --data ... --out runs/wm-pushcube --resume            # continue from runs/.../latest
    wmsuite train-wm --data ... --out runs/wm2 --codec-from runs/wm-pushcube/codec   # reuse a codec

Writes `out/metrics.jsonl` (and an offline wandb run with --wandb), `out/codec/`, and world-model
checkpoints `out/step_<N>/` and `out/latest/` (safetensors + config.json).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import torch

from wmsuite.checkpoint import is_checkpoint, load_checkpoint, save_checkpoint
from wmsuite.cli.common import seed_everything
from wmsuite.config import to_dict
from wmsuite.data import load_episodes
from wmsuite.logging import RunLogger
from wmsuite.world_models import load_world_model
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.train import (
    ONLINE,
    TrainSettings,
    build_model,
    detector_labels,
    episode_frames,
    load_codec,
    load_optimizer_state,
    save_model,
    train_codec,
    train_dynamics,
    train_heads,
)


@dataclass
class TrainWMConfig:
    data: str = "data/pushcube_mixed.hdf5"
    """Training episodes (robomimic-format HDF5, or a Robomimic/LIBERO file)."""
    out: str = "runs/wm-pushcube"
    """Run directory (checkpoints, metrics.jsonl)."""
    camera: str = "top"
    """Camera the world model generates."""
    stage: Literal["all", "codec", "dynamics", "heads"] = "all"
    """'codec': train the frame autoencoder only; 'dynamics': train the dynamics on an existing codec
    (--codec-from, or out/codec); 'all': both, then the heads; 'heads': fine-tune the frame heads of
    out/latest alone on every real frame (class-balanced success loss)."""
    heads_steps: int = 1500
    """Steps of the heads fine-tuning stage."""
    heads_batch_size: int = 256
    """Frames per heads fine-tuning step."""
    heads_lr: float = 1e-3
    """Learning rate of the heads fine-tuning stage."""
    heads_generated_fraction: float = 0.5
    """Share of each heads batch that is frames the model generated itself (open-loop rollouts of up
    to 4 chunks with the true actions, labelled with the real frames they stand for); 0: real only."""
    heads_kind: Literal["keypoints", "conv"] = "keypoints"
    """Frame-heads architecture (see WorldModelConfig.heads). With --stage heads on a checkpoint whose
    heads are of the other kind, its heads are replaced by new ones of this kind and trained anew."""
    heads_success_pos_weight: float = 1.0
    """Weight of success frames in the success head's loss; 0 balances them against the rest (the old
    default: n_neg / n_pos, 84x on the PushCube data). 1 keeps the head's probability calibrated: the learned simulator ends an
    episode on the first frame over 0.5 of up to 80, so false positives are what cost. Measured on
    generated frames: 148 false positives of 5,808 balanced, 36 at 1 (with 16 missed of 170)."""
    heads_labels: Literal["real", "detector"] = "real"
    """Labels of the generated frames in the heads stage: 'real', the real frames they stand for;
    'detector', what each frame shows by the task's object detector (cube position and success;
    wmsuite/PushCube-v0, see --env), so the success head judges the imagined scene itself."""
    env: str = "wmsuite/PushCube-v0"
    """Task whose object detector labels generated frames with --heads-labels detector."""
    codec_from: str = ""
    """Existing codec checkpoint directory to reuse (skips stage 1)."""
    codec_kind: Literal["pixel", "patch", "autoencoder_kl"] = "pixel"
    """Frame codec: see CodecConfig.kind."""
    downsample: int = 4
    """Codec downsampling factor f: latents are (C, S/f, S/f)."""
    codec_steps: int = 3000
    """Codec optimizer steps."""
    codec_batch_size: int = 32
    """Frames per codec step."""
    codec_lr: float = 1e-3
    """Codec learning rate."""
    codec_minutes: float = 0.0
    """Wall-clock budget of the codec stage (0: none)."""
    steps: int = 9000
    """Dynamics optimizer steps."""
    batch_size: int = 16
    """Windows per dynamics step."""
    lr: float = 5e-4
    """Dynamics learning rate."""
    max_minutes: float = 0.0
    """Wall-clock budget of the dynamics stage (0: none); it saves and stops when spent."""
    context: int = 4
    """K: context frames."""
    chunk: int = 4
    """H: actions per world-model step."""
    channels: tuple[int, ...] = (64, 128, 128)
    """UNet block widths."""
    attention: bool = False
    """Self-attention in the UNet's lower blocks."""
    sampling_steps: int = 1
    """Default Euler steps at generation (stored in the checkpoint; the heads stage generates its
    training frames with it)."""
    p_backward: float = 0.0
    """Fraction of windows trained backward in time (direction flag)."""
    context_noise_max: float = 0.3
    """Maximum context noise augmentation level."""
    consistency_weight: float = 0.1
    """Forward-inverse consistency weight."""
    residual: bool = False
    """Diffuse each target frame's change from the newest context frame instead of the frame (see
    WorldModelConfig.residual: off, because its artefacts pile up in rollouts)."""
    prediction: Literal["edm", "sample"] = "edm"
    """What the denoiser outputs: 'edm' (Karras preconditioning) or 'sample' (the clean frame; see
    WorldModelConfig.prediction)."""
    p_mean: float = 0.0
    """Mean of log(sigma) of the training noise levels (higher spends more of training near sigma_max,
    where 1-step sampling evaluates the denoiser)."""
    motion_weight: float = 10.0
    """Extra diffusion-loss weight on latent elements that change within a window (biased towards
    motion, but it keeps the cube drawn; see WorldModelConfig.motion_weight). Taken from the command
    line on --resume too."""
    context_motion_weight: float = 0.0
    """Extra diffusion-loss weight on the cells near what moved within the context (unbiased; see
    WorldModelConfig.context_motion_weight; the shipped model's phase 5 used 10). Taken from the
    command line on --resume too."""
    self_forcing: float = 0.0
    """Share of forward windows whose context is the model's own rollout from the real frames 1 to
    --self-forcing-chunks chunks earlier (see WorldModelConfig.self_forcing). Unlike the architecture,
    it is taken from the command line on --resume too, so a trained model can be fine-tuned with it."""
    self_forcing_chunks: int = 2
    """Most chunks a self-forced context is generated over."""
    moving_fraction: float = 0.0
    """Share of each dynamics batch drawn from windows where an object moves (contact; see
    TrainSettings.moving_fraction: 0.5 measured worse); 0 samples all windows alike."""
    ema_decay: float = 0.0
    """Decay of an exponential moving average of the dynamics weights, which the checkpoints then
    hold (0: off; see TrainSettings.ema_decay). Raw weights go on in out/latest/online/ for --resume."""
    save_every: int = 200
    """Steps between checkpoints."""
    log_every: int = 10
    """Steps between metric rows."""
    resume: bool = False
    """Continue the dynamics stage from out/latest (model + optimizer + step)."""
    restart_schedule: bool = False
    """With --resume: begin a fresh learning-rate schedule at the resumed step (50-step warm-up, then a
    cosine from --lr down to a tenth of it at --steps) instead of going on along the first run's."""
    resume_prediction: Literal["", "edm", "sample"] = ""
    """With --resume: switch the checkpoint's denoiser output to this parameterisation and go on
    training (the shipped model: 9,000 steps 'edm', then 6,000 'sample'); empty keeps it."""
    device: str = "cpu"
    """Torch device ('cpu', 'cuda')."""
    seed: int = 0
    """Seed of initialisation and batch sampling."""
    wandb: bool = False
    """Also log to wandb (offline mode unless configured)."""

    def __post_init__(self) -> None:
        for name in ("codec_steps", "codec_batch_size", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.stage not in ("all", "codec", "dynamics", "heads"):
            raise ValueError(f"stage must be 'all', 'codec', 'dynamics' or 'heads', got {self.stage!r}")
        if self.heads_success_pos_weight < 0:
            raise ValueError(f"heads_success_pos_weight must be >= 0 (0: balanced), got {self.heads_success_pos_weight}")
        if not 0.0 <= self.heads_generated_fraction < 1.0:
            raise ValueError(f"heads_generated_fraction must be in [0, 1), got {self.heads_generated_fraction}")
        if self.heads_steps < 1 or self.heads_batch_size < 1:
            raise ValueError(f"heads_steps and heads_batch_size must be >= 1, got {self.heads_steps}, "
                             f"{self.heads_batch_size}")
        if not Path(self.data).is_file():
            raise ValueError(f"--data {self.data} does not exist; record episodes with `wmsuite collect`")
        self.channels = tuple(self.channels)


CONFIG = TrainWMConfig


def run(cfg: TrainWMConfig) -> int:
    seed_everything(cfg.seed)
    out = Path(cfg.out)
    episodes = load_episodes(cfg.data)
    log = RunLogger(out, config=to_dict(cfg), use_wandb=cfg.wandb)
    began = time.time()
    try:
        if cfg.stage == "heads":
            return _heads(cfg, episodes, log)
        if cfg.resume and cfg.stage != "codec":
            return _resume(cfg, episodes, log)
        codec_dir = Path(cfg.codec_from) if cfg.codec_from else out / "codec"
        if cfg.stage in ("all", "codec") and not cfg.codec_from:
            frames = torch.cat(episode_frames(episodes, cfg.camera))  # (N, 3, S, S)
            codec_cfg = CodecConfig(kind=cfg.codec_kind, image_size=int(frames.shape[-1]), downsample=cfg.downsample)
            st = TrainSettings(steps=cfg.codec_steps, batch_size=cfg.codec_batch_size, lr=cfg.codec_lr,
                               max_minutes=cfg.codec_minutes, log_every=cfg.log_every, seed=cfg.seed,
                               device=cfg.device)
            train_codec(frames, codec_cfg, st, out, log=log.log)
            print(f"codec: {(time.time() - began) / 60:.1f} min -> {out / 'codec'}")
        if cfg.stage == "codec":
            return 0
        codec = load_codec(codec_dir, cfg.device)
        ep = episodes[0]
        wm_cfg = WorldModelConfig(
            camera=cfg.camera, context=cfg.context, chunk=cfg.chunk, action_dim=ep.actions.shape[1],
            state_dim=ep.state.shape[1], env_state_dim=ep.env_state.shape[1], channels=cfg.channels,
            attention=cfg.attention, sampling_steps=cfg.sampling_steps, p_backward=cfg.p_backward,
            context_noise_max=cfg.context_noise_max, consistency_weight=cfg.consistency_weight,
            motion_weight=cfg.motion_weight, context_motion_weight=cfg.context_motion_weight,
            p_mean=cfg.p_mean, residual=cfg.residual,
            prediction=cfg.prediction, heads=cfg.heads_kind, self_forcing=cfg.self_forcing,
            self_forcing_chunks=cfg.self_forcing_chunks)
        model = build_model(episodes, wm_cfg, codec)
        print(f"world model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters; config {asdict(wm_cfg)}")
        step = train_dynamics(model, episodes, _settings(cfg), out, log=log.log)
        print(f"trained {step} steps in {(time.time() - began) / 60:.1f} min -> {out / 'latest'}")
        if cfg.stage == "all":
            _heads(cfg, episodes, log)
    finally:
        log.close()
    return 0


def _settings(cfg: TrainWMConfig) -> TrainSettings:
    return TrainSettings(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, max_minutes=cfg.max_minutes,
                         save_every=cfg.save_every, log_every=cfg.log_every, seed=cfg.seed, device=cfg.device,
                         moving_fraction=cfg.moving_fraction, ema_decay=cfg.ema_decay)


def _heads(cfg: TrainWMConfig, episodes: list, log: RunLogger) -> int:
    latest = Path(cfg.out) / "latest"
    # --sampling-steps becomes the model's default here too: the heads learn from frames sampled that way
    model = load_world_model(latest, device=cfg.device, sampling_steps=cfg.sampling_steps)
    config = json.loads((latest / "config.json").read_text())
    replaced = cfg.heads_kind != model.cfg.heads
    if replaced:
        print(f"replacing the {model.cfg.heads!r} frame heads of {latest} by new {cfg.heads_kind!r} heads "
              "(the dynamics optimizer state, which holds the old heads' moments, is dropped)")
        model.replace_heads(cfg.heads_kind)
    st = TrainSettings(steps=cfg.heads_steps, batch_size=cfg.heads_batch_size, lr=cfg.heads_lr,
                       log_every=cfg.log_every, seed=cfg.seed, device=cfg.device)
    labels = None
    if cfg.heads_labels == "detector":
        from wmsuite.cli.eval_wm import task_functions

        labels = detector_labels(*task_functions(cfg.env))
    began = time.time()
    logs = train_heads(model, episodes, st, log=lambda m, s: log.log(m, config["step"] + s),
                       generated_fraction=cfg.heads_generated_fraction, frame_labels=labels,
                       success_pos_weight=cfg.heads_success_pos_weight or None)
    # keep the dynamics' resume state (optimizer moments, raw weights of an averaged run), so --resume
    # still works; new heads have no moments there, so then it is dropped
    resume_state = {} if replaced else {name: load_checkpoint(latest / name) for name in ("optimizer", ONLINE)
                                        if is_checkpoint(latest / name)}
    save_model(model, Path(cfg.out), config["step"], minutes=config.get("train_minutes_this_session", 0.0),
               extra={k: config[k] for k in ("ema_decay",) if k in config})
    for name, saved in resume_state.items():
        save_checkpoint(latest / name, *saved)
    print(f"heads fine-tuned for {cfg.heads_steps} steps in {(time.time() - began) / 60:.1f} min: {logs}")
    return 0


def _resume(cfg: TrainWMConfig, episodes: list, log: RunLogger) -> int:
    latest = Path(cfg.out) / "latest"
    ema_state = None
    if is_checkpoint(latest / ONLINE):  # an averaged run: train the raw weights on, average from latest's
        model = load_world_model(latest / ONLINE, device=cfg.device)
        ema_state = load_checkpoint(latest, device=cfg.device)[0] if cfg.ema_decay > 0 else None
        print(f"{latest} holds averaged weights: training goes on from {latest / ONLINE}")
    else:
        model = load_world_model(latest, device=cfg.device)
    step = int(json.loads((latest / "config.json").read_text())["step"])
    opt_state = None
    if is_checkpoint(latest / "optimizer"):
        opt_state = load_optimizer_state(latest / "optimizer")
    else:
        print(f"{latest} has no optimizer state (e.g. its heads were replaced): AdamW starts afresh")
    if cfg.resume_prediction and cfg.resume_prediction != model.cfg.prediction:
        print(f"switching the denoiser output from {model.cfg.prediction!r} to {cfg.resume_prediction!r}")
        model.cfg = replace(model.cfg, prediction=cfg.resume_prediction)
    model.cfg = replace(model.cfg, self_forcing=cfg.self_forcing, self_forcing_chunks=cfg.self_forcing_chunks,
                        motion_weight=cfg.motion_weight, context_motion_weight=cfg.context_motion_weight)
    print(f"resuming from {latest} at step {step} (self forcing {cfg.self_forcing}, motion weights "
          f"{cfg.motion_weight} on what changes, {cfg.context_motion_weight} near what moved in the context)")
    settings = replace(_settings(cfg), schedule_from=step if cfg.restart_schedule else 0)
    last = train_dynamics(model, episodes, settings, cfg.out, log=log.log, start_step=step,
                          optimizer_state=opt_state, ema_state=ema_state)
    print(f"trained to step {last} -> {latest}")
    return 0
