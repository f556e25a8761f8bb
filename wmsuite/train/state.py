"""What the trainer keeps besides the model: the weight average, and the resumable train state.

The train state is a checkpoint like any other (safetensors + JSON, never unpickled): the module's
raw state dict under `model.*`, the average under `ema.*`, the optimizer's tensors under `opt.<i>.*`
with the rest of its state (param groups, scalars) in config.json beside the step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wmsuite.checkpoint import load_checkpoint, save_checkpoint

STATE_CLASS = "TrainState"


class WeightAverage:
    """An exponential moving average of a module's trained parameters: avg <- d * avg + (1 - d) * w
    after every optimizer step, with d = min(decay, (1 + step) / (10 + step))."""

    def __init__(self, module: nn.Module, decay: float) -> None:
        self.decay = decay
        self.average = {n: p.detach().float().clone() for n, p in module.named_parameters() if p.requires_grad}

    @torch.no_grad()
    def update(self, module: nn.Module, step: int) -> None:
        d = min(self.decay, (1 + step) / (10 + step))
        params = dict(module.named_parameters())
        names = list(self.average)
        torch._foreach_lerp_([self.average[n] for n in names], [params[n].detach().float() for n in names], 1.0 - d)

    @contextmanager
    def swapped(self, module: nn.Module) -> Iterator[None]:
        """Inside the block the module holds the averaged weights; its raw weights come back after."""
        params = dict(module.named_parameters())
        raw = {n: params[n].detach().clone() for n in self.average}
        with torch.no_grad():
            for n, a in self.average.items():
                params[n].copy_(a)
        try:
            yield
        finally:
            with torch.no_grad():
                for n, w in raw.items():
                    params[n].copy_(w)


def save_train_state(path: Path, module: nn.Module, optimizer: torch.optim.Optimizer,
                     average: WeightAverage | None, step: int, meta: dict[str, Any]) -> Path:
    """Write everything `load_train_state` needs to go on from `step` (atomically)."""
    tensors = {f"model.{k}": v for k, v in module.state_dict().items()}
    if average is not None:
        tensors.update({f"ema.{k}": v for k, v in average.average.items()})
    opt = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for pid, entry in opt["state"].items():
        scalars[str(pid)] = {}
        for key, value in entry.items():
            if torch.is_tensor(value):
                tensors[f"opt.{pid}.{key}"] = value
            else:
                scalars[str(pid)][key] = value
    config = {"class": STATE_CLASS, "step": step, "param_groups": json.loads(json.dumps(opt["param_groups"])),
              "optimizer_scalars": scalars, **meta}
    return save_checkpoint(path, tensors, config)


def load_train_state(path: Path, module: nn.Module, optimizer: torch.optim.Optimizer,
                     average: WeightAverage | None, device: str | torch.device) -> dict[str, Any]:
    """Restore module, optimizer and average from `save_train_state`'s directory; returns its config."""
    tensors, config = load_checkpoint(path, expect_class=STATE_CLASS, device=str(device))
    weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    mine = module.state_dict()
    if set(weights) != set(mine) or any(weights[k].shape != mine[k].shape for k in mine):
        wrong = sorted(set(weights) ^ set(mine)) or [k for k in mine if weights[k].shape != mine[k].shape]
        raise ValueError(f"{path} holds the train state of another architecture (first differences: {wrong[:3]}); "
                         "resume with the configuration it was trained with, or start a new run")
    module.load_state_dict(weights)
    if average is not None:
        saved = {k[len("ema."):]: v.float() for k, v in tensors.items() if k.startswith("ema.")}
        if set(saved) == set(average.average):
            average.average = saved
        else:  # the run had no average (or another set of trained weights): start it from the raw weights
            average.average = {n: p.detach().float().clone() for n, p in module.named_parameters()
                               if n in average.average}
    state: dict[int, dict[str, Any]] = {}
    for pid, entry in config["optimizer_scalars"].items():
        state[int(pid)] = dict(entry)
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, pid, name = key.split(".", 2)
            state.setdefault(int(pid), {})[name] = value
    groups = config["param_groups"]
    if [len(g["params"]) for g in groups] != [len(g["params"]) for g in optimizer.param_groups]:
        raise ValueError(f"{path}: the optimizer state is for another set of trained parameters; "
                         "resume with the configuration it was trained with, or start a new run")
    optimizer.load_state_dict({"state": state, "param_groups": groups})
    return config
