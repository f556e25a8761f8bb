"""Failure guidance (AFIL, arXiv 2605.08434): steer a policy's sampler away from what failed.

A second action head, the *failure head*, shares the policy's observation encoder and is trained
with the same denoising/flow loss on chunks from failed rollouts, while the policy's own head
learns from demonstrations and successes. At every sampling step both heads predict (velocity for
flow, noise or clean chunk for diffusion: any parametrisation linear in the sample) and the step
takes

    e = e_s + lambda_k * (e_s - e_f),   lambda_k = scale * (1 - cos(e_s, e_f)) / 2

per sample, cos over the flattened chunk: where the two heads agree (cos = 1) nothing changes, and
the more the failure head pulls elsewhere the harder the step pushes away from it, up to `scale`
when they point opposite ways. That is the paper's per-step rule in a bounded form; a constant
lambda is classifier-free guidance's. The autoguidance control guides with a head trained on
successes instead (the same rule, another head), to tell a gain from failures from a gain from
guidance itself.

    guide = failure_guide(policy.fail_head, cond, scale=1.0)
    chunk = policy.head.sample(cond, noise, guide=guide)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from wmsuite.policies.model import ActionHead


def guidance_strength(pred: torch.Tensor, pred_fail: torch.Tensor, scale: float) -> torch.Tensor:
    """(B, H, A) predictions of the success and failure heads -> (B,) lambda_k = scale * (1 - cos) / 2."""
    cos = torch.nn.functional.cosine_similarity(pred.flatten(1), pred_fail.flatten(1), dim=1, eps=1e-8)  # (B,)
    return scale * (1.0 - cos) / 2.0


def guided(pred: torch.Tensor, pred_fail: torch.Tensor, scale: float) -> torch.Tensor:
    """e_s + lambda_k (e_s - e_f), lambda_k per sample (module docstring); (B, H, A) each."""
    lam = guidance_strength(pred, pred_fail, scale)[:, None, None]  # (B, 1, 1)
    return pred + lam * (pred - pred_fail)


def failure_guide(fail_head: ActionHead, cond: torch.Tensor,
                  scale: float) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The `guide` for ActionHead.sample: each step's prediction pushed away from `fail_head`'s on the
    same noisy chunk, time and conditioning (B, C)."""
    if scale < 0:
        raise ValueError(f"guidance scale must be >= 0, got {scale}")

    def guide(x: torch.Tensor, t: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return guided(pred, fail_head.denoise(x, t, cond), scale)

    return guide
