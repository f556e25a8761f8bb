"""GRPO training of a language model on the core trainer: rollouts, rewards, packed updates.

    objective = GRPOObjective(model, cfg, ref=None)
    source = GroupSource(task, model, cfg, max_new_tokens=4, seed=0)
    Trainer(out).fit("grpo", objective, TrainerConfig(...), source, export=...)

Each batch of the source is one generation step of the rollout engine's token side
(wmsuite/rollout/tokens.py) under the current weights: `cfg.prompts` fresh problems (synchronous), or
with `cfg.partial` enough new ones to keep `prompts * over_provision` groups in flight, of which the
first `prompts` to complete are updated on and the rest carried to the next step (their tokens so far
recycled). The source is restarted from (seed, step) at every save, as the trainer does: the carried
groups of a partial run are dropped then, and a resumed run starts its carry afresh.

`evaluate` decodes greedily on a fixed set of held-out problems: the exact-match accuracy and the mean
reward of the learning curve. `supervised` fits the model to the task's answers by next-token
cross-entropy (a cold start for studies that need a model which already ends its answers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from wmsuite.policies.lm.grpo import GRPOConfig, PackedBatch, grpo_loss, pack_groups, token_logprobs
from wmsuite.policies.lm.task import AdditionTask, Problem
from wmsuite.rollout.tokens import Group, Response, SampleConfig, generate


class GRPOObjective(nn.Module):
    """The trained model with the GRPO loss as its forward (the trainer's component)."""

    def __init__(self, model: nn.Module, cfg: GRPOConfig, ref: nn.Module | None = None, packed: bool = True):
        super().__init__()
        self.model, self.cfg, self.packed = model, cfg, packed
        self._ref = [ref] if ref is not None else []  # a list: not a submodule, never trained or saved

    def forward(self, batch: tuple[PackedBatch, dict[str, float]]) -> tuple[torch.Tensor, dict[str, float]]:
        packed, logs = batch
        if self.cfg.kl > 0 and packed.ref_logp is None:
            if not self._ref:
                raise ValueError("kl > 0 needs a reference model")
            with torch.no_grad():
                packed.ref_logp = token_logprobs(self._ref[0], packed, self.cfg.temperature, self.packed)
        loss, more = grpo_loss(self.model, packed, self.cfg, self.packed)
        return loss, {**logs, **more}


class GroupSource:
    """The trainer's batch source: `source(start_step)` -> endless (PackedBatch, logs) from rollouts."""

    def __init__(self, task: AdditionTask, model: nn.Module, cfg: GRPOConfig, max_new_tokens: int, seed: int = 0,
                 rank: int = 0, world: int = 1):
        if cfg.prompts % world:
            raise ValueError(f"grpo.prompts {cfg.prompts} does not split over {world} processes; choose a multiple of {world}")
        self.task, self.model, self.cfg, self.seed, self.rank = task, model, cfg, seed, rank
        self.prompts = cfg.prompts // world  # under data-parallel training, this rank's share of the groups
        self.sample = SampleConfig(max_new_tokens=max_new_tokens, eos_id=task.eos_id, pad_id=task.pad_id,
                                   temperature=cfg.temperature,
                                   target_groups=self.prompts if cfg.partial else None)

    def __call__(self, start_step: int) -> Iterator[tuple[PackedBatch, dict[str, float]]]:
        rng = np.random.default_rng([self.seed, start_step] + ([self.rank] if self.rank else []))  # rank 0 as alone
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        carried: list[Group] = []
        in_flight = math.ceil(self.prompts * self.cfg.over_provision) if self.cfg.partial else self.prompts
        while True:
            fresh = [self._group(p) for p in self.task.sample(rng, in_flight - len(carried))]
            was = self.model.training
            self.model.eval()
            t0, c0 = time.perf_counter(), time.thread_time()
            done, carried = generate(self.model, carried + fresh, self.sample, gen)
            seconds, cpu = time.perf_counter() - t0, time.thread_time() - c0
            self.model.train(was)
            batch_groups, extra = done[:self.prompts], done[self.prompts:]
            carried = extra + carried  # complete groups beyond the target wait for the next update
            rewards = torch.tensor([[self.task.reward(g.key, self.task.decode(r.tokens)) for r in g.responses]
                                    for g in batch_groups])
            acc = [self.task.accuracy(g.key, self.task.decode(r.tokens)) for g in batch_groups for r in g.responses]
            packed = pack_groups(batch_groups, rewards, self.cfg.scale_rewards)
            lengths = [len(r.tokens) for g in batch_groups for r in g.responses]
            logs = {"reward": float(rewards.mean()), "accuracy": float(np.mean(acc)),
                    "response_tokens": float(np.mean(lengths)), "gen_seconds": seconds, "gen_cpu_seconds": cpu,
                    "groups_per_s": len(batch_groups) / max(seconds, 1e-9), "carried_groups": float(len(carried))}
            for _ in range(self.cfg.reuse):
                yield packed, logs

    def _group(self, problem: Problem) -> Group:
        return Group.new(problem, self.task.encode(problem.prompt), self.cfg.group_size)


@torch.no_grad()
def evaluate(model: nn.Module, task: AdditionTask, problems: list[Problem], max_new_tokens: int,
             batch: int = 256) -> dict[str, float]:
    """Greedy decoding on `problems`: exact-match accuracy and mean reward."""
    was = model.training
    model.eval()
    cfg = SampleConfig(max_new_tokens=max_new_tokens, eos_id=task.eos_id, pad_id=task.pad_id, temperature=0.0)
    acc, rew = [], []
    for i in range(0, len(problems), batch):
        groups = [Group.new(p, task.encode(p.prompt), 1) for p in problems[i:i + batch]]
        generate(model, groups, cfg)
        for g in groups:
            text = task.decode(g.responses[0].tokens)
            acc.append(task.accuracy(g.key, text))
            rew.append(task.reward(g.key, text))
    model.train(was)
    return {"eval_accuracy": float(np.mean(acc)), "eval_reward": float(np.mean(rew))}


def supervised(model: nn.Module, task: AdditionTask, steps: int, lr: float = 1e-3, batch: int = 64,
               seed: int = 0) -> list[float]:
    """Teacher-forced cross-entropy on the answers (EOS included) of fresh problems, `steps` AdamW
    steps through the packed forward (one response per prompt); the losses."""
    rng = np.random.default_rng([seed, 7])
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        groups = [Group(p, task.encode(p.prompt), [Response(task.answer_ids(p), [0.0] * len(task.answer_ids(p)), True)])
                  for p in task.sample(rng, batch)]
        packed = pack_groups(groups, torch.zeros(batch, 1), scale_rewards=False)
        loss = -token_logprobs(model, packed).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def held_out(task: AdditionTask, n: int, seed: int) -> list[Problem]:
    """A fixed set of evaluation problems (its own seed stream, apart from the training draws)."""
    return task.sample(np.random.default_rng([seed, 2**31 - 1]), n)


def describe(logs: dict[str, Any]) -> str:
    keys = ("reward", "accuracy", "eval_accuracy", "eval_reward")
    return ", ".join(f"{k} {logs[k]:.3f}" for k in keys if k in logs)
