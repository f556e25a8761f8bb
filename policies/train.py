"""Training loop of the action-chunk policies (used by `wmsuite train-policy` and the zoo).

    result = train(TrainSettings(...), episodes, policy_kind="flow", policy_config={"horizon": 8}, out=run_dir)

Run directory layout:
    out/model.safetensors, out/config.json   the latest EMA policy (so `--policy out` works)
    out/checkpoints/step_000500/             EMA policy every `save_every` steps
    out/train_state/                         raw weights, EMA weights, optimizer state, step (resume)
    out/metrics.jsonl                        loss, lr, steps/s (and wandb offline files with use_wandb)
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler
from tqdm.auto import tqdm

from wmsuite.checkpoint import is_checkpoint, load_checkpoint, save_checkpoint
from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.logging import RunLogger
from wmsuite.policies import ChunkPolicy, make_policy, save_policy
from wmsuite.policies.normalize import compute_stats
from wmsuite.types import Episode

STATE_CLASS = "PolicyTrainState"


@dataclass
class TrainSettings:
    steps: int = 3000
    """Optimizer steps in total (a resumed run continues up to this count)."""
    batch_size: int = 64
    """Windows per batch."""
    lr: float = 3e-4
    """Peak AdamW learning rate (linear warm-up over 100 steps, then cosine decay to 10%)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    ema_decay: float = 0.995
    """Decay of the exponential moving average of the weights that is saved and evaluated."""
    save_every: int = 500
    """Write a checkpoint every this many steps (and at the end)."""
    log_every: int = 50
    """Log the training loss every this many steps."""
    seed: int = 0
    """Seed of initialisation, batch order and noise."""
    device: str = "cpu"
    """Torch device."""
    resume: bool = False
    """Continue from out/train_state instead of refusing to overwrite an existing run."""
    use_wandb: bool = False
    """Also log to wandb (offline mode unless configured)."""
    progress: bool = True
    """Show a progress bar."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "save_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")


def train(settings: TrainSettings, episodes: Sequence[Episode], policy_kind: str, policy_config: dict[str, Any],
          out: str | Path, run_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train a policy on `episodes`; returns {"steps", "final_loss", "train_seconds", "checkpoint"}."""
    out = Path(out)
    state_dir = out / "train_state"
    if is_checkpoint(state_dir) and not settings.resume:
        raise FileExistsError(f"{out} already holds a training run; pass --resume to continue it or choose another --out")
    torch.manual_seed(settings.seed)
    policy_config = dict(policy_config)
    first = episodes[0]
    policy_config.setdefault("cameras", tuple(first.cameras))
    use_env_state = bool(policy_config.get("use_env_state", False))
    dims = {"action": first.actions.shape[1], "agent_pos": first.state.shape[1],
            "environment_state": first.env_state.shape[1]}
    policy = make_policy(policy_kind, dims, compute_stats(episodes, use_env_state), **policy_config)
    policy.to(settings.device).train()
    ema = copy.deepcopy(policy).eval().requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    step = 0
    if settings.resume and is_checkpoint(state_dir):
        step = _load_state(state_dir, policy, ema, opt, settings.device)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, settings.steps), last_epoch=step - 1)

    data = WindowDataset(episodes, WindowConfig(context=1, chunk=policy.cfg.horizon, future=0),
                         cameras=policy.cfg.cameras)
    batches = _batches(data, settings.batch_size, settings.seed + step)
    gen = torch.Generator(settings.device).manual_seed(settings.seed * 1_000_003 + step)
    log = RunLogger(out, config={"kind": policy_kind, "policy": policy_config, "train": vars(settings),
                                 **(run_config or {})}, use_wandb=settings.use_wandb)
    bar = tqdm(total=settings.steps, initial=step, desc=f"train {policy_kind}", disable=not settings.progress)
    start, start_step, loss_avg = time.perf_counter(), step, float("nan")
    try:
        while step < settings.steps:
            loss, logs = policy(next(batches), generator=gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            _ema_update(ema, policy, min(settings.ema_decay, (1 + step) / (10 + step)))
            loss_avg = logs["loss"] if math.isnan(loss_avg) else 0.95 * loss_avg + 0.05 * logs["loss"]
            bar.update(1)
            if step % settings.log_every == 0 or step == settings.steps:
                rate = (step - start_step) / (time.perf_counter() - start)
                log.log({"loss": logs["loss"], "loss_ema": loss_avg, "grad_norm": float(grad_norm),
                         "lr": sched.get_last_lr()[0], "steps_per_s": rate}, step=step)
                bar.set_postfix(loss=f"{loss_avg:.4f}")
            if step % settings.save_every == 0 or step == settings.steps:
                _save(out, step, policy, ema, opt, policy_kind)
    finally:
        bar.close()
        log.close()
    seconds = time.perf_counter() - start
    return {"steps": step, "final_loss": loss_avg, "train_seconds": seconds, "checkpoint": str(out)}


def _lr_factor(step: int, total: int, warmup: int = 100) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def _batches(data: WindowDataset, batch_size: int, seed: int) -> Iterator[dict[str, Any]]:
    """Endless shuffled batches (a fresh permutation every pass)."""
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(data, batch_size=batch_size, sampler=RandomSampler(data, generator=gen),
                        drop_last=len(data) >= batch_size, num_workers=0)
    while True:
        yield from loader


@torch.no_grad()
def _ema_update(ema: ChunkPolicy, model: ChunkPolicy, decay: float) -> None:
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.lerp_(pm, 1.0 - decay)


def _save(out: Path, step: int, policy: ChunkPolicy, ema: ChunkPolicy, opt: torch.optim.Optimizer,
          kind: str) -> None:
    """EMA policy to checkpoints/step_N and to the run root; full state to train_state/."""
    ckpt = save_policy(ema, out / "checkpoints" / f"step_{step:06d}", extra={"train_step": step})
    for name in ("model.safetensors", "config.json"):  # the run root is itself a checkpoint (latest)
        tmp = out / f".{name}.tmp"
        tmp.write_bytes((ckpt / name).read_bytes())
        os.replace(tmp, out / name)
    tensors = {f"model.{k}": v for k, v in policy.state_dict().items()}
    tensors.update({f"ema.{k}": v for k, v in ema.state_dict().items()})
    opt_state = opt.state_dict()
    for idx, st in opt_state["state"].items():
        for k, v in st.items():
            tensors[f"opt.{idx}.{k}"] = torch.as_tensor(v)
    save_checkpoint(out / "train_state", tensors, {"class": STATE_CLASS, "step": step, "kind": kind,
                                                   "param_groups": opt_state["param_groups"]})


def _load_state(path: Path, policy: ChunkPolicy, ema: ChunkPolicy, opt: torch.optim.Optimizer, device: str) -> int:
    tensors, config = load_checkpoint(path, expect_class=STATE_CLASS, device=device)
    policy.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    ema.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("ema.")})
    state: dict[int, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, idx, name = k.split(".", 2)
            state.setdefault(int(idx), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": config["param_groups"]})
    return int(config["step"])
