"""Training the latent world model in two stages: the frame codec, then the dynamics (and heads).

    codec = train_codec(frames, codec_cfg, TrainSettings(...), out_dir)      # stage 1
    model = build_model(episodes, wm_cfg, codec_cfg, codec_state)
    train_dynamics(model, episodes, TrainSettings(...), out_dir)             # stage 2

Stage 2 encodes every frame of every episode once with the (frozen) codec and samples windows of
latents, so a training step never touches pixels. Windows come from the core `WindowDataset`
(context K, chunk H, future H+K-1: the extra K-1 future frames are the context of backward windows);
its indices and padding rules are reused and the latent frames are gathered beside it.

Checkpoints (safetensors + JSON, `wmsuite.checkpoint`): `out/codec/` (class "FrameCodec") and
`out/step_<N>/` + `out/latest/` (class "LatentWorldModel": the whole model, codec included, and the
optimizer state in `out/latest/optimizer/` for --resume). With an exponential moving average of the
weights (`TrainSettings.ema_decay`), the checkpoints hold the averaged weights, the ones to evaluate,
and `out/latest/online/` the raw weights that the optimizer state belongs to.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.types import Episode
from wmsuite.world_models.codec import FrameCodec, codec_loss, make_codec, reconstruction_psnr
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.model import LatentWorldModel


@dataclass
class TrainSettings:
    steps: int = 1000
    """Optimizer steps (the run stops earlier if max_minutes runs out)."""
    batch_size: int = 32
    """Windows (or frames, for the codec) per step."""
    lr: float = 3e-4
    """AdamW learning rate (cosine decay to 10% after a 50-step warm-up)."""
    schedule_from: int = 0
    """Step at which the learning-rate schedule (warm-up, then cosine to 10% at `steps`) begins. 0: one
    schedule over the whole run; a resumed run that sets its start step here restarts it (a warm
    restart), so a fine-tune ends annealed as the first run did."""
    max_minutes: float = 0.0
    """Wall-clock budget; 0 for none. The run saves and stops when it is spent."""
    save_every: int = 200
    """Steps between checkpoints."""
    log_every: int = 10
    """Steps between metric rows."""
    seed: int = 0
    """Seed of parameter init and sampling."""
    device: str = "cpu"
    """Torch device."""
    moving_fraction: float = 0.0
    """Dynamics only: share of each batch drawn from the windows whose environment_state changes over
    the chunk (`LatentWindows.moving`: an object is pushed), the rest uniformly from all windows; 0
    samples every window alike. Contact is where the model errs most, and 36% of the PushCube training
    windows; but 0.5 measured worse than uniform sampling in a 14,000-step fine-tune (cube error at
    horizon 16 3.0 vs 2.3 cm; docs/world_models.md), so the default stays 0."""
    ema_decay: float = 0.0
    """Dynamics only: decay of an exponential moving average of the trained weights (0: off; 0.999
    averages over ~1,000 steps). With it on, every checkpoint's model.safetensors holds the averaged
    weights (what evaluation, export and the heads stage use) and latest/online/ the raw weights that
    --resume goes on training. The average starts from the weights the run starts with."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "save_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or self.max_minutes < 0:
            raise ValueError(f"lr must be > 0 and max_minutes >= 0, got {self.lr}, {self.max_minutes}")
        if not 0 <= self.schedule_from < self.steps:
            raise ValueError(f"schedule_from must be in [0, steps={self.steps}), got {self.schedule_from}")
        if not 0.0 <= self.moving_fraction <= 1.0:
            raise ValueError(f"moving_fraction is a share of the batch in [0, 1], got {self.moving_fraction}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1) (0: off), got {self.ema_decay}")


Log = Callable[[dict[str, float], int], None]


def episode_frames(episodes: Sequence[Episode], camera: str) -> list[torch.Tensor]:
    """Per episode, its camera's frames as (T+1, 3, S, S) uint8 tensors."""
    out = []
    for i, ep in enumerate(episodes):
        if camera not in ep.obs:
            raise ValueError(f"episode {i} has no camera {camera!r}; it has {ep.cameras}")
        out.append(torch.from_numpy(np.ascontiguousarray(ep.obs[camera].transpose(0, 3, 1, 2))))
    return out


def lr_at(step: int, total: int, lr: float, begin: int = 0) -> float:
    """The learning rate at `step` of a schedule that begins at step `begin` and ends at `total`: a
    50-step linear warm-up, then a cosine from `lr` down to 10% of it."""
    step, total = step - begin, total - begin
    if step < 50:
        return lr * (step + 1) / 50
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(total, 1)))))


# ---------------------------------------------------------------------------------------- stage 1
def train_codec(frames: torch.Tensor, cfg: CodecConfig, st: TrainSettings, out_dir: str | Path,
                log: Log | None = None, sigma_data: float = 0.5) -> FrameCodec:
    """Train the codec on frames (N, 3, S, S) uint8, fit its latent statistics, save `out_dir/codec`."""
    torch.manual_seed(st.seed)
    codec = make_codec(cfg, sigma_data).to(st.device)
    gen = torch.Generator().manual_seed(st.seed)
    held = frames[torch.randperm(len(frames), generator=gen)[:512]]
    if cfg.kind == "pixel":  # nothing to train: fit the latent statistics only
        codec.fit_latent_stats(frames[torch.randperm(len(frames), generator=gen)[:4096]].to(st.device))
        info = {"reconstruction_psnr": min(reconstruction_psnr(codec, held.to(st.device)), 99.0), "steps": 0}
        save_codec(codec, Path(out_dir) / "codec", info)
        return codec
    opt = torch.optim.AdamW(codec.parameters(), lr=st.lr, weight_decay=0.0)
    start = time.time()
    bar = tqdm(range(st.steps), desc="codec", unit="step")
    step = 0
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, st.steps, st.lr, st.schedule_from)
        idx = torch.randint(len(frames), (st.batch_size,), generator=gen)
        batch = frames[idx].to(st.device)
        # Random flips are not used: the camera is fixed and the scene has a handedness.
        loss, logs = codec_loss(codec, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % st.log_every == 0 or step == st.steps - 1:
            bar.set_postfix(mse=f"{logs['codec/mse']:.4f}")
            if log:
                log({**logs, "codec/lr": opt.param_groups[0]["lr"]}, step)
        if st.max_minutes and time.time() - start > 60 * st.max_minutes:
            break
    bar.close()
    codec.eval()
    codec.fit_latent_stats(frames[torch.randperm(len(frames), generator=gen)[:4096]].to(st.device))
    psnr = reconstruction_psnr(codec, held.to(st.device))
    info = {"reconstruction_psnr": psnr, "steps": step + 1, "minutes": (time.time() - start) / 60}
    if log:
        log({"codec/reconstruction_psnr": psnr}, step + 1)
    save_codec(codec, Path(out_dir) / "codec", info)
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
def state_stats(episodes: Sequence[Episode]) -> dict[str, list[float]]:
    """Mean/std of agent_pos and environment_state over every step of the episodes."""
    state = np.concatenate([ep.state for ep in episodes])
    env = np.concatenate([ep.env_state for ep in episodes])
    return {"state_mean": state.mean(0).tolist(), "state_std": state.std(0).tolist(),
            "env_state_mean": env.mean(0).tolist(), "env_state_std": env.std(0).tolist()}


MOVING_THRESHOLD = 0.01
"""A window is `moving` when |environment_state[t + H] - environment_state[t]| exceeds this (1 cm of
cube travel for PushCube's metres; the yaw features are unitless)."""


class LatentWindows:
    """Training windows over latents: the core WindowDataset's items, frames replaced by latents."""

    def __init__(self, episodes: Sequence[Episode], latents: list[torch.Tensor], context: int, chunk: int) -> None:
        self.k, self.h = context, chunk
        self.windows = WindowDataset(episodes, WindowConfig(context=context, chunk=chunk, future=chunk + context - 1),
                                     cameras=[])
        self.latents = latents  # per episode (T+1, C, s, s)
        self.actions = [torch.from_numpy(np.asarray(ep.actions, np.float32)) for ep in episodes]  # (T, A)

    @functools.cached_property
    def moving(self) -> torch.Tensor:
        """Indices of the windows whose environment_state changes by more than MOVING_THRESHOLD over
        the chunk (computed on first use: only --moving-fraction needs it)."""
        eps = self.windows.episodes
        change = [np.linalg.norm(eps[e].env_state[min(t + self.h, eps[e].length)] - eps[e].env_state[t])
                  for e, t in self.windows.index]
        return torch.from_numpy(np.flatnonzero(np.asarray(change) > MOVING_THRESHOLD))

    def __len__(self) -> int:
        return len(self.windows)

    def batch(self, idx: Sequence[int], device: str, history_chunks: int = 0) -> dict[str, torch.Tensor]:
        """The windows `idx`; with `history_chunks` R > 0 also the real context R chunks before each
        window and the R*H actions from there to the window (`history*`, for self forcing)."""
        items = [self.windows[int(i)] for i in idx]
        ctx, fut, hist, hist_act, hist_valid = [], [], [], [], []
        span = history_chunks * self.h
        for it in items:
            e = int(it["episode_index"])
            lat = self.latents[e]
            t, n = int(it["t"]), len(lat)
            ctx.append(lat[torch.arange(t - self.k + 1, t + 1).clamp(0, n - 1)])
            fut.append(lat[torch.arange(t + 1, t + self.h + self.k).clamp(0, n - 1)])
            if span:
                t0 = max(t - span, 0)
                hist.append(lat[torch.arange(t0 - self.k + 1, t0 + 1).clamp(0, n - 1)])
                hist_valid.append(t >= span)
                hist_act.append(self.actions[e][t0 : t0 + span] if t >= span
                                else torch.zeros(span, self.actions[e].shape[1]))
        keys = ("actions", "action_is_pad", "future_is_pad", "future_state", "future_env_state",
                "reached_success", "rewards")
        out = {k: torch.stack([it[k] for it in items]) for k in keys}
        out["future_state"], out["future_env_state"] = out["future_state"][:, : self.h], out["future_env_state"][:, : self.h]
        out["context"], out["future"] = torch.stack(ctx), torch.stack(fut)
        if span:
            out.update(history=torch.stack(hist), history_actions=torch.stack(hist_act),
                       history_valid=torch.tensor(hist_valid))
        return {k: v.to(device) for k, v in out.items()}


@torch.no_grad()
def encode_episodes(codec: FrameCodec, frames: list[torch.Tensor], device: str, batch: int = 256) -> list[torch.Tensor]:
    """Per episode (T+1, 3, S, S) uint8 -> (T+1, C, s, s) latents (on `device`)."""
    out = []
    for f in tqdm(frames, desc="encode", unit="ep", leave=False):
        out.append(torch.cat([codec.encode(f[i : i + batch].to(device)) for i in range(0, len(f), batch)]))
    return out


def build_model(episodes: Sequence[Episode], cfg: WorldModelConfig, codec: FrameCodec) -> LatentWorldModel:
    """A fresh LatentWorldModel sized to the episodes, holding a copy of the trained codec."""
    ep = episodes[0]
    if (ep.actions.shape[1], ep.state.shape[1], ep.env_state.shape[1]) != (cfg.action_dim, cfg.state_dim,
                                                                           cfg.env_state_dim):
        raise ValueError(f"the data has action/state/env_state sizes {ep.actions.shape[1]}/{ep.state.shape[1]}/"
                         f"{ep.env_state.shape[1]}, the config says {cfg.action_dim}/{cfg.state_dim}/"
                         f"{cfg.env_state_dim}")
    model = LatentWorldModel(cfg, codec.cfg, state_stats(episodes))
    model.codec.load_state_dict(codec.state_dict())
    return model


def train_dynamics(model: LatentWorldModel, episodes: Sequence[Episode], st: TrainSettings, out_dir: str | Path,
                   log: Log | None = None, start_step: int = 0, optimizer_state: dict | None = None,
                   ema_state: dict[str, torch.Tensor] | None = None) -> int:
    """Train everything but the codec; checkpoints every `save_every` steps. Returns the last step.

    With st.ema_decay > 0 the checkpoints hold an exponential moving average of the weights, which
    starts from `ema_state` (a resumed run's averaged state dict) or else from the model's weights."""
    out_dir = Path(out_dir)
    torch.manual_seed(st.seed + start_step)
    model.to(st.device).train()
    model.codec.requires_grad_(False).eval()
    latents = encode_episodes(model.codec, episode_frames(episodes, model.cfg.camera), st.device)
    data = LatentWindows(episodes, latents, model.cfg.context, model.cfg.chunk)
    params = [p for n, p in model.named_parameters() if not n.startswith("codec.")]
    opt = torch.optim.AdamW(params, lr=st.lr, weight_decay=1e-4)
    if optimizer_state is not None:
        opt.load_state_dict(optimizer_state)
    ema = WeightAverage(model, st.ema_decay, ema_state) if st.ema_decay > 0 else None
    gen = torch.Generator().manual_seed(st.seed + start_step)
    start = time.time()
    step = start_step
    bar = tqdm(range(start_step, st.steps), desc="dynamics", unit="step", initial=start_step, total=st.steps)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, st.steps, st.lr, st.schedule_from)
        idx = sample_windows(data, st.batch_size, st.moving_fraction, gen)
        chunks = 0  # self forcing: each batch rolls 1 to self_forcing_chunks chunks before its windows
        if model.cfg.self_forcing > 0:
            chunks = int(torch.randint(model.cfg.self_forcing_chunks, (1,), generator=gen)) + 1
        batch = data.batch(idx, st.device, history_chunks=chunks)
        loss, logs = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if ema is not None:
            ema.update(model)
        if step % st.log_every == 0:
            bar.set_postfix(loss=f"{logs['loss']:.3f}", diff=f"{logs['diffusion']:.3f}")
            if log:
                log({**logs, "lr": opt.param_groups[0]["lr"]}, step)
        out_of_time = bool(st.max_minutes) and time.time() - start > 60 * st.max_minutes
        if (step + 1) % st.save_every == 0 or step + 1 == st.steps or out_of_time:
            save_model(model, out_dir, step + 1, opt, minutes=(time.time() - start) / 60, ema=ema)
        if out_of_time:
            break
    bar.close()
    return step + 1


def sample_windows(data: LatentWindows, batch_size: int, moving_fraction: float,
                   gen: torch.Generator) -> list[int]:
    """Window indices of one batch: round(moving_fraction * B) of them from `data.moving`, the rest
    uniform over all windows (with 0, exactly the draw of plain uniform sampling)."""
    n_moving = round(moving_fraction * batch_size)
    if n_moving and not len(data.moving):
        raise ValueError("moving_fraction > 0 but no training window moves an object (environment_state never "
                         f"changes by more than {MOVING_THRESHOLD} over a chunk); use moving_fraction 0")
    idx = torch.randint(len(data), (batch_size - n_moving,), generator=gen)
    if n_moving:
        idx = torch.cat([data.moving[torch.randint(len(data.moving), (n_moving,), generator=gen)], idx])
    return idx.tolist()


class WeightAverage:
    """An exponential moving average of a model's state: avg <- decay * avg + (1 - decay) * weights
    after every optimizer step, for the trained floating-point tensors (the frozen codec and integer
    buffers are copied as they are when saved)."""

    def __init__(self, model: torch.nn.Module, decay: float, state: dict[str, torch.Tensor] | None = None) -> None:
        self.decay = decay
        source = state if state is not None else model.state_dict()
        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        missing = trained - set(source)
        if missing:
            raise ValueError(f"the averaged weights lack {sorted(missing)[:3]}...; resume without them or start a new run")
        device = next(model.parameters()).device
        self.average = {n: source[n].detach().to(device=device, dtype=torch.float32).clone() for n in sorted(trained)}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        params = dict(model.named_parameters())
        names = list(self.average)
        torch._foreach_lerp_([self.average[n] for n in names], [params[n].detach().float() for n in names],
                             1.0 - self.decay)

    def state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The model's state dict with its trained tensors replaced by their averages."""
        state = dict(model.state_dict())
        state.update({n: a.to(state[n].dtype) for n, a in self.average.items()})
        return state


def save_model(model: LatentWorldModel, out_dir: Path, step: int, opt: torch.optim.Optimizer | None = None,
               minutes: float = 0.0, ema: WeightAverage | None = None, extra: dict | None = None) -> Path:
    """Write out_dir/step_<step>/ and out_dir/latest/ (with the optimizer state for --resume). With
    `ema`, both hold the averaged weights and latest/online/ the raw ones the optimizer state is of.
    `extra` goes into the config as it is."""
    config = {**model.config_dict(), "step": step, "train_minutes_this_session": minutes, **(extra or {})}
    raw = dict(model.state_dict())
    tensors = raw if ema is None else ema.state_dict(model)
    if ema is not None:
        config["ema_decay"] = ema.decay
    save_checkpoint(out_dir / f"step_{step}", tensors, config)
    latest = save_checkpoint(out_dir / "latest", tensors, config)
    if opt is not None:
        flat, meta = _flatten_optimizer(opt.state_dict())
        save_checkpoint(latest / "optimizer", flat, {"class": "AdamWState", "meta": meta})
    if ema is not None:
        save_checkpoint(latest / ONLINE, raw, {**config, "ema_decay": 0.0})
    return latest


ONLINE = "online"  # latest/online/: the raw weights of a run whose checkpoints hold averaged ones


def _flatten_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {}
    meta = {"param_groups": state["param_groups"], "state": {}}
    for pid, entry in state["state"].items():
        meta["state"][str(pid)] = {}
        for key, value in entry.items():
            if torch.is_tensor(value):
                tensors[f"{pid}.{key}"] = value
                meta["state"][str(pid)][key] = None
            else:
                meta["state"][str(pid)][key] = value
    return tensors, json.loads(json.dumps(meta))


def load_optimizer_state(path: Path) -> dict:
    tensors, config = load_checkpoint(path, expect_class="AdamWState")
    meta = config["meta"]
    state = {int(pid): {k: tensors[f"{pid}.{k}"] if v is None else v for k, v in entry.items()}
             for pid, entry in meta["state"].items()}
    return {"state": state, "param_groups": meta["param_groups"]}


# ---------------------------------------------------------------------------------------- stage 3
def frame_targets(episodes: Sequence[Episode]) -> dict[str, torch.Tensor]:
    """Per-frame head targets over all episodes: state (N, D), env_state (N, E), success (N,) (the last
    frame of a successful episode: episodes end on success), reward (N,) (of the action leading there)."""
    success, reward = [], []
    for ep in episodes:
        s = np.zeros(ep.length + 1, np.float32)
        s[-1] = float(ep.success)
        success.append(s)
        reward.append(np.concatenate([[0.0], ep.rewards]).astype(np.float32))
    return {"state": torch.from_numpy(np.concatenate([ep.state for ep in episodes])),
            "env_state": torch.from_numpy(np.concatenate([ep.env_state for ep in episodes])),
            "success": torch.from_numpy(np.concatenate(success)), "reward": torch.from_numpy(np.concatenate(reward))}


FrameLabels = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(frames (M, S, S, 3) uint8, the environment states they stand for (M, E)) -> (environment states as
the frames show them (M, E), success as the frames show it (M,) bool)."""


def detector_labels(detect_xy: Callable[[np.ndarray], np.ndarray],
                    success_rule: Callable[[np.ndarray], np.ndarray]) -> FrameLabels:
    """Frame labels from a task's object detector, for tasks whose environment state starts with the
    object's (x, y) (PushCube): the detected position replaces it, success follows the task's rule,
    and a frame where the detector finds no object is not a success."""

    def label(frames: np.ndarray, env_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xy = detect_xy(frames)  # (M, 2), NaN where not found
        found = np.isfinite(xy).all(axis=1)
        shown = env_state.copy()
        shown[found, :2] = xy[found]
        return shown, np.asarray(success_rule(shown), bool) & found

    return label


@torch.no_grad()
def generated_head_data(model: LatentWorldModel, episodes: Sequence[Episode], latents: torch.Tensor,
                        windows: int, chunks: int, seed: int = 0, batch: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames the world model generates, paired with the index of the real frame each stands for.

    From `windows` random start frames (the start frame repeated as context, as a rollout from a reset
    begins, or the K real frames before it), roll the model open-loop for up to `chunks` chunks with
    the episode's true actions. latents: every real frame of every episode, concatenated (N, C, s, s).
    Returns generated latents (M, C, s, s) and their real frame indices into `latents` (M,).
    """
    k, h = model.cfg.context, model.cfg.chunk
    offsets = np.cumsum([0] + [ep.length + 1 for ep in episodes])
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=latents.device).manual_seed(seed)
    eps = rng.integers(len(episodes), size=windows)
    starts = np.array([rng.integers(0, max(episodes[e].length - h + 1, 1)) for e in eps])
    single = rng.random(windows) < 0.5
    out_lat, out_idx = [], []
    for i in tqdm(range(0, windows, batch), desc="heads: generate", unit="batch", leave=False):
        e, t0, one = eps[i : i + batch], starts[i : i + batch], single[i : i + batch]
        ctx_idx = np.stack([offsets[a] + (np.full(k, t) if o else np.clip(np.arange(t - k + 1, t + 1), 0, None))
                            for a, t, o in zip(e, t0, one)])  # (b, K) rows of `latents`
        context = latents[torch.from_numpy(ctx_idx).to(latents.device)]  # (b, K, C, s, s)
        for c in range(chunks):
            t = t0 + c * h  # first action of this chunk
            alive = np.array([tt + h <= episodes[a].length for a, tt in zip(e, t)])
            if not alive.any():
                break
            act = np.zeros((len(e), h, model.cfg.action_dim), np.float32)
            for j, (a, tt) in enumerate(zip(e, t)):
                if alive[j]:
                    act[j] = episodes[a].actions[tt : tt + h]
            lat = model.generate(context, torch.from_numpy(act).to(latents.device), generator=gen)  # (b, H, C, s, s)
            rows = np.flatnonzero(alive)
            out_lat.append(lat[torch.from_numpy(rows).to(latents.device)].flatten(0, 1).cpu())
            out_idx.append(torch.from_numpy((offsets[e[rows]] + t[rows])[:, None] + np.arange(1, h + 1)).flatten())
            context = torch.cat([context, lat], dim=1)[:, -k:]
    return torch.cat(out_lat).to(latents.device), torch.cat(out_idx).to(latents.device)


def train_heads(model: LatentWorldModel, episodes: Sequence[Episode], st: TrainSettings,
                log: Log | None = None, latent_noise: float = 0.1, generated_fraction: float = 0.5,
                generated_windows: int = 2048, generated_chunks: int = 4,
                frame_labels: FrameLabels | None = None, success_pos_weight: float | None = None) -> dict[str, float]:
    """Fine-tune the frame heads alone on every real frame.

    The joint stage sees success frames rarely (a few % of windows) and trains the heads on one frame
    per window; this pass sees every frame and adds latent noise of std U(0, latent_noise). A `generated_fraction` of every batch is frames the model itself generated
    (open-loop rollouts of up to `generated_chunks` chunks from `generated_windows` random starts),
    labelled with the real frames they stand for: measured, heads trained on real frames alone read
    success into blurred, drifted imagined frames whose cube is nowhere near the goal. With
    `frame_labels` (a task's frame detector, see `detector_labels`), a generated frame's environment
    state and success are instead what the frame itself shows, so the heads judge the imagined scene
    rather than guess the real one. `success_pos_weight` weighs success frames in the success loss
    (None: n_neg / n_pos, capped at 100, 84x on the PushCube data, which moves p > 0.5 down to a true probability of ~1%;
    `train-wm` passes 1, a calibrated head). Returns final training figures.
    """
    torch.manual_seed(st.seed)
    model.to(st.device)
    latents = torch.cat(encode_episodes(model.codec, episode_frames(episodes, model.cfg.camera), st.device))
    tgt = {k: v.to(st.device) for k, v in frame_targets(episodes).items()}
    gen_lat, gen_idx = (generated_head_data(model, episodes, latents, generated_windows, generated_chunks, st.seed)
                        if generated_fraction > 0 else (latents[:0], torch.zeros(0, dtype=torch.long)))
    gen_env, gen_success = tgt["env_state"][gen_idx], tgt["success"][gen_idx]
    if frame_labels is not None and len(gen_lat):
        frames = torch.cat([model.codec.decode(z) for z in gen_lat.split(256)]).permute(0, 2, 3, 1).cpu().numpy()
        env_np, success_np = frame_labels(frames, gen_env.cpu().numpy())
        gen_env = torch.from_numpy(env_np.astype(np.float32)).to(st.device)
        gen_success = torch.from_numpy(success_np.astype(np.float32)).to(st.device)
    n_gen = int(round(st.batch_size * generated_fraction)) if len(gen_lat) else 0
    n_pos = float(tgt["success"].sum())
    if success_pos_weight is None:
        success_pos_weight = min((len(latents) - n_pos) / max(n_pos, 1.0), 100.0)
    pos_weight = torch.tensor(success_pos_weight, device=st.device)
    opt = torch.optim.AdamW(model.heads.parameters(), lr=st.lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(st.seed)
    start, logs = time.time(), {}
    bar = tqdm(range(st.steps), desc="heads", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, st.steps, st.lr, st.schedule_from)
        idx = torch.randint(len(latents), (st.batch_size - n_gen,), generator=gen).to(st.device)
        z = latents[idx]
        z = z + torch.rand(len(z), 1, 1, 1, device=st.device) * latent_noise * torch.randn_like(z)
        env_t, success_t = tgt["env_state"][idx], tgt["success"][idx]
        if n_gen:
            pick = torch.randint(len(gen_lat), (n_gen,), generator=gen).to(st.device)
            z, idx = torch.cat([z, gen_lat[pick]]), torch.cat([idx, gen_idx[pick]])
            env_t, success_t = torch.cat([env_t, gen_env[pick]]), torch.cat([success_t, gen_success[pick]])
        out = model.heads(z)
        state_t = (tgt["state"][idx] - model.state_mean) / model.state_std
        env_t = (env_t - model.env_state_mean) / model.env_state_std
        losses = {
            "heads/state": torch.nn.functional.mse_loss(out["state"], state_t),
            "heads/env_state": torch.nn.functional.mse_loss(out["env_state"], env_t),
            "heads/success": torch.nn.functional.binary_cross_entropy_with_logits(
                out["success_logit"], success_t, pos_weight=pos_weight),
            "heads/reward": torch.nn.functional.mse_loss(out["reward"], tgt["reward"][idx]),
        }
        loss = sum(losses.values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % st.log_every == 0 or step == st.steps - 1:
            logs = {k: float(v.detach()) for k, v in losses.items()}
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
            if log:
                log(logs, step)
        if st.max_minutes and time.time() - start > 60 * st.max_minutes:
            break
    bar.close()
    return logs
