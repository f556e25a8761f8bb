"""One process of the data-parallel trainer tests: a deterministic regression through the core Trainer.

    python tests/core/ddp_worker.py OUT STEPS [resume]                      # one process
    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/core/ddp_worker.py OUT STEPS
    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/core/ddp_worker.py OUT fail

`fail`: rank 1 raises once the group is up while rank 0 finishes; the launch must end with rank 1's
error (the ranks' leaving the group at exit must not wait for each other for ever).

The loss is a mean over the batch and draws no noise, so N processes, each on its slice of the global
batch, must take the steps one process takes on the whole of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from wmsuite.checkpoint import save_checkpoint
from wmsuite.logging import RunLogger
from wmsuite.train import Objective, Trainer, TrainerConfig


def main(out: str, steps: int, resume: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))  # (64, 4)
    y = x.sum(1, keepdim=True).sin()  # (64, 1)

    def batches(start: int):
        g = torch.Generator().manual_seed(start)
        while True:
            idx = torch.randint(len(x), (8,), generator=g)
            yield {"x": x[idx], "y": y[idx]}

    def loss(m: nn.Module, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        value = ((m(b["x"]) - b["y"]) ** 2).mean()
        return value, {"loss": float(value.detach())}

    def export(step: int) -> None:
        save_checkpoint(Path(out) / "latest", dict(model.state_dict()), {"class": "Regression", "step": step})

    log = RunLogger(out)
    cfg = TrainerConfig(steps=steps, batch_size=8, lr=1e-2, warmup=2, save_every=2, log_every=1, ema_decay=0.9)
    Trainer(out, logger=log, progress=False).fit("reg", Objective(model, loss), cfg, batches, export=export,
                                                 resume=resume)
    log.close()


if __name__ == "__main__":
    if sys.argv[2] == "fail":
        from wmsuite.train import dist

        dist.init()
        if dist.rank() == 1:
            raise ValueError("rank 1 failed on purpose")
        sys.exit(0)
    main(sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "resume")
