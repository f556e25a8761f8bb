"""`TrainerConfig`: how one component is optimised (the schedule, EMA, checkpoints, budget).

Every training stage (the world model's codec, dynamics and heads; the policies) is one
`TrainerConfig` run by the one `Trainer`; a command holds one per stage, with the stage's own
defaults, e.g. `wmsuite train-wm --dynamics.lr 2e-4 --heads-train.steps 500`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Trainer fields a resumed run may change: how long it runs and how often it reports. A run's identity
# (wmsuite.runs) holds the others.
RESUMABLE = ("steps", "max_minutes", "log_every", "save_every")


@dataclass
class TrainerConfig:
    steps: int = 1000
    """Optimizer steps in total; a resumed run goes on up to this count."""
    batch_size: int = 32
    """Samples (windows, frames) per optimizer step."""
    lr: float = 3e-4
    """Peak AdamW learning rate."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup: int = 50
    """Steps of linear learning-rate warm-up at the start of the schedule."""
    min_lr_ratio: float = 0.1
    """After the warm-up a cosine takes the learning rate from lr down to lr * min_lr_ratio at `steps`."""
    restart_schedule: bool = False
    """On resume: begin a fresh warm-up and cosine at the resumed step (a warm restart, so that a
    fine-tune ends annealed as the first run did) instead of going on along the first run's."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this before every step (0: no clipping)."""
    ema_decay: float = 0.0
    """Decay of an exponential moving average of the trained weights (0: off). With it on, every
    exported checkpoint holds the averaged weights (what evaluation uses) and the train state keeps
    the raw ones that --resume goes on training. The decay ramps up as min(ema_decay, (1 + step) /
    (10 + step)), so the average soon forgets the initial weights."""
    save_every: int = 200
    """Steps between checkpoints (and the train state for resuming); the last step always saves."""
    log_every: int = 10
    """Steps between rows of metrics.jsonl."""
    max_minutes: float = 0.0
    """Wall-clock budget of the stage in minutes (0: none); the run saves and stops when it is spent."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "save_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        for name in ("weight_decay", "warmup", "grad_clip", "max_minutes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1) (0: off), got {self.ema_decay}")
