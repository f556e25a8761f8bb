"""Training the action-chunk policies on the one trainer (`wmsuite.train.Trainer`).

    trainer = Trainer("runs/flow-pushcube", seed=0, logger=RunLogger("runs/flow-pushcube"))
    result = train_policy(trainer, episodes, PolicyConfig(kind="flow"), POLICY_TRAINER)

Run directory layout:
    out/latest/, out/step_<N>/            the EMA policy (checkpoints `--policy out` resolves to latest/)
    out/train_state/policy/               raw weights, EMA, optimizer state, step (for resume)
    out/metrics.jsonl                     loss and the trainer's lr, grad norm, steps/s
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.policies import ChunkPolicy, save_policy
from wmsuite.policies.config import POLICY_TRAINER, PolicyConfig
from wmsuite.policies.normalize import compute_stats
from wmsuite.train import FitResult, Objective, Trainer, TrainerConfig
from wmsuite.types import Episode


def build_policy(episodes: Sequence[Episode], cfg: PolicyConfig) -> ChunkPolicy:
    """A fresh policy sized to the episodes, its normalisation statistics computed on them; cameras
    left None in `cfg` become every camera of the data."""
    first = episodes[0]
    if cfg.cameras is None:
        cfg = replace(cfg, cameras=tuple(first.cameras))
    missing = [c for c in cfg.cameras if c not in first.obs]
    if missing:
        raise ValueError(f"--policy.cameras names {missing}, which the data lacks; it has {first.cameras}")
    dims = {"action": first.actions.shape[1], "agent_pos": first.state.shape[1],
            "environment_state": first.env_state.shape[1]}
    return ChunkPolicy(cfg, dims, compute_stats(episodes, cfg.reads_env_state))


def train_policy(trainer: Trainer, episodes: Sequence[Episode], cfg: PolicyConfig, tcfg: TrainerConfig = POLICY_TRAINER,
                 resume: bool = False) -> FitResult:
    """Train a policy on `episodes` into the trainer's run directory (see the module docstring)."""
    torch.manual_seed(trainer.seed)
    policy = build_policy(episodes, cfg)
    data = WindowDataset(episodes, WindowConfig(context=1, chunk=policy.cfg.horizon, future=0),
                         cameras=policy.cfg.cameras)
    return fit_windows(trainer, policy, data, tcfg, lambda m, batch, gen, step: m(batch, generator=gen), resume=resume)


def fit_windows(trainer: Trainer, policy: ChunkPolicy, data: Dataset, tcfg: TrainerConfig,
                loss: Callable[[ChunkPolicy, dict[str, Any], torch.Generator, int], Any], resume: bool = False,
                extra: dict[str, Any] | None = None) -> FitResult:
    """Fit `policy` on batches of `data` (a fresh permutation every pass) with `loss(policy, batch,
    generator, step) -> (loss, logs)`, the generator seeding the policy's noise; export the EMA policy
    to out/step_<N> and out/latest with `extra` in its config."""

    def batches(start: int) -> Iterator[tuple[dict[str, Any], torch.Generator, int]]:
        gen = torch.Generator(trainer.device).manual_seed(trainer.seed * 1_000_003 + start + (trainer.rank << 40))  # the policy's noise (each rank its own)
        loader = DataLoader(data, batch_size=tcfg.batch_size, num_workers=0, drop_last=len(data) >= tcfg.batch_size,
                            sampler=RandomSampler(data, generator=torch.Generator().manual_seed(trainer.seed + start)))
        step = start
        while True:  # a fresh permutation every pass
            for batch in loader:
                yield batch, gen, step
                step += 1

    def export(step: int) -> None:
        for name in (f"step_{step}", "latest"):
            save_policy(policy, trainer.out / name, extra={"train_step": step, **(extra or {})})

    objective = Objective(policy, lambda m, b: loss(m, b[0], b[1], b[2]))
    return trainer.fit("policy", objective, tcfg, batches, export=export, resume=resume)
