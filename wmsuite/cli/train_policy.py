"""`wmsuite train-policy`: train a flow-matching or diffusion action-chunk policy on episodes.

    wmsuite train-policy --data data/pushcube.hdf5 --policy flow --out runs/flow-pushcube
    wmsuite train-policy --data data/pushcube.hdf5 --policy diffusion --out runs/diff \
        --policy-args '{"horizon": 8, "n_action_steps": 4, "num_inference_steps": 10}'

The run directory is itself a checkpoint of the latest EMA policy (`--policy runs/flow-pushcube`
works in eval-policy); see wmsuite/policies/train.py for the rest of its layout.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from wmsuite.cli.common import seed_everything
from wmsuite.config import to_dict
from wmsuite.data import load_episodes


@dataclass
class TrainPolicyConfig:
    data: str = "data/pushcube.hdf5"
    """Episode file (robomimic-format HDF5 written by `wmsuite collect`, or a public Robomimic/LIBERO file)."""
    policy: Literal["flow", "diffusion"] = "flow"
    """Generator of the action head."""
    out: str = "runs/flow-pushcube"
    """Run directory (becomes a checkpoint of the latest EMA policy)."""
    policy_args: dict[str, Any] = field(default_factory=dict)
    """PolicyConfig fields as JSON, e.g. '{"horizon": 8, "n_action_steps": 4, "use_env_state": false}'
    (see wmsuite/policies/config.py; cameras default to all cameras of the data)."""
    max_episodes: int | None = None
    """Train on the first N episodes only (data-size ablations); None: all."""
    only_successes: bool = True
    """Drop failed episodes from the training data."""
    steps: int = 3000
    """Optimizer steps in total."""
    batch_size: int = 64
    """Windows per batch."""
    lr: float = 3e-4
    """Peak AdamW learning rate."""
    ema_decay: float = 0.995
    """Decay of the EMA of the weights (the saved policy is the EMA)."""
    save_every: int = 500
    """Checkpoint every this many steps (checkpoints/step_N) and at the end."""
    seed: int = 0
    """Seed of initialisation, batch order and noise."""
    device: str = "cpu"
    """Torch device ('cpu', 'cuda', 'cuda:1')."""
    threads: int = 2
    """torch.set_num_threads on CPU (keep small on shared machines)."""
    resume: bool = False
    """Continue the run in --out from its last checkpoint."""
    wandb: bool = False
    """Also log to wandb (offline unless configured)."""

    def __post_init__(self) -> None:
        if self.max_episodes is not None and self.max_episodes < 1:
            raise ValueError(f"max_episodes must be >= 1 or None, got {self.max_episodes}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if isinstance(self.policy_args, str):
            self.policy_args = json.loads(self.policy_args)
        if not isinstance(self.policy_args, dict):
            raise ValueError(f"policy_args must be a JSON object, got {self.policy_args!r}")
        from wmsuite.policies.train import TrainSettings

        TrainSettings(steps=self.steps, batch_size=self.batch_size, lr=self.lr, ema_decay=self.ema_decay,
                      save_every=self.save_every)  # validates those fields


CONFIG = TrainPolicyConfig


def run(cfg: TrainPolicyConfig) -> int:
    from wmsuite.policies.train import TrainSettings, train

    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    t0 = time.perf_counter()
    episodes = load_episodes(cfg.data)
    total = len(episodes)
    if cfg.only_successes:
        episodes = [ep for ep in episodes if ep.success]
    if cfg.max_episodes is not None:
        episodes = episodes[: cfg.max_episodes]
    if not episodes:
        raise SystemExit(f"{cfg.data}: no episodes left to train on ({total} read, only_successes={cfg.only_successes})")
    print(f"training {cfg.policy} on {len(episodes)} of {total} episodes "
          f"({sum(ep.length for ep in episodes)} steps) read in {time.perf_counter() - t0:.1f}s")
    settings = TrainSettings(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, ema_decay=cfg.ema_decay,
                             save_every=cfg.save_every, seed=cfg.seed, device=cfg.device, resume=cfg.resume,
                             use_wandb=cfg.wandb)
    result = train(settings, episodes, cfg.policy, cfg.policy_args, cfg.out,
                   run_config={"cli": to_dict(cfg), "train_episodes": len(episodes)})
    print(f"trained {result['steps']} steps in {result['train_seconds']:.1f}s "
          f"(final loss {result['final_loss']:.4f}); policy: {result['checkpoint']}")
    return 0
