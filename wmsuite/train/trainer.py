"""The one training loop of wmsuite, in the spirit of DIAMOND's trainer: every component trains here.

    trainer = Trainer(out="runs/wm", device="cpu", seed=0, logger=RunLogger("runs/wm"))
    trainer.fit("dynamics", model, TrainerConfig(steps=9000, lr=5e-4), batches, export=save)

A component is an `nn.Module` whose `forward(batch) -> (loss, logs)` is its training loss (wrap any
other loss function with `Objective`); its trained parameters are those with requires_grad. It
brings a batch source, `batches(start_step) -> iterator of batches`, and optionally `export(step)`,
which writes the checkpoint users load (called with the averaged weights in place when EMA is on).

The loop: AdamW over the trained parameters, warm-up + cosine learning rate (restartable), gradient
clipping, an exponential moving average, `metrics.jsonl` rows (and wandb through the logger), a
progress bar, a wall-clock budget, and every `save_every` steps the export plus the train state
(`out/train_state/<name>/`: raw weights, average, optimizer, step) from which `resume=True` goes on.
At every save the batch source and torch's RNG restart from (seed, step), exactly as a resumed run
starts them, so a run killed at any moment and resumed ends with the weights of an uninterrupted one;
the metrics rows logged after the last save are dropped on resume, as those steps are redone.
A non-finite loss or gradient norm stops the run with `TrainingDivergedError` before the step is
applied, so no NaN weights are ever saved.
Devices and data-parallel processes come from HF accelerate's `Accelerator`: launched by torchrun or
`accelerate launch`, each rank trains on its slice of every global batch (`shard=True`, see
wmsuite/train/dist.py) under DDP, rank 0 alone logs, saves and exports, and every rank stops together.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from wmsuite.checkpoint import is_checkpoint
from wmsuite.logging import RunLogger
from wmsuite.train import dist
from wmsuite.train.config import TrainerConfig
from wmsuite.train.state import WeightAverage, load_train_state, save_train_state


class TrainingDivergedError(ValueError):
    """The loss or gradient norm became NaN or infinite; nothing of that step was applied or saved."""


BatchSource = Callable[[int], Iterator[Any]]
"""start step -> an endless iterator of batches (seed it from the start step, so a resumed run draws anew)."""


class Objective(nn.Module):
    """`fn(module, batch) -> (loss, logs)` as the forward of a module, so that a loss which is not the
    module's own forward (a codec's reconstruction loss, the world model's heads-only pass) trains
    through the same loop. Parameters are `module`'s; freeze what the loss must not train."""

    def __init__(self, module: nn.Module, fn: Callable[[nn.Module, Any], tuple[torch.Tensor, dict[str, float]]]):
        super().__init__()
        self.module, self.fn = module, fn

    def forward(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        return self.fn(self.module, batch)


def lr_at(step: int, cfg: TrainerConfig, begin: int = 0) -> float:
    """Learning rate at `step` of a schedule that begins at step `begin` and ends at cfg.steps: linear
    warm-up over cfg.warmup steps, then a cosine from cfg.lr down to cfg.lr * cfg.min_lr_ratio."""
    s, total = step - begin, cfg.steps - begin
    if s < cfg.warmup:
        return cfg.lr * (s + 1) / cfg.warmup
    progress = min(1.0, (s - cfg.warmup) / max(1, total - cfg.warmup))
    r = cfg.min_lr_ratio
    return cfg.lr * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class FitResult:
    steps: int
    """The step the run ended at (cfg.steps, or earlier when the time budget ran out)."""
    logs: dict[str, float] = field(default_factory=dict)
    """The component's logs of the last step."""
    seconds: float = 0.0
    """Wall-clock time of this call."""
    out_of_time: bool = False
    """The wall-clock budget ended the run before cfg.steps."""


class Trainer:
    """Runs `fit` for the stages of one run directory `out` (see the module docstring)."""

    def __init__(self, out: str | Path, device: str = "cpu", seed: int = 0, logger: RunLogger | None = None,
                 progress: bool = True) -> None:
        from accelerate import Accelerator, DistributedDataParallelKwargs

        dist.init(str(device))
        self.out, self.seed, self.progress = Path(out), seed, progress
        # find_unused_parameters: a stage may leave some trained parameters out of a step's loss
        self.accelerator = Accelerator(cpu=not str(device).startswith("cuda"),
                                       kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
        self.device = self.accelerator.device  # cpu:<rank> under gloo, which safetensors refuses: plain cpu
        self.device = torch.device("cpu") if self.device.type == "cpu" else self.device
        self.rank, self.world = self.accelerator.process_index, self.accelerator.num_processes
        self.is_main = self.accelerator.is_main_process
        self.logger = logger if self.is_main else None  # rank 0 alone writes metrics

    def state_dir(self, name: str) -> Path:
        return self.out / "train_state" / name

    def fit(self, name: str, module: nn.Module, cfg: TrainerConfig, batches: BatchSource,
            export: Callable[[int], None] | None = None, resume: bool = False, start_step: int = 0,
            overwrite: bool = False, log_offset: int = 0, shard: bool = True) -> FitResult:
        """Train `module` as stage `name` up to cfg.steps.

        resume: go on from out/train_state/<name>/ (an error if there is none). Otherwise a stage that
        already left a train state is refused unless `overwrite` (a stage that always starts from the
        current weights, such as a fine-tuning pass). `start_step`: the step a fresh optimizer starts
        counting at (training on from an exported checkpoint without its train state).
        `log_offset` is added to the step of every metrics row (a stage logged after another).
        `shard`: with several processes, each trains on its slice of every batch the source yields
        (`dist.shard`); off for a source that already yields this rank's own batches.
        """
        state_dir = self.state_dir(name)
        if resume and not is_checkpoint(state_dir):
            raise FileNotFoundError(f"no train state at {state_dir} to resume from; start the run without --resume")
        if not resume and is_checkpoint(state_dir) and not overwrite:
            raise FileExistsError(f"{self.out} already holds a {name!r} training run; pass --resume to go on "
                                  "with it or choose another --out")
        module.to(self.device).train()
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"stage {name!r}: the module has no trainable parameters")
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        average = WeightAverage(module, cfg.ema_decay) if cfg.ema_decay > 0 else None
        step, begin = start_step, start_step if cfg.restart_schedule else 0
        if resume:
            saved = load_train_state(state_dir, module, optimizer, average, self.device)
            step = int(saved["step"])
            begin = step if cfg.restart_schedule else int(saved.get("schedule_begin", 0))
            print(f"{name}: resuming at step {step} from {state_dir}")
        if self.logger is not None:  # rows an interrupted attempt logged past this point are redone
            self.logger.rewind(log_offset + step, stage=name)
        if resume and self.is_main:  # an export is never ahead of its train state; this repairs one a kill left behind
            self._export(module, average, step, export)
        dist.barrier()
        if step >= cfg.steps:
            print(f"{name}: already at step {step} of {cfg.steps}; nothing to train")
            return FitResult(step)
        if begin >= cfg.steps:
            raise ValueError(f"{name}: a schedule restarted at step {begin} needs steps > {begin}, got {cfg.steps}")
        raw = module  # saved, exported and averaged; `module` below may be its DDP wrapper
        module, optimizer = self.accelerator.prepare(module, optimizer)
        self._seed(step)
        source = batches(step)
        saved_at = step
        meta = {"name": name, "schedule_begin": begin, "trainer": vars(cfg)}
        start, first, logs = time.time(), step, {}
        bar = tqdm(total=cfg.steps, initial=step, desc=name, unit="step", disable=not (self.progress and self.is_main))
        out_of_time = False
        try:
            while step < cfg.steps:
                lr = lr_at(step, cfg, begin)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                batch = next(source)
                if shard and self.world > 1:
                    batch = dist.shard(batch, self.rank, self.world)
                loss, logs = module(_to_device(batch, self.device))
                optimizer.zero_grad(set_to_none=True)
                self.accelerator.backward(loss)
                grad_norm = self.accelerator.clip_grad_norm_(params, cfg.grad_clip) if cfg.grad_clip else None
                finite = bool(torch.isfinite(loss.detach())) and (grad_norm is None or bool(torch.isfinite(grad_norm)))
                out_of_time = self.is_main and bool(cfg.max_minutes) and time.time() - start > 60 * cfg.max_minutes
                diverged, out_of_time = dist.any_rank(not finite, out_of_time)  # every rank stops together
                if diverged:
                    raise TrainingDivergedError(
                        f"{name}: the loss is {float(loss.detach()):.4g} (gradient norm {float(grad_norm or 0):.4g}) at step "
                        f"{step + 1}; stopped before applying it, the last saved state is step {saved_at}. Non-finite "
                        f"data is refused when it is read, so lower the learning rate ({lr:.3g}) or check the inputs")
                optimizer.step()
                step += 1
                if average is not None:
                    average.update(raw, step)
                bar.update(1)
                if step % cfg.log_every == 0 or step == cfg.steps or out_of_time:
                    logs = dist.mean_over_ranks(logs)
                    row = {**logs, f"{name}/lr": lr, f"{name}/steps_per_s": (step - first) / (time.time() - start)}
                    if grad_norm is not None:
                        row[f"{name}/grad_norm"] = float(grad_norm)
                    if self.logger is not None:
                        self.logger.log(row, step=log_offset + step)
                    if "loss" in logs:
                        bar.set_postfix(loss=f"{logs['loss']:.4f}")
                if step % cfg.save_every == 0 or step == cfg.steps or out_of_time:
                    if self.is_main:
                        self._save(state_dir, raw, optimizer, average, step, meta, export)
                    dist.barrier()  # no rank goes on (or ends) before the save is on disk
                    saved_at = step
                    self._seed(step)  # what a run resumed from this state starts with
                    source = batches(step)
                if out_of_time:
                    print(f"{name}: the {cfg.max_minutes} min budget is spent at step {step}; saved")
                    break
        finally:
            bar.close()
        raw.eval()
        return FitResult(step, logs, time.time() - start, out_of_time)

    def _seed(self, step: int) -> None:
        """Torch's RNG at `step` (noise drawn inside losses): rank 0 as on one process, each other rank its own stream."""
        torch.manual_seed(self.seed + step + 1_000_003 * self.rank)

    def _save(self, state_dir: Path, module: nn.Module, optimizer: torch.optim.Optimizer,
              average: WeightAverage | None, step: int, meta: dict[str, Any],
              export: Callable[[int], None] | None) -> None:
        """The train state first, then the export: a kill in between leaves an export behind its
        state, which the resume rewrites, never one ahead of it."""
        save_train_state(state_dir, module, optimizer, average, step, meta)
        self._export(module, average, step, export)

    @staticmethod
    def _export(module: nn.Module, average: WeightAverage | None, step: int,
                export: Callable[[int], None] | None) -> None:
        if export is None:
            return
        was_training = module.training
        module.eval()
        if average is None:
            export(step)
        else:
            with average.swapped(module):
                export(step)
        module.train(was_training)

    def discard_state(self, name: str) -> None:
        """Forget stage `name`'s train state (e.g. after its module's architecture changed)."""
        shutil.rmtree(self.state_dir(name), ignore_errors=True)


def _to_device(batch: Any, device: torch.device) -> Any:
    """Tensors of a (nested) dict / list / tuple batch moved to `device`; anything else as it is."""
    if torch.is_tensor(batch):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch
