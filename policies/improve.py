"""Training a policy on demonstrations and its own rollouts (#30): filtered BC, failure guidance
(AFIL), hierarchical advantage weighting (HABC), both, or AFIL's autoguidance control.

    rollouts = load_episodes("data/round1.hdf5")   # `wmsuite collect --policy P [--intervene expert@1]`
    train_improved(trainer, demos, rollouts, cfg, POLICY_TRAINER, method="habc", init=bc_policy)

Every window (one observation, the chunk from it, the observation `n_action_steps` later) carries its
first action's source and credited outcome (weighting.credit: a demonstration's own outcome; for a
rollout, the outcome of the autonomous stretch it belongs to, a stretch the expert cut short being a
failure). What each method trains:

- `bc` (the control): the action head on demonstrations, interventions and successful autonomous
  windows, weight 1 each; failed ones are dropped (filtered BC).
- `afil`: that, and the failure head (PolicyConfig.failure_head) on the failed windows (failed
  autonomous stretches and failed demonstrations), on the shared encoder; sampling is guided away
  from it (guidance.py).
- `habc`: the action head with HABC's transition weights (weighting.py). The critics learn beside it
  on detached features: viability by BCE on autonomous windows, efficiency by Huber on successful
  ones against -n / T + V_e(s'), T the longest episode in the data, and the chunk critic (the
  verifier's, verifier.py) by BCE of each window's chunk against its credited outcome. Until `critic_warmup` steps the weights
  are bc's, so that the gate does not act on critics that know nothing yet.
- `both`: habc's weights and afil's failure head.
- `autoguide` (afil's control): afil with its second head trained on the windows the policy head
  learns from (bc's) instead of the failed ones, so that sampling is guided by a fresh, weaker head of
  the same data (autoguidance). A gain of afil over it comes from the failures, not from guidance.

`init` (a trained BC policy) gives every weight it has; the failure head and critics start fresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.policies import ChunkPolicy
from wmsuite.policies.config import GUIDED, METHODS, WEIGHTED, PolicyConfig
from wmsuite.policies.train import build_policy, fit_windows
from wmsuite.policies.weighting import (
    AUTONOMOUS,
    DEMO,
    advantages,
    credit,
    efficiency_targets,
    gate,
    transition_weights,
)
from wmsuite.train import FitResult, Trainer, TrainerConfig
from wmsuite.types import Episode


class LabelledWindows(Dataset):
    """WindowDataset items (context 1, chunk H, future n) of demonstrations then rollouts, with
    source (), outcome () (NaN where the expert acted), steps () to the next state and
    success_end () (the next state is a successful episode's end)."""

    def __init__(self, demos: Sequence[Episode], rollouts: Sequence[Episode], horizon: int, n_steps: int,
                 cameras: Sequence[str]) -> None:
        self.episodes = list(demos) + list(rollouts)
        self.windows = WindowDataset(self.episodes, WindowConfig(context=1, chunk=horizon, future=n_steps),
                                     cameras=cameras)
        self.labels = [credit(ep.success, ep.intervention, demonstration=i < len(demos))
                       for i, ep in enumerate(self.episodes)]
        self.n_steps = n_steps

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = self.windows[i]
        e, t = int(item["episode_index"]), int(item["t"])
        ep, (source, outcome) = self.episodes[e], self.labels[e]
        steps = min(self.n_steps, ep.length - t)
        return {**item, "source": torch.tensor(int(source[t])), "outcome": torch.tensor(float(outcome[t])),
                "steps": torch.tensor(steps), "success_end": torch.tensor(bool(ep.success and t + steps >= ep.length))}


def improvement_loss(policy: ChunkPolicy, batch: dict[str, Any], method: str, time_scale: int, weighted: bool,
                     generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of `method` on a LabelledWindows batch (module docstring); `weighted`: HABC's gate acts
    (past its warm-up), else HABC weighs as bc. time_scale: T of the efficiency critic's units."""
    dev = policy.device
    obs = policy.batch_obs(batch)
    cond = policy.encode(obs, channels_first=True, augment=policy.training)  # (B, C) or a VLA's (B, P, C)
    # (B, H, A); a rollout's actions outside the statistics' range (an --init start's) are where it can act
    actions = policy.normalizer.action_to_unit(batch["actions"].to(dev)).clamp(-1.0, 1.0)
    mask = ~batch["action_is_pad"].to(dev)
    source, outcome = batch["source"].to(dev), batch["outcome"].to(dev).float()
    autonomous = source == AUTONOMOUS
    failed = (outcome < 0.5) & (autonomous | (source == DEMO))  # NaN (the expert's) is neither
    w = (~failed).float()
    logs: dict[str, float] = {}
    total = torch.zeros((), device=dev)
    if method in WEIGHTED:
        feats = policy.features(cond)  # (B, F): what the critics read
        v_logit, v_e = policy.critics(feats.detach())
        with torch.no_grad():
            nv_logit, nv_e = policy.critics(policy.features(policy.encode(policy.batch_obs(batch, "future"),
                                                                          channels_first=True)))
        steps, end = batch["steps"].to(dev), batch["success_end"].to(dev)
        if autonomous.any():
            via = F.binary_cross_entropy_with_logits(v_logit[autonomous], outcome[autonomous])
            total, logs["critic/viability"] = total + via, float(via.detach())
        known = ~torch.isnan(outcome)  # the chunk critic: did executing this chunk from here end well?
        if known.any():
            q = F.binary_cross_entropy_with_logits(policy.critics.chunk_logit(feats.detach()[known], actions[known]),
                                                   outcome[known])
            total, logs["critic/chunk"] = total + q, float(q.detach())
        good = outcome > 0.5  # successful stretches and demonstrations (NaN compares False)
        if good.any():
            eff = F.huber_loss(v_e[good], efficiency_targets(nv_e, steps, end, time_scale)[good], delta=0.1)
            total, logs["critic/efficiency"] = total + eff, float(eff.detach())
        if weighted:
            p_v = torch.sigmoid(v_logit.detach())
            a_v, a_e = advantages(p_v, torch.sigmoid(nv_logit), v_e.detach(), nv_e, steps, end, time_scale)
            w = transition_weights(source, outcome, gate(p_v, a_v, a_e))
    bc, _ = policy.head.loss(cond, actions, mask, w, generator)
    total = total + bc
    logs.update({"loss/policy": float(bc.detach()), "weight/mean": float(w.mean()), "failed_share": float(failed.float().mean())})
    total = policy.add_aux_state(total, cond, obs["environment_state"], logs)
    guide_on = ~failed if method == "autoguide" else failed  # (B,) what the second head learns
    if method in GUIDED and guide_on.any():
        fail, _ = policy.fail_head.loss(cond, actions, mask, guide_on.float(), generator)
        total, logs["loss/failure_head"] = total + fail, float(fail.detach())
    logs["loss"] = float(total.detach())
    return total, logs


def improved_config(cfg: PolicyConfig, method: str) -> PolicyConfig:
    """`cfg` with the heads `method` needs (a guiding head for afil/both/autoguide, critics for habc/both)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return replace(cfg, failure_head=method in GUIDED, critics=method in WEIGHTED)


def train_improved(trainer: Trainer, demos: Sequence[Episode], rollouts: Sequence[Episode], cfg: PolicyConfig,
                   tcfg: TrainerConfig, method: str = "habc", init: ChunkPolicy | None = None, critic_warmup: int = 200,
                   resume: bool = False) -> FitResult:
    """Train `method` (module docstring) into the trainer's run directory (out/latest, out/step_<N>,
    out/train_state/policy), from `init`'s weights where given, with its normalisation statistics."""
    if not demos and not rollouts:
        raise ValueError("no episodes to train on: give demonstrations, rollouts or both")
    torch.manual_seed(trainer.seed)
    cfg = improved_config(init.cfg if init is not None else cfg, method)
    if init is None:
        policy = build_policy(list(demos) + list(rollouts), cfg)
    else:  # the BC start: its statistics and every weight it has; new heads fresh
        policy = ChunkPolicy(cfg, init.dims, init.normalizer.stats).to(init.device)
        missing = policy.load_state_dict(init.state_dict(), strict=False).missing_keys
        if any(not k.startswith(("fail_head.", "critics.")) for k in missing):
            raise ValueError(f"--init does not match this policy's architecture (missing {missing[:4]})")
    data = LabelledWindows(demos, rollouts, cfg.horizon, cfg.n_action_steps, cfg.cameras)
    time_scale = max(ep.length for ep in data.episodes)

    def loss(m: ChunkPolicy, batch: dict[str, Any], gen: torch.Generator, step: int):
        return improvement_loss(m, batch, method, time_scale, step >= critic_warmup, generator=gen)

    return fit_windows(trainer, policy, data, tcfg, loss, resume=resume, extra={"method": method})
