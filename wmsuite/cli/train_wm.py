"""`wmsuite train-wm`: train the latent video diffusion world model (codec, dynamics, then heads).

    wmsuite train-wm --data data/pushcube_mixed.hdf5 --out runs/wm-pushcube
    wmsuite train-wm --data ... --out runs/wm-pushcube --resume --dynamics.steps 15000 --model.prediction sample
    wmsuite train-wm --data ... --out runs/wm2 --codec-from runs/wm-pushcube/codec --model.channels 64 64
    wmsuite train-wm --data ... --out runs/wm-fast --stage distill --distill.teacher assets:wm/pushcube
    wmsuite train-wm --data data/pushtwocubes_train.hdf5 --out runs/wm-2c --init-from assets:wm/pushcube

The config holds the library's own dataclasses: `--model.*` is every WorldModelConfig field,
`--codec.*` every CodecConfig field, `--codec-train.*`, `--dynamics.*`, `--heads-train.*` and `--distill-train.*` the
trainer settings of each stage, `--heads.*` the heads pass, `--distill.*` the distillation. With --resume (or --stage heads) the
model and codec configs default to the checkpoint's in out/latest/; flags given override its
training fields, while its architecture cannot change.

Writes out/metrics.jsonl (and an offline wandb run with --wandb), out/codec/, the world-model
checkpoints out/step_<N>/ and out/latest/, and the trainer's resume state in out/train_state/.
out/run.json records the data's and a reused codec's content hashes and the seed: a run goes on
(--resume, or --stage heads) only with the same ones, a new run never writes over an old one
(--force-new moves it aside), and a killed run resumed ends with the weights of an uninterrupted one.
A warm start's (--init-from) hash is kept there too, as where the run began: later stages need not
repeat it.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Literal

import torch

from wmsuite.checkpoint import is_checkpoint, load_checkpoint
from wmsuite.cli.common import memory_geometry, recorded_env_id, seed_everything
from wmsuite.config import to_dict
from wmsuite.data import load_episodes
from wmsuite.logging import RunLogger
from wmsuite.runs import open_run
from wmsuite.specs import file_digest
from wmsuite.train import Trainer, TrainerConfig, dist
from wmsuite.world_models.config import (
    CodecConfig,
    DistillConfig,
    HeadsConfig,
    WorldModelConfig,
    camera_names,
)

# WorldModelConfig fields that shape the network or its inputs: a resumed run cannot change them.
ARCHITECTURE = ("camera", "context", "chunk", "action_dim", "state_dim", "env_state_dim", "instruction_buckets",
                "channels", "attention", "sigma_data", "residual")
DISTILLED = ("distilled_from", "teacher_steps", "distill_steps")
"""Config keys of a distilled student that its heads pass keeps."""


@dataclass
class TrainWMConfig:
    data: str = "data/pushcube_mixed.hdf5"
    """Training episodes: a robomimic-format HDF5 file (from `wmsuite collect`, or a Robomimic/LIBERO
    file), or a directory whose .hdf5 files are read together (a LIBERO suite, one file per task: the
    model then reads each episode's instruction, see --model.instruction-buckets)."""
    out: str = "runs/wm-pushcube"
    """Run directory (checkpoints, metrics.jsonl, train state)."""
    stage: Literal["all", "codec", "dynamics", "heads", "distill"] = "all"
    """'all': codec, dynamics, then heads; 'codec': the frame codec only; 'dynamics': the dynamics on an
    existing codec (--codec-from, or out/codec); 'heads': fine-tune the frame heads of out/latest alone
    (with --model.heads of another kind than the checkpoint's, its heads are replaced and trained anew);
    'distill': a few-step student of --distill.teacher into out/latest (the teacher's architecture and
    settings; --model.* flags do not apply), to be followed by a heads pass (--stage heads)."""
    resume: bool = False
    """Go on with the run in --out: the codec stage from its train state, the dynamics from theirs
    (or, where none is left, from out/latest with a fresh optimizer); a run killed before its first
    save starts over."""
    force_new: bool = False
    """Start over when --out holds another run (it is moved aside, not deleted)."""
    drop_bad: bool = False
    """Skip episodes with non-finite or malformed values (counted) instead of refusing the data."""
    codec_from: str = ""
    """An existing codec checkpoint directory to reuse (skips the codec stage)."""
    init_from: str = ""
    """A world model (directory, run or assets: name) to warm-start a new run from, e.g. another
    task's: the model and codec configs default to its (sizes from the data), and every weight
    whose name and shape match starts from its value; the rest (heads of another state size)
    start fresh. Its codec is reused."""
    env: str = ""
    """Task whose probe labels generated frames with --heads.labels detector (empty: the env id
    recorded in the data)."""
    moving_fraction: float = 0.0
    """Share of each dynamics batch drawn from the windows where an object moves; 0 samples all
    windows alike (contact is where the model errs most, but oversampling it did not help)."""
    revisit_fraction: float = 0.0
    """Share of each dynamics batch drawn from the windows whose chunk ends on a revisit frame (the
    camera back at a place it left long before: what a spatial memory is for, and a minority of
    windows). Needs a task whose camera moves with the agent; give a baseline without memory the same
    share, so that the two see the same windows."""
    device: str = "cpu"
    """Torch device ('cpu', 'cuda')."""
    seed: int = 0
    """Seed of initialisation and batch sampling."""
    wandb: bool = False
    """Also log to wandb (offline mode unless configured)."""
    model: WorldModelConfig = field(default_factory=WorldModelConfig)
    """The world model (the library's WorldModelConfig)."""
    codec: CodecConfig = field(default_factory=CodecConfig)
    """The frame codec (the library's CodecConfig)."""
    codec_train: TrainerConfig = field(default_factory=lambda: TrainerConfig(
        steps=3000, batch_size=32, lr=1e-3, weight_decay=0.0, grad_clip=0.0))
    """Trainer of the codec stage (a learned codec only: the pixel codec has nothing to train)."""
    dynamics: TrainerConfig = field(default_factory=lambda: TrainerConfig(steps=9000, batch_size=16, lr=5e-4))
    """Trainer of the dynamics stage (denoiser, conditioning, inverse dynamics and heads, jointly)."""
    heads_train: TrainerConfig = field(default_factory=lambda: TrainerConfig(
        steps=1500, batch_size=256, lr=1e-3, grad_clip=0.0, save_every=1500))
    """Trainer of the heads stage."""
    heads: HeadsConfig = field(default_factory=HeadsConfig)
    """What the heads stage trains on (the library's HeadsConfig)."""
    distill: DistillConfig = field(default_factory=DistillConfig)
    """The distill stage's teacher and student sampling steps (the library's DistillConfig)."""
    distill_train: TrainerConfig = field(default_factory=lambda: TrainerConfig(
        steps=2000, batch_size=16, lr=1e-4, warmup=100, save_every=250))
    """Trainer of the distill stage (a fine-tune of the teacher's weights: a small learning rate)."""

    def __post_init__(self) -> None:
        for name in ("moving_fraction", "revisit_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a share of the batch in [0, 1], got {getattr(self, name)}")
        if self.moving_fraction + self.revisit_fraction > 1.0:
            raise ValueError(f"moving_fraction + revisit_fraction is a share of the batch, at most 1; got "
                             f"{self.moving_fraction} + {self.revisit_fraction}")
        if self.init_from and (self.codec_from or self.stage not in ("all", "dynamics")):
            raise ValueError("--init-from starts a new run's dynamics (--stage all or dynamics) on the warm start's own "
                             f"codec; got --stage {self.stage}{' and --codec-from' if self.codec_from else ''}")


CONFIG = TrainWMConfig


def default(argv: list[str]) -> TrainWMConfig | None:
    """With --resume or --stage heads, the model and codec configs default to the checkpoint's in
    out/latest; with --init-from (a new run), to the warm start's, its sizes left to the data."""
    from wmsuite.world_models import model_configs, resolve_checkpoint

    latest = Path(_flag(argv, "--out") or TrainWMConfig.out) / "latest"
    if ("--resume" in argv or _flag(argv, "--stage") == "heads") and is_checkpoint(latest):
        model, codec = model_configs(json.loads((latest / "config.json").read_text()))
        return TrainWMConfig(model=model, codec=codec)
    if _flag(argv, "--init-from") and "--resume" not in argv:
        model, codec = model_configs(json.loads((resolve_checkpoint(_flag(argv, "--init-from")) / "config.json").read_text()))
        return TrainWMConfig(model=replace(model, action_dim=None, state_dim=None, env_state_dim=None,
                                           instruction_buckets=None), codec=codec)
    return None


def _flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def data_files(data: str) -> list[Path]:
    """--data as files: the file, or a directory's .hdf5 files in name order."""
    path = Path(data)
    if path.is_dir():
        files = sorted(path.glob("*.hdf5"))
        if not files:
            raise FileNotFoundError(f"--data {data} is a directory without .hdf5 files; name a file, or a directory "
                                    "of episode files (a LIBERO suite)")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"--data {data} does not exist; record episodes with `wmsuite collect`")
    return [path]


def run(cfg: TrainWMConfig) -> int:
    files = data_files(cfg.data)
    seed_everything(cfg.seed)
    dist.init(cfg.device)  # a torchrun / accelerate launch: join its process group
    out = Path(cfg.out)
    going_on = cfg.resume or cfg.stage in ("dynamics", "heads")  # stages that build on what --out holds
    identity = {"data": file_digest(cfg.data), "seed": cfg.seed, "drop_bad": cfg.drop_bad,
                "codec_from": file_digest(cfg.codec_from) if cfg.codec_from else ""}
    teacher = cfg.distill.teacher if cfg.stage == "distill" else _distilled_from(out)
    if teacher:  # a distillation run, and the heads passes that follow it; a missing teacher fails here
        identity["teacher"] = _model_digest(teacher, "--distill.teacher")
    # the warm start is where a run began, not a setting its later stages repeat: kept in the record's state
    state = {"init_from": cfg.init_from, "init_from_digest": _model_digest(cfg.init_from, "--init-from")} if cfg.init_from else None
    if cfg.stage == "distill" and cfg.distill.student:  # likewise where a student began; a missing one fails here
        state = {**(state or {}), "distill_student": cfg.distill.student,
                 "distill_student_digest": _model_digest(cfg.distill.student, "--distill.student")}
    record = dist.on_main(open_run, out, "train-wm", identity, force_new=cfg.force_new, adopt=going_on, state=state)
    done = {"all": is_checkpoint(out / "latest") or (out / "train_state").exists(), "heads": False,
            "codec": is_checkpoint(out / "codec"), "dynamics": is_checkpoint(out / "latest"),
            "distill": (out / "train_state" / "distill").exists()}[cfg.stage]
    if record["resumed"] and not cfg.resume and done:
        raise FileExistsError(f"{out} already holds this training run; pass --resume to go on with it, --force-new "
                              "to start over, or choose another --out")
    if cfg.stage in ("dynamics", "heads") or (cfg.resume and cfg.stage != "distill"):
        _check_resumable(cfg, out)  # before reading the data: a refused run costs nothing
    episodes = [ep for f in files for ep in load_episodes(f, drop_bad=cfg.drop_bad)]
    log = RunLogger(out, config=to_dict(cfg), use_wandb=cfg.wandb)
    trainer = Trainer(out, device=cfg.device, seed=cfg.seed, logger=log)
    began = time.time()
    from wmsuite.world_models.train import train_dynamics

    try:
        if cfg.stage == "heads":
            return _heads(cfg, trainer, episodes)
        if cfg.stage == "distill":
            return _distill(cfg, trainer, episodes)
        model = _dynamics_model(cfg, trainer, episodes, out)
        if model is None:  # --stage codec
            return 0
        geometry = None
        if model.cfg.memory_frames or cfg.revisit_fraction:
            geometry = memory_geometry(cfg.env or recorded_env_id(str(files[0]), episodes), model.cfg.camera,
                                       model.cfg.start_map)
        resume_state = cfg.resume and is_checkpoint(trainer.state_dir("dynamics"))
        before = json.loads((out / "latest" / "config.json").read_text())["step"] if is_checkpoint(out / "latest") else -1
        from_latest = cfg.resume and not resume_state and before >= 0
        start = before if from_latest else 0
        if from_latest:
            print(f"{out} has no dynamics train state: going on from {out / 'latest'} (step {start}) with a fresh optimizer")
        result = train_dynamics(trainer, model, episodes, cfg.dynamics, cfg.moving_fraction, resume=resume_state,
                                start_step=start, geometry=geometry, revisit_fraction=cfg.revisit_fraction)
        print(f"dynamics at step {result.steps} after {(time.time() - began) / 60:.1f} min -> {out / 'latest'}")
        if cfg.stage == "all":  # an interrupted heads pass goes on only when the dynamics did not move on
            _heads(cfg, trainer, episodes, resume=cfg.resume and result.steps == before)
    finally:
        log.close()
    return 0


def _check_resumable(cfg: TrainWMConfig, out: Path) -> None:
    """Refuse, before any compute, a resumed run whose model or codec config changes the architecture."""
    latest = out / "latest"
    if not is_checkpoint(latest):
        if cfg.stage == "heads" or (cfg.stage == "dynamics" and not cfg.codec_from and not cfg.init_from
                                    and not is_checkpoint(out / "codec")):
            raise FileNotFoundError(f"no checkpoint at {latest} to go on from; train one first (without --resume)")
        return  # --stage all/codec: nothing saved yet (a run killed early), so it starts over
    from wmsuite.world_models import model_configs

    model, codec = model_configs(json.loads((latest / "config.json").read_text()))
    changed = [f"--model.{k.replace('_', '-')} {getattr(cfg.model, k)} (checkpoint: {getattr(model, k)})"
               for k in ARCHITECTURE if getattr(cfg.model, k) != getattr(model, k)]
    if cfg.model.heads != model.heads and cfg.stage != "heads":
        changed.append(f"--model.heads {cfg.model.heads} (checkpoint: {model.heads}; replace heads with --stage heads)")
    changed += [f"--codec.{f.name} {getattr(cfg.codec, f.name)} (checkpoint: {getattr(codec, f.name)})"
                for f in fields(CodecConfig) if getattr(cfg.codec, f.name) != getattr(codec, f.name)]
    if changed:
        raise ValueError(f"{latest} was trained with another architecture; cannot change: {'; '.join(changed)}")


def _dynamics_model(cfg: TrainWMConfig, trainer: Trainer, episodes: list, out: Path):
    """The model the dynamics stage trains (None after --stage codec): a resumed run's from out/latest
    with the command line's training fields, else a fresh one on a trained or reused codec."""
    from wmsuite.world_models import LatentWorldModel, load_world_model
    from wmsuite.world_models.add_camera import added_cameras, widened_codec
    from wmsuite.world_models.data import episode_frames
    from wmsuite.world_models.train import build_model, load_codec, train_codec, warm_start

    if cfg.resume and cfg.stage != "codec" and is_checkpoint(out / "latest"):
        tensors, saved = load_checkpoint(out / "latest", expect_class="LatentWorldModel", device=cfg.device)
        model = LatentWorldModel(cfg.model, cfg.codec, saved["stats"])  # the saved weights, today's training fields
        model.load_state_dict(tensors)
        if cfg.model.objective == "cycle" and not saved["world_model"].get("p_backward"):
            print(f"warning: {out / 'latest'} was trained forward only, and the cycle curriculum counts from step 0, "
                  f"so its cycles start at once and play back through an untrained direction; train both "
                  f"directions first (--model.objective noise --model.p-backward 0.5)")
        return model
    codec_dir = Path(cfg.codec_from) if cfg.codec_from else out / "codec"
    if cfg.stage in ("all", "codec") and not cfg.codec_from and not cfg.init_from and not (cfg.resume and cfg.stage == "all"
                                                                     and is_checkpoint(codec_dir)):
        camera = cfg.model.camera or episodes[0].cameras[0]
        frames = torch.cat(episode_frames(episodes, camera))  # (N, 3 M, S, S)
        if frames.shape[-1] != cfg.codec.image_size:
            raise ValueError(f"the data's frames are {frames.shape[-1]} px; pass --codec.image-size {frames.shape[-1]}")
        codec_cfg = replace(cfg.codec, cameras=len(camera_names(camera)))  # one codec, each camera encoded alone
        train_codec(trainer, frames, codec_cfg, cfg.codec_train, cfg.model.sigma_data,
                    resume=cfg.resume and is_checkpoint(trainer.state_dir("codec")))
        print(f"codec -> {out / 'codec'}")
    if cfg.stage == "codec":
        return None
    source = load_world_model(cfg.init_from, device=cfg.device) if cfg.init_from else None
    codec = source.codec if source else load_codec(codec_dir, cfg.device)
    if source and cfg.model.camera and added_cameras(source.cfg.camera, cfg.model.camera):
        if cfg.model.memory_frames:
            raise ValueError("a warm start that adds cameras cannot also add a spatial memory; add one, then the other")
        frames = torch.cat(episode_frames(episodes, cfg.model.camera))  # (N, 3 M, S, S): the new cameras' statistics
        codec = widened_codec(source.codec, len(camera_names(cfg.model.camera)), frames)
        print(f"adding cameras to {cfg.init_from}: {source.cfg.camera} -> {cfg.model.camera}")
    elif source and cfg.model.camera and camera_names(cfg.model.camera) != camera_names(source.cfg.camera):
        print(f"note: {cfg.init_from} saw {source.cfg.camera!r}; its weights and codec statistics now read "
              f"{cfg.model.camera!r} as they read their own (a plain warm start)")
    model = build_model(episodes, cfg.model, codec)
    print(f"world model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters; {asdict(model.cfg)}")
    if source:
        print(warm_start(model, source, cfg.init_from))
    return model


def _heads(cfg: TrainWMConfig, trainer: Trainer, episodes: list, resume: bool = False) -> int:
    from wmsuite.world_models import load_world_model
    from wmsuite.world_models.codec import split_cameras
    from wmsuite.world_models.train import frame_labels, train_heads

    latest = Path(cfg.out) / "latest"
    saved = json.loads((latest / "config.json").read_text())
    state = trainer.state_dir("heads")
    resume = resume and is_checkpoint(state)
    if resume and load_checkpoint(state)[1]["step"] >= cfg.heads_train.steps and saved.get("heads_steps") == cfg.heads_train.steps:
        print(f"heads: already trained for {cfg.heads_train.steps} steps on these dynamics; nothing to do")
        return 0
    # the command line's sampling steps become the model's: the heads learn from frames sampled that way
    model = load_world_model(latest, device=cfg.device, sampling_steps=cfg.model.sampling_steps)
    if cfg.model.heads != model.cfg.heads:
        print(f"replacing the {model.cfg.heads!r} frame heads of {latest} by new {cfg.model.heads!r} heads "
              "(the dynamics train state, which holds the old heads, is dropped)")
        model.replace_heads(cfg.model.heads)
        trainer.discard_state("dynamics")
    labels = None
    if cfg.heads.labels == "detector":
        from wmsuite.envs.probes import get_probe

        probe = get_probe(cfg.env or recorded_env_id(str(data_files(cfg.data)[0]), episodes))
        if probe.object_xy_from_frames is None:
            raise ValueError(f"{probe.env_id} has no frame detector; use --heads.labels real")
        camera, detect = model.cfg.camera, probe.objects_xy_from_frames
        if probe.camera not in camera_names(camera):
            raise ValueError(f"{probe.env_id}'s detector reads camera {probe.camera!r}, which the world model "
                             f"({camera!r}) does not generate; use --heads.labels real")
        labels = frame_labels(lambda frames: detect(split_cameras(frames, camera)[probe.camera]), probe.detected_xy,
                              probe.success_from_env_state)
    geometry = None
    if model.cfg.memory_frames:
        geometry = memory_geometry(cfg.env or recorded_env_id(str(data_files(cfg.data)[0]), episodes), model.cfg.camera,
                                   model.cfg.start_map)
    began = time.time()
    logs = train_heads(trainer, model, episodes, cfg.heads_train, cfg.heads, labels, step=int(saved["step"]),
                       extra={k: saved[k] for k in ("ema_decay", *DISTILLED) if k in saved}, resume=resume,
                       geometry=geometry)
    print(f"heads fine-tuned for {cfg.heads_train.steps} steps in {(time.time() - began) / 60:.1f} min: {logs}")
    return 0


def _distilled_from(out: Path) -> str:
    """The teacher of the student in out/latest ('' when it is no distilled student)."""
    latest = out / "latest"
    return json.loads((latest / "config.json").read_text()).get("distilled_from", "") if is_checkpoint(latest) else ""


def _model_digest(path: str, flag: str) -> str:
    """The content hash of the world model `path` that `flag` names; a missing one fails here."""
    from wmsuite.specs import checkpoint_dir

    found = checkpoint_dir(path)
    if found is None:
        raise FileNotFoundError(f"{flag} {path} is not a world-model checkpoint or run directory; name a trained "
                                "one (e.g. assets:wm/pushcube)")
    return file_digest(found)


def _distill(cfg: TrainWMConfig, trainer: Trainer, episodes: list) -> int:
    from wmsuite.world_models import load_world_model, resolve_checkpoint
    from wmsuite.world_models.train import train_distill

    teacher = load_world_model(cfg.distill.teacher, device=cfg.device)
    student = load_world_model(cfg.distill.student, device=cfg.device) if cfg.distill.student else copy.deepcopy(teacher)
    saved = json.loads((resolve_checkpoint(cfg.distill.teacher) / "config.json").read_text())
    resume = cfg.resume and is_checkpoint(trainer.state_dir("distill"))
    began = time.time()
    extra = {"distilled_from": cfg.distill.teacher, "teacher_steps": cfg.distill.teacher_steps or teacher.cfg.sampling_steps}
    result = train_distill(trainer, student, teacher, episodes, cfg.distill_train, cfg.distill, cfg.moving_fraction,
                           resume=resume, step=int(saved.get("step", 0)), extra=extra)
    print(f"distilled a {cfg.distill.steps}-step student for {result.steps} steps in {(time.time() - began) / 60:.1f} "
          f"min -> {Path(cfg.out) / 'latest'}; next: its heads pass (--stage heads --model.sampling-steps "
          f"{cfg.distill.steps})")
    return 0
