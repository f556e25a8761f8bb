"""World-model training objectives beyond the joint denoising loss of `LatentWorldModel.loss`.

`distillation_loss`: a few-step student learns to reproduce its teacher's multi-step sampler. Both
start from the same Gaussian noise; the teacher's sampler, deterministic given that noise (Euler,
no churn), names the sample, and the student's own `steps`-step sampler, run with gradient, is
pulled towards it (knowledge distillation of an iterative sampler, Luhman & Luhman 2021). Because
the target is a sample rather than the data, a one-step student learns the map noise -> sharp frame
instead of the conditional mean a one-step denoiser falls back to (a blurred, lost pushed object).
The loss weighs latent elements as the denoising loss does (`LatentWorldModel.motion_weights`):
where the teacher moved something counts `motion_weight` times more.

Only forward windows are distilled: a student of a teacher that also steps backward keeps the
teacher's backward behaviour untrained.

Shapes: B batch, K context, H chunk, A action size, C latent channels, s latent side.
"""

from __future__ import annotations

import torch

from wmsuite.world_models.model import FORWARD, LatentWorldModel


def distillation_loss(student: LatentWorldModel, teacher: LatentWorldModel, batch: dict[str, torch.Tensor],
                      steps: int, teacher_steps: int | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Student vs teacher samples on a batch of latent windows (`LatentWindows.batch`: context
    (B, K, C, s, s), actions (B, H, A), future_is_pad (B, H+K-1)); padded frames carry no loss.
    A `p_single_frame` share of contexts is the newest frame repeated, as a rollout starts."""
    context, actions = batch["context"], batch["actions"]
    b, h = context.shape[0], student.cfg.chunk
    single = (torch.rand(b, device=context.device) < student.cfg.p_single_frame).view(b, 1, 1, 1, 1)
    context = torch.where(single, context[:, -1:].expand_as(context), context)
    noise = torch.randn((b, h, *context.shape[2:]), device=context.device)  # (B, H, C, s, s)
    with torch.no_grad():
        target = teacher.sample(context, actions, noise, FORWARD, teacher_steps or None)  # (B, H, C, s, s)
    pred = student.sample(context, actions, noise, FORWARD, steps)
    weight = student.motion_weights(context, target)  # (B, H, C, s, s)
    per_frame = (weight * (pred - target) ** 2).mean(dim=(2, 3, 4))  # (B, H)
    valid = (~batch["future_is_pad"][:, :h]).float()
    loss = (per_frame * valid).sum() / valid.sum().clamp_min(1)
    plain = (((pred - target) ** 2).mean(dim=(2, 3, 4)) * valid).sum() / valid.sum().clamp_min(1)
    return loss, {"loss": float(loss.detach()), "distill/mse": float(plain.detach())}
