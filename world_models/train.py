"""Training the latent world model on the one trainer (`wmsuite.train.Trainer`), in three stages:

    codec = train_codec(trainer, frames, CodecConfig(), TrainerConfig(...))        # out/codec/
    model = build_model(episodes, WorldModelConfig(), codec)
    train_dynamics(trainer, model, episodes, TrainerConfig(...))                   # out/step_<N>/, out/latest/
    train_heads(trainer, model, episodes, TrainerConfig(...), HeadsConfig())       # out/latest/ again
    train_distill(trainer, student, teacher, episodes, TrainerConfig(...), DistillConfig())  # a fast student

The dynamics stage encodes every frame once with the frozen codec and trains on windows of latents
(`data.py`), so a step never touches pixels. Its checkpoints are whole `LatentWorldModel`s (codec
included), holding the averaged weights when the trainer's EMA is on; the trainer keeps the raw
weights and the optimizer in out/train_state/dynamics/ for --resume. The heads stage then trains the
frame heads alone on every real frame and on frames the model generated itself. The distill stage
turns a trained model into a few-step student of it (objectives.py), whose heads pass follows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.train import BatchSource, FitResult, Objective, Trainer, TrainerConfig, dist
from wmsuite.types import Episode
from wmsuite.world_models.add_camera import widen
from wmsuite.world_models.codec import FrameCodec, codec_loss, make_codec, reconstruction_psnr
from wmsuite.world_models.config import (
    CodecConfig,
    DistillConfig,
    HeadsConfig,
    WorldModelConfig,
    camera_names,
)
from wmsuite.world_models.data import (
    LatentWindows,
    encode_episodes,
    episode_frames,
    frame_targets,
    generated_head_data,
    sample_windows,
    state_stats,
)
from wmsuite.world_models.latent_memory import MemoryGeometry
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.objectives import cycle_chunks, distillation_loss, dynamics_loss


# ---------------------------------------------------------------------------------------- stage 1
def train_codec(trainer: Trainer, frames: torch.Tensor, cfg: CodecConfig, tcfg: TrainerConfig,
                sigma_data: float = 0.5, resume: bool = False) -> FrameCodec:
    """Train the codec on frames (N, 3 M, S, S) uint8, fit its latent statistics, save `out/codec`."""
    torch.manual_seed(trainer.seed)
    codec = make_codec(cfg, sigma_data).to(trainer.device)
    gen = torch.Generator().manual_seed(trainer.seed)
    held = frames[torch.randperm(len(frames), generator=gen)[:512]]
    info: dict[str, float] = {"steps": 0}
    if cfg.kind != "pixel":  # the pixel codec has nothing to train: it fits the latent statistics only
        def batches(start: int):
            g = torch.Generator().manual_seed(trainer.seed + start)
            while True:  # random flips are not used: the camera is fixed and a scene has a handedness
                yield frames[torch.randint(len(frames), (tcfg.batch_size,), generator=g)]

        result = trainer.fit("codec", Objective(codec, codec_loss), tcfg, batches, resume=resume)
        info = {"steps": result.steps, "minutes": result.seconds / 60}
    codec.eval()
    codec.fit_latent_stats(frames[torch.randperm(len(frames), generator=gen)[:4096]].to(trainer.device))
    info["reconstruction_psnr"] = min(reconstruction_psnr(codec, held.to(trainer.device)), 99.0)
    if trainer.logger is not None:
        trainer.logger.log({"codec/reconstruction_psnr": info["reconstruction_psnr"]}, step=int(info["steps"]))
    if trainer.is_main:
        save_codec(codec, trainer.out / "codec", info)
    dist.barrier()
    return codec


def save_codec(codec: FrameCodec, path: Path, info: dict[str, float]) -> None:
    save_checkpoint(path, dict(codec.state_dict()),
                    {"class": "FrameCodec", "codec": asdict(codec.cfg), "sigma_data": codec.sigma_data, **info})


def load_codec(path: str | Path, device: str = "cpu") -> FrameCodec:
    tensors, config = load_checkpoint(path, expect_class="FrameCodec", device=device)
    codec = make_codec(CodecConfig(**config["codec"]), config["sigma_data"])
    codec.load_state_dict(tensors)
    return codec.to(device).eval()


# ---------------------------------------------------------------------------------------- stage 2
def build_model(episodes: Sequence[Episode], cfg: WorldModelConfig, codec: FrameCodec) -> LatentWorldModel:
    """A fresh LatentWorldModel sized to the episodes (dims and camera left None / empty in `cfg` are
    taken from them), holding a copy of the trained codec."""
    ep = episodes[0]
    data = {"action_dim": ep.actions.shape[1], "state_dim": ep.state.shape[1], "env_state_dim": ep.env_state.shape[1]}
    wrong = {k: (getattr(cfg, k), v) for k, v in data.items() if getattr(cfg, k) not in (None, v)}
    if wrong:
        raise ValueError(f"the model config's sizes disagree with the data's (config, data): {wrong}; leave them "
                         "unset to size the model from the data")
    camera = cfg.camera or ep.cameras[0]
    missing = [c for c in camera_names(camera) if c not in ep.obs]
    if missing:
        raise ValueError(f"--model.camera {camera!r}: {missing} not in the data, which has {ep.cameras}")
    if codec.cfg.cameras != len(camera_names(camera)):
        raise ValueError(f"the codec encodes {codec.cfg.cameras} camera(s) and --model.camera {camera!r} names "
                         f"{len(camera_names(camera))}; a codec (or warm start) made for one camera set serves that set only")
    if cfg.instruction_buckets is None:  # several tasks in one file set: the model reads which one
        data["instruction_buckets"] = 256 if len({e.task for e in episodes if e.task}) > 1 else 0
    cfg = replace(cfg, camera=camera, **data)
    model = LatentWorldModel(cfg, codec.cfg, state_stats(episodes))
    model.codec.load_state_dict(codec.state_dict())
    return model


def warm_start(model: LatentWorldModel, source: LatentWorldModel, name: str = "the source") -> str:
    """Copy into `model` every tensor of `source` (another task's world model, say) whose name and shape
    match, except the data's normalisation statistics, which stay `model`'s own; heads of another
    state size keep their fresh values. A model that sees more cameras than the source (its codec
    from add_camera.widened_codec, whose latent statistics it keeps) takes the source's frame-reading
    and -writing layers widened. Returns a line that says what was copied and what is fresh."""
    own, theirs = model.state_dict(), source.state_dict()
    wider = model.codec.cfg.cameras > source.codec.cfg.cameras
    stats = ("state_mean", "state_std", "env_state_mean", "env_state_std",
             *(("codec.latent_mean", "codec.latent_std") if wider else ()))
    match = {k: v.to(own[k].dtype) for k, v in theirs.items() if k in own and own[k].shape == v.shape and k not in stats}
    if wider:  # added cameras (add_camera.py): the whole-frame layers widen
        for k, v in theirs.items():
            if k in own and k not in match and not k.startswith("codec."):
                wide = widen(v, own[k].shape, source.codec.latent_channels, model.codec.latent_channels)
                if wide is not None:
                    match[k] = wide.to(own[k].dtype)
    first = "denoiser.conv_in.weight"  # a model with memory reads more input channels: the source's come first
    if first in theirs and first not in match and own[first].shape[0] == theirs[first].shape[0] and \
            own[first].shape[2:] == theirs[first].shape[2:] and own[first].shape[1] > theirs[first].shape[1]:
        weight = torch.zeros_like(own[first])  # the memory's channels start at zero: the source's outputs exactly
        weight[:, : theirs[first].shape[1]] = theirs[first]
        match[first] = weight
    if not any(k.startswith("denoiser.") for k in match):
        raise ValueError(f"{name} shares no denoiser weights with this model (another architecture); warm-start "
                         "from a model with the same channels, context, chunk and codec")
    model.load_state_dict(match, strict=False)
    fresh = sorted(k for k in own if k not in match and k not in stats)
    copied, total = sum(own[k].numel() for k in match), sum(v.numel() for v in own.values())
    return (f"warm start from {name}: {copied / 1e6:.2f} of {total / 1e6:.2f} M values copied; fresh: "
            f"{', '.join(fresh[:8]) + (f' and {len(fresh) - 8} more' if len(fresh) > 8 else '') or 'none'}")


def dynamics_batches(data: LatentWindows, cfg: WorldModelConfig, batch_size: int, moving_fraction: float,
                     seed: int, revisit_fraction: float = 0.0, history_chunks: int = 0) -> BatchSource:
    """Batches of latent windows; for objective 'chained' each also carries the real context 1 to
    cfg.self_forcing_chunks chunks before its windows, for 'cycle' the real start of a cycle as many
    chunks before them as the curriculum imagines at that step (objectives.cycle_chunks), for other
    objectives `history_chunks` chunks before them (0: none)."""

    def source(start: int):
        gen = torch.Generator().manual_seed(seed + start)
        step = start
        while True:
            idx = sample_windows(data, batch_size, moving_fraction, gen, revisit_fraction)
            chunks = history_chunks
            if cfg.objective == "chained":
                chunks = int(torch.randint(cfg.self_forcing_chunks, (1,), generator=gen)) + 1
            elif cfg.objective == "cycle":
                chunks = cycle_chunks(cfg, step)
            yield data.batch(idx, history_chunks=chunks)
            step += 1

    return source


def train_dynamics(trainer: Trainer, model: LatentWorldModel, episodes: Sequence[Episode], tcfg: TrainerConfig,
                   moving_fraction: float = 0.0, resume: bool = False, start_step: int = 0,
                   geometry: MemoryGeometry | None = None, revisit_fraction: float = 0.0) -> FitResult:
    """Train everything but the codec; checkpoints out/step_<N>/ and out/latest/ every save_every steps.
    `geometry`: the task's moving camera, for a model with memory (memory_frames > 0) or a
    revisit_fraction > 0 (sample_windows)."""
    model.to(trainer.device)
    model.codec.requires_grad_(False).eval()
    latents = encode_episodes(model.codec, episode_frames(episodes, model.cfg.camera))
    data = LatentWindows(episodes, latents, model.cfg.context, model.cfg.chunk, model.cfg.instruction_buckets,
                         model.cfg.memory_frames, geometry, model.codec_cfg.image_size, model.codec.padded_size,
                         model.codec if model.cfg.start_map else None, model.cfg.map_unseen)
    batches = dynamics_batches(data, model.cfg, tcfg.batch_size, moving_fraction, trainer.seed, revisit_fraction)
    extra = {"ema_decay": tcfg.ema_decay} if tcfg.ema_decay else {}
    return trainer.fit("dynamics", Objective(model, dynamics_loss), tcfg, batches,
                       export=lambda step: save_model(model, trainer.out, step, extra), resume=resume,
                       start_step=start_step, overwrite=start_step > 0)


def save_model(model: LatentWorldModel, out_dir: str | Path, step: int, extra: dict | None = None) -> Path:
    """Write out_dir/step_<step>/ and out_dir/latest/ (the model as it is; `extra` joins its config)."""
    config = {**model.config_dict(), "step": step, **(extra or {})}
    tensors = dict(model.state_dict())
    save_checkpoint(Path(out_dir) / f"step_{step}", tensors, config)
    return save_checkpoint(Path(out_dir) / "latest", tensors, config)


# ---------------------------------------------------------------------------------------- stage 3
FrameLabels = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(frames (M, S, S, 3) uint8, the environment states they stand for (M, E)) -> (environment states as
the frames show them (M, E), success as the frames show it (M,) bool)."""


def frame_labels(objects_xy_from_frames: Callable[[np.ndarray], np.ndarray], objects_xy: slice | tuple[slice, ...],
                 success_from_env_state: Callable[[np.ndarray], np.ndarray]) -> FrameLabels:
    """Labels from what a frame shows (a task probe's detector, object slices and success rule): each
    detected object's position replaces its `env_state` slice, success follows the task's rule, and a
    frame where the detector misses an object is not a success. The detector maps (M, S, S, 3) frames
    to (M, O, 2) for a tuple of O slices, or to (M, 2) for one slice."""
    single = isinstance(objects_xy, slice)
    slices = (objects_xy,) if single else tuple(objects_xy)

    def label(frames: np.ndarray, env_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xy = objects_xy_from_frames(frames)  # (M, O, 2) or (M, 2), NaN where not found
        xy = xy[:, None] if single else xy
        found = np.isfinite(xy).all(axis=2)  # (M, O)
        shown = env_state.copy()
        for o, sl in enumerate(slices):
            shown[found[:, o], sl] = xy[found[:, o], o]
        return shown, np.asarray(success_from_env_state(shown), bool) & found.all(axis=1)

    return label


def heads_loss(model: LatentWorldModel, batch: dict[str, torch.Tensor],
               pos_weight: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """The frame heads' losses on latents (B, C, s, s) and their targets in the batch."""
    out = model.heads(batch["latents"])
    losses = {
        "heads/state": F.mse_loss(out["state"], (batch["state"] - model.state_mean) / model.state_std),
        # data without environment_state (LIBERO) has nothing to fit there: the mean of no values is NaN
        "heads/env_state": F.mse_loss(out["env_state"], (batch["env_state"] - model.env_state_mean) / model.env_state_std)
        if out["env_state"].shape[-1] else None,
        "heads/success": F.binary_cross_entropy_with_logits(out["success_logit"], batch["success"],
                                                            pos_weight=pos_weight),
        "heads/reward": F.mse_loss(out["reward"], batch["reward"]),
    }
    losses = {k: v for k, v in losses.items() if v is not None}
    loss = sum(losses.values())
    return loss, {"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in losses.items()}}


def train_heads(trainer: Trainer, model: LatentWorldModel, episodes: Sequence[Episode], tcfg: TrainerConfig,
                cfg: HeadsConfig, labels: FrameLabels | None = None, step: int = 0,
                extra: dict | None = None, resume: bool = False,
                geometry: MemoryGeometry | None = None) -> dict[str, float]:
    """Fine-tune the frame heads alone on every real frame (with latent noise) and, for a
    `cfg.generated_fraction` of every batch, on frames the model generated itself, labelled by the
    real frames they stand for or, with `labels`, by what each frame shows. Rewrites out/latest/ and
    out/step_<step>/ (the dynamics' step; `extra` joins their config, `heads_steps` the heads' own
    step). `resume`: go on from the heads' train state (a pass that was interrupted on the same
    dynamics). `geometry`: the task's moving camera, for a model with memory (it generates with its
    memory, as in imagination). Returns the last step's losses."""
    torch.manual_seed(trainer.seed)
    model.to(trainer.device).eval()
    latents = torch.cat(encode_episodes(model.codec, episode_frames(episodes, model.cfg.camera)))  # (N, C, s, s)
    tgt = frame_targets(episodes)
    gen_lat, gen_idx = latents[:0], torch.zeros(0, dtype=torch.long)
    if cfg.generated_fraction > 0:
        gen_lat, gen_idx = generated_head_data(model, episodes, latents.to(trainer.device), cfg.generated_windows,
                                               cfg.generated_chunks, trainer.seed, geometry=geometry)
        gen_lat, gen_idx = gen_lat.cpu(), gen_idx.cpu()
    gen_env, gen_success = tgt["env_state"][gen_idx], tgt["success"][gen_idx]
    if labels is not None and len(gen_lat):
        frames = torch.cat([model.codec.decode(z.to(trainer.device)).cpu() for z in gen_lat.split(256)])
        env_np, success_np = labels(frames.permute(0, 2, 3, 1).numpy(), gen_env.numpy())
        gen_env, gen_success = torch.from_numpy(env_np.astype(np.float32)), torch.from_numpy(success_np.astype(np.float32))
    n_gen = int(round(tcfg.batch_size * cfg.generated_fraction)) if len(gen_lat) else 0
    n_pos = float(tgt["success"].sum())
    pos_weight = cfg.success_pos_weight or min((len(latents) - n_pos) / max(n_pos, 1.0), 100.0)

    def batches(start: int):
        g = torch.Generator().manual_seed(trainer.seed + start)
        while True:
            idx = torch.randint(len(latents), (tcfg.batch_size - n_gen,), generator=g)
            z = latents[idx]
            z = z + torch.rand(len(z), 1, 1, 1, generator=g) * cfg.latent_noise * torch.randn(z.shape, generator=g)
            env_t, success_t = tgt["env_state"][idx], tgt["success"][idx]
            if n_gen:
                pick = torch.randint(len(gen_lat), (n_gen,), generator=g)
                z, idx = torch.cat([z, gen_lat[pick]]), torch.cat([idx, gen_idx[pick]])
                env_t, success_t = torch.cat([env_t, gen_env[pick]]), torch.cat([success_t, gen_success[pick]])
            yield {"latents": z, "state": tgt["state"][idx], "env_state": env_t, "success": success_t,
                   "reward": tgt["reward"][idx]}

    model.requires_grad_(False)
    model.heads.requires_grad_(True)
    pos_weight_t = torch.tensor(pos_weight, device=trainer.device)
    objective = Objective(model, lambda m, b: heads_loss(m, b, pos_weight_t))
    try:
        result = trainer.fit("heads", objective, tcfg, batches, resume=resume, overwrite=not resume, log_offset=step,
                             export=lambda s: save_model(model, trainer.out, step, {**(extra or {}), "heads_steps": s}))
    finally:
        model.requires_grad_(True)
        model.codec.requires_grad_(False)
    return result.logs


# ---------------------------------------------------------------------------------------- stage 4
def train_distill(trainer: Trainer, student: LatentWorldModel, teacher: LatentWorldModel, episodes: Sequence[Episode],
                  tcfg: TrainerConfig, cfg: DistillConfig, moving_fraction: float = 0.0, resume: bool = False,
                  step: int = 0, extra: dict | None = None) -> FitResult:
    """Distil `teacher` into `student` (a copy of it, sampling `cfg.steps` steps by default from now on):
    the denoiser and its action conditioning train, the heads and inverse dynamics stay as they are
    (the heads pass that follows fits the heads to the student's frames). Checkpoints out/latest/ and
    out/step_<step>/ (the teacher's step) every save_every steps, `extra` joined to their config
    with the student's own step as `distill_steps`."""
    for m in (student, teacher):
        m.to(trainer.device).eval()
    student.cfg = replace(student.cfg, sampling_steps=cfg.steps)
    teacher.requires_grad_(False)
    student.requires_grad_(False)
    student.denoiser.requires_grad_(True)
    student.cond.requires_grad_(True)
    latents = encode_episodes(student.codec, episode_frames(episodes, student.cfg.camera))
    data = LatentWindows(episodes, latents, student.cfg.context, student.cfg.chunk, student.cfg.instruction_buckets)
    forward_only = replace(student.cfg, objective="noise", self_forcing=0.0)
    if cfg.own_contexts and cfg.own_chunks * student.cfg.chunk < student.cfg.context:
        raise ValueError(f"distill.own_chunks {cfg.own_chunks} x chunk {student.cfg.chunk} must reach the context "
                         f"({student.cfg.context} frames) for the student to imagine all of it")
    batches = dynamics_batches(data, forward_only, tcfg.batch_size, moving_fraction, trainer.seed,
                               history_chunks=cfg.own_chunks if cfg.own_contexts else 0)
    steps, teacher_steps = cfg.steps, cfg.teacher_steps or None
    objective = Objective(student, lambda m, b: distillation_loss(m, teacher, b, steps, teacher_steps, cfg.own_contexts))
    info = {**(extra or {}), **({"ema_decay": tcfg.ema_decay} if tcfg.ema_decay else {})}
    try:
        return trainer.fit("distill", objective, tcfg, batches, resume=resume,
                           export=lambda s: save_model(student, trainer.out, step, {**info, "distill_steps": s}))
    finally:
        student.requires_grad_(True)
        student.codec.requires_grad_(False)
