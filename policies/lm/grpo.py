"""GRPO on the shared-prefix op: group-normalised advantages, a clipped ratio, optional KL.

    batch = pack_groups(groups, rewards)                      # each group's prompt once
    loss, logs = grpo_loss(model, batch, GRPOConfig())        # packed: P + sum(R_i) tokens per group
    loss, logs = grpo_loss(model, batch, cfg, packed=False)   # the replicated update it must equal

The update of a group runs its prompt once and its N responses after it (one `SharedPrefixLayout`
group), where the replicated update runs N copies of prompt + response. The first response token is
predicted by the prompt's last position, which all N responses share.

Per response token t of response i (DeepSeekMath's GRPO):
    ratio = exp(logp_theta(t) - logp_behaviour(t))
    loss_t = -min(ratio * A_i, clip(ratio, 1 - eps, 1 + eps) * A_i) + beta * KL_k3(theta || ref) - c * H_t
averaged over each response's tokens, then over responses (H_t: the entropy of token t's
distribution, weighted by `entropy` = c, 0 by default). A_i = (r_i - mean(r)) / (std(r) + 1e-6) over
the group (or r_i - mean without `scale_rewards`, Dr. GRPO's choice). The behaviour log-probs are
those recorded when each token was sampled, so tokens a partial rollout recycled from an older model
are importance-weighted against the model that really sampled them (CoPRIS); `recycled_is=False`
uses the current model's log-probs for them instead (no correction: the ablation).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wmsuite.cuda_ops import SharedPrefixLayout
from wmsuite.policies.lm.model import packed_logits, replicated_logits
from wmsuite.rollout.tokens import Group


@dataclass
class GRPOConfig:
    prompts: int = 32
    """Groups (prompts) in each update."""
    group_size: int = 16
    """Responses sampled per prompt (N)."""
    temperature: float = 1.0
    """Sampling temperature; the update's log-probs use the same one."""
    clip: float = 0.2
    """PPO clipping range eps of the ratio."""
    kl: float = 0.0
    """Weight beta of the k3 KL estimate to the initial model (0: no reference model)."""
    entropy: float = 0.0
    """Weight of a bonus on the entropy of each response token's distribution (0: none): keeps the N
    responses of a group apart, where a collapsed policy makes every advantage 0."""
    scale_rewards: bool = True
    """Divide advantages by the group's reward std (GRPO); off: mean-centred only (Dr. GRPO)."""
    reuse: int = 1
    """Optimizer steps on each generated batch (the ratio moves away from 1 after the first)."""
    partial: bool = False
    """Partial rollouts: keep prompts * over_provision groups in flight, update as soon as `prompts`
    are complete, carry the unfinished ones into the next step (APRIL)."""
    over_provision: float = 1.5
    """With partial: groups in flight per group updated on."""
    recycled_is: bool = True
    """Importance-weight recycled tokens against the model that sampled them (see the module)."""

    def __post_init__(self) -> None:
        if self.prompts < 1 or self.group_size < 2:
            raise ValueError(f"need prompts >= 1 and group_size >= 2, got {self.prompts}, {self.group_size}")
        if not 0 < self.clip < 1:
            raise ValueError(f"clip must be in (0, 1), got {self.clip}")
        if self.kl < 0 or self.entropy < 0 or self.temperature <= 0 or self.reuse < 1:
            raise ValueError(f"need kl >= 0, entropy >= 0, temperature > 0 and reuse >= 1, got {self.kl}, "
                             f"{self.entropy}, {self.temperature}, {self.reuse}")
        if self.over_provision < 1:
            raise ValueError(f"over_provision must be >= 1, got {self.over_provision}")


def group_advantages(rewards: torch.Tensor, scale: bool = True) -> torch.Tensor:
    """(G, N) rewards -> (G, N) advantages normalised within each group."""
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + 1e-6) if scale else centred


@dataclass
class PackedBatch:
    """Complete groups laid out for one update (M = response tokens, S = responses)."""

    ids: torch.Tensor
    """(T,) packed token ids."""
    layout: SharedPrefixLayout
    pred: torch.Tensor
    """(M,) packed index of the position whose logits predict each response token."""
    target: torch.Tensor
    """(M,) the response tokens."""
    seq: torch.Tensor
    """(M,) the response (0..S-1) each token belongs to."""
    behaviour: torch.Tensor
    """(M,) behaviour log-probs recorded at sampling."""
    recycled: torch.Tensor
    """(M,) bool: sampled by an earlier call (partial rollouts)."""
    advantages: torch.Tensor
    """(S,) one per response."""
    ref_logp: torch.Tensor | None = None
    """(M,) the reference model's log-probs (with kl > 0)."""

    @property
    def num_responses(self) -> int:
        return int(self.advantages.shape[0])


def pack_groups(groups: list[Group], rewards: torch.Tensor, scale_rewards: bool = True) -> PackedBatch:
    """Lay complete groups out packed; `rewards` (G, N) per response (every group has N responses)."""
    if not groups:
        raise ValueError("pack_groups needs at least one group")
    if any(not g.complete for g in groups):
        raise ValueError("pack_groups takes complete groups only (every response finished)")
    if tuple(rewards.shape) != (len(groups), len(groups[0].responses)):
        raise ValueError(f"rewards must be (groups, N) = ({len(groups)}, {len(groups[0].responses)}), "
                         f"got {tuple(rewards.shape)}")
    layout = SharedPrefixLayout.from_lists([len(g.prompt) for g in groups],
                                           [[len(r.tokens) for r in g.responses] for g in groups])
    ids, pred, target, seq, beh, rec = [], [], [], [], [], []
    s = 0
    for g, start in zip(groups, layout.group_starts):
        ids.extend(g.prompt)
        at = start + len(g.prompt)  # packed index of this response's first token
        for r in g.responses:
            ids.extend(r.tokens)
            n = len(r.tokens)
            # token 0 is predicted by the prompt's last position; token t > 0 by the response's t - 1
            pred.extend([start + len(g.prompt) - 1, *range(at, at + n - 1)][:n])
            target.extend(r.tokens)
            seq.extend([s] * n)
            beh.extend(r.logprobs)
            rec.extend([i < r.recycled for i in range(n)])
            at += n
            s += 1
    def as_long(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.long)

    return PackedBatch(as_long(ids), layout, as_long(pred), as_long(target), as_long(seq),
                       torch.tensor(beh, dtype=torch.float32), torch.tensor(rec, dtype=torch.bool),
                       group_advantages(rewards.float(), scale_rewards).flatten())


def token_logprobs(model, batch: PackedBatch, temperature: float = 1.0, packed: bool = True,
                   entropy: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """(M,) log-probs of the response tokens under `model`, through the op or the replicated batch;
    with `entropy`, also the (M,) entropy of the distribution each token was drawn from."""
    logits = (packed_logits if packed else replicated_logits)(model, batch.ids, batch.layout)  # (T, V)
    logp = torch.log_softmax(logits[batch.pred].float() / temperature, -1)  # (M, V)
    chosen = logp.gather(1, batch.target[:, None]).squeeze(1)
    return (chosen, -(logp.exp() * logp).sum(-1)) if entropy else chosen


def grpo_loss(model, batch: PackedBatch, cfg: GRPOConfig, packed: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss of one batch (see the module docstring) and its logs."""
    logp, ent = token_logprobs(model, batch, cfg.temperature, packed, entropy=True)  # (M,), (M,)
    old = batch.behaviour
    if not cfg.recycled_is:
        old = torch.where(batch.recycled, logp.detach(), old)
    ratio = torch.exp(logp - old)
    adv = batch.advantages[batch.seq]  # (M,)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv)
    per_token = -surrogate
    kl = torch.zeros_like(logp)
    if cfg.kl > 0:
        if batch.ref_logp is None:
            raise ValueError("kl > 0 needs the batch's reference log-probs (ref_logp)")
        d = batch.ref_logp - logp
        kl = torch.exp(d) - d - 1
        per_token = per_token + cfg.kl * kl
    if cfg.entropy > 0:
        per_token = per_token - cfg.entropy * ent
    n = batch.num_responses
    counts = torch.zeros(n).index_add_(0, batch.seq, torch.ones_like(logp))
    per_seq = torch.zeros(n, dtype=per_token.dtype).index_add(0, batch.seq, per_token) / counts.clamp(min=1)
    loss = per_seq.mean()
    with torch.no_grad():
        logs = {"loss": float(loss), "clip_frac": float(((ratio - 1).abs() > cfg.clip).float().mean()),
                "kl": float(kl.mean()), "entropy": float(ent.mean()), "ratio_max": float(ratio.max()),
                "recycled_share": float(batch.recycled.float().mean())}
    return loss, logs
