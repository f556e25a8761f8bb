"""`wmsuite train-lm`: GRPO of a small causal LM (transformers, random init) on a verifiable task.

    wmsuite train-lm --out runs/lm-add                       # 2-digit addition, packed updates
    wmsuite train-lm --out runs/lm-add --grpo.partial        # partial rollouts (APRIL + CoPRIS)
    wmsuite train-lm --out runs/lm-add --resume --train.steps 600

Every step samples `--grpo.prompts` problems, N = `--grpo.group-size` responses each (the rollout
engine's token side, KV-cached), scores them with the task's reward and takes one GRPO step whose
update runs each prompt once and its N responses after it through the shared-prefix op
(`--no-packed`: the replicated update, the same loss). Every `--train.save-every` steps the model is
saved to out/latest/ (transformers' safetensors + config.json, tokenizer.json, lm.json) and scored
greedily on `--eval-problems` held-out problems; out/eval.jsonl holds that learning curve (step,
seconds, eval_accuracy, eval_reward) and out/metrics.jsonl the per-step rollout and loss figures.
Needs the lm extra (`pip install 'wmsuite[lm]'`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from wmsuite.checkpoint import is_checkpoint
from wmsuite.cli.common import seed_everything
from wmsuite.config import to_dict
from wmsuite.logging import RunLogger
from wmsuite.policies.lm.grpo import GRPOConfig
from wmsuite.policies.lm.model import LMConfig
from wmsuite.policies.lm.task import AdditionConfig
from wmsuite.runs import open_run
from wmsuite.train import RESUMABLE, TrainerConfig, dist


@dataclass
class TrainLMConfig:
    out: str = "runs/lm-addition"
    """Run directory (out/latest/ is the model)."""
    seed: int = 0
    """Seed of initialisation, problems and sampling."""
    threads: int = 2
    """torch.set_num_threads on CPU."""
    device: str = "cpu"
    """Torch device ('cpu', 'cuda')."""
    resume: bool = False
    """Go on with the run in --out from its train state."""
    force_new: bool = False
    """Start over when --out holds another run (it is moved aside, not deleted)."""
    packed: bool = True
    """Update through the shared-prefix op (each prompt once); off: the replicated batch."""
    eval_problems: int = 512
    """Held-out problems scored greedily at every save."""
    max_new_tokens: int = 0
    """Longest response (0: the task's longest answer plus EOS)."""
    lm: LMConfig = field(default_factory=LMConfig)
    """The model (a transformers Llama or Qwen2 of this size, random init)."""
    task: AdditionConfig = field(default_factory=AdditionConfig)
    """The verifiable task."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO settings."""
    train: TrainerConfig = field(default_factory=lambda: TrainerConfig(
        steps=2000, batch_size=1, lr=3e-4, warmup=10, min_lr_ratio=0.5, save_every=25, log_every=1))
    """The trainer's settings (batch_size is unused: a step's batch is grpo.prompts groups)."""

    def __post_init__(self) -> None:
        if self.threads < 1 or self.eval_problems < 1 or self.max_new_tokens < 0:
            raise ValueError(f"need threads >= 1, eval_problems >= 1, max_new_tokens >= 0, got {self.threads}, "
                             f"{self.eval_problems}, {self.max_new_tokens}")


CONFIG = TrainLMConfig


def run(cfg: TrainLMConfig) -> int:
    from wmsuite.policies.lm.model import build_lm, save_lm
    from wmsuite.policies.lm.task import AdditionTask
    from wmsuite.policies.lm.train import GroupSource, GRPOObjective, describe, evaluate, held_out
    from wmsuite.train import Trainer

    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    dist.init(cfg.device)  # a torchrun / accelerate launch: join its process group
    task = AdditionTask(cfg.task)
    max_new = cfg.max_new_tokens or cfg.task.max_answer_tokens
    if len(task.encode("9" * cfg.task.digits * 2 + "+=")) + max_new > cfg.lm.max_positions:
        raise ValueError(f"lm.max_positions {cfg.lm.max_positions} is shorter than the longest prompt + response; raise it")
    identity = {"seed": cfg.seed, "packed": cfg.packed, "max_new_tokens": max_new, "lm": to_dict(cfg.lm),
                "task": to_dict(cfg.task), "grpo": to_dict(cfg.grpo),
                "train": {k: v for k, v in to_dict(cfg.train).items() if k not in RESUMABLE}}
    record = dist.on_main(open_run, cfg.out, "train-lm", identity, force_new=cfg.force_new, adopt=cfg.resume)
    out = Path(cfg.out)
    state = out / "train_state" / "grpo"
    if record["resumed"] and is_checkpoint(state) and not cfg.resume:
        raise FileExistsError(f"{cfg.out} already holds this training run; pass --resume to go on with it, "
                              "--force-new to start over, or choose another --out")
    model = build_lm(cfg.lm, task.vocab_size, task.pad_id, task.bos_id, task.eos_id, seed=cfg.seed).to(cfg.device)
    ref = None
    if cfg.grpo.kl > 0:
        ref = build_lm(cfg.lm, task.vocab_size, task.pad_id, task.bos_id, task.eos_id, seed=cfg.seed).to(cfg.device)
        ref.requires_grad_(False).eval()
    problems = held_out(task, cfg.eval_problems, cfg.seed)
    extra = {"lm": to_dict(cfg.lm), "task": to_dict(cfg.task), "max_new_tokens": max_new}
    curve = out / "eval.jsonl"
    rows = [json.loads(line) for line in curve.read_text().splitlines()] if curve.exists() else []
    scored = {r["step"] for r in rows}  # a resumed run re-exports its last save: scored once
    start = time.time() - (rows[-1]["seconds"] if rows else 0.0)  # the curve's clock goes on across resumes

    def export(step: int) -> None:
        for path in (out / f"step_{step}", out / "latest"):
            save_lm(model, path, {**extra, "step": step}, tokenizer=task.tokenizer)
        if step in scored:
            return
        scored.add(step)
        row = {"step": step, "seconds": time.time() - start, **evaluate(model, task, problems, max_new)}
        with open(curve, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"step {step}: {describe(row)}")

    log = RunLogger(cfg.out, config=to_dict(cfg))
    try:
        if not rows and dist.is_main():
            export(0)
        dist.barrier()
        trainer = Trainer(cfg.out, device=cfg.device, seed=cfg.seed, logger=log)
        objective = GRPOObjective(model, cfg.grpo, ref, packed=cfg.packed)
        # each rank generates its own share of the groups, so the trainer does not split them
        source = GroupSource(task, model, cfg.grpo, max_new, seed=cfg.seed, rank=trainer.rank, world=trainer.world)
        result = trainer.fit("grpo", objective, cfg.train, source, export=export, resume=cfg.resume and is_checkpoint(state),
                             shard=False)
    finally:
        log.close()
    print(f"trained to step {result.steps} in {result.seconds:.0f}s ({describe(result.logs)}); model: {cfg.out}/latest")
    return 0
