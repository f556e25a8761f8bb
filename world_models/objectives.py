"""World-model training objectives beyond the joint denoising loss of `LatentWorldModel.loss`.

`dynamics_loss`: what the dynamics stage minimises, by `cfg.objective` (one family): 'teacher',
'noise' and 'chained' are the joint loss with clean, noised or self-forced contexts; 'cycle' adds
`cycle_loss`, the cycle term (LIVE, arXiv 2602.03747). From the real frames of a start t0, the model
imagines R chunks forward without gradient, plays them back without gradient (actions reversed,
direction flag BACKWARD) until one chunk short of the start, and the last backward chunk is denoised,
with gradient, onto the real frames t0 .. t0+H-1 it should come back to:

    forward  (no grad)  f_t0 --a_t0..--> g_1 .. g_RH                    imagined from real frames
    backward (no grad)  g_RH-K+1..g_RH reversed --a reversed--> b_(q-1) .. b_H,   q = RH-K+1
    last     (grad)     context b_H .. b_(H+K-1) (reversed time), actions a_(t0+H-1) .. a_t0
                        -> target: the real f_(t0+H-1) .. f_t0

The model learns to return from its own long rollouts to where they started, which teacher forcing
never shows it and a chained forward rollout has no target for. R follows a curriculum
(`cycle_chunks`): p = max(p_min, T // 4^stage) of a T-chunk window stay real, R = T - p are imagined.

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

import math

import torch

from wmsuite.world_models.config import WorldModelConfig
from wmsuite.world_models.model import BACKWARD, FORWARD, LatentWorldModel
from wmsuite.world_models.rollout import WorldModelState, rollout


def distillation_loss(student: LatentWorldModel, teacher: LatentWorldModel, batch: dict[str, torch.Tensor],
                      steps: int, teacher_steps: int | None = None, own: float = 0.0
                      ) -> tuple[torch.Tensor, dict[str, float]]:
    """Student vs teacher samples on a batch of latent windows (`LatentWindows.batch`: context
    (B, K, C, s, s), actions (B, H, A), future_is_pad (B, H+K-1)); padded frames carry no loss.
    A `p_single_frame` share of contexts is the newest frame repeated, as a rollout starts. With
    `own` > 0 and the batch's history (`LatentWindows.batch(idx, history_chunks=R)`), that share of
    rows whose history lies inside the episode gets the context the student imagines itself from the
    history with its actions (no gradient), in place of the real one."""
    context, actions = batch["context"], batch["actions"]
    b, h = context.shape[0], student.cfg.chunk
    single = (torch.rand(b, device=context.device) < student.cfg.p_single_frame).view(b, 1, 1, 1, 1)
    context = torch.where(single, context[:, -1:].expand_as(context), context)
    imagined = torch.zeros(b, dtype=torch.bool, device=context.device)
    if own > 0:
        if "history" not in batch:
            raise ValueError("own contexts need the batch's history (LatentWindows.batch with history_chunks > 0)")
        imagined = batch["history_valid"] & (torch.rand(b, device=context.device) < own)
        rows = imagined.nonzero().squeeze(1)
        if len(rows):
            words = batch["instruction"][rows] if "instruction" in batch else None
            with torch.no_grad():
                _, state = rollout(student, WorldModelState(batch["history"][rows], words), batch["history_actions"][rows],
                                   FORWARD, steps)
            context = context.index_copy(0, rows, state.context)  # (B, K, C, s, s)
    noise = torch.randn((b, h, *context.shape[2:]), device=context.device)  # (B, H, C, s, s)
    with torch.no_grad():
        target = teacher.sample(context, actions, noise, FORWARD, teacher_steps or None,
                                batch.get("instruction"))  # (B, H, C, s, s)
    pred = student.sample(context, actions, noise, FORWARD, steps, batch.get("instruction"))
    weight = student.motion_weights(context, target)  # (B, H, C, s, s)
    per_frame = (weight * (pred - target) ** 2).mean(dim=(2, 3, 4))  # (B, H)
    valid = (~batch["future_is_pad"][:, :h]).float()
    loss = (per_frame * valid).sum() / valid.sum().clamp_min(1)
    plain = (((pred - target) ** 2).mean(dim=(2, 3, 4)) * valid).sum() / valid.sum().clamp_min(1)
    return loss, {"loss": float(loss.detach()), "distill/mse": float(plain.detach()),
                  "distill/own_share": float(imagined.float().mean())}


def cycle_chunks(cfg: WorldModelConfig, step: int) -> int:
    """R: the chunks a cycle imagines forward at training step `step` (0 for objectives other than
    'cycle' and in curriculum stage 0), at least the `min_cycle_chunks` a cycle needs once it runs."""
    if cfg.objective != "cycle":
        return 0
    stage = step // cfg.cycle_stage_steps
    real = max(cfg.cycle_min_real, cfg.cycle_horizon // 4**stage)
    r = max(0, cfg.cycle_horizon - real)
    return max(r, min_cycle_chunks(cfg)) if r else 0


def min_cycle_chunks(cfg: WorldModelConfig) -> int:
    """The fewest forward chunks whose frames hold the last backward chunk's context, frames H ..
    H+K-1 after the start: ceil((H + K - 1) / H)."""
    return math.ceil((cfg.chunk + cfg.context - 1) / cfg.chunk)


def cycle_loss(model: LatentWorldModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """The cycle term (module docstring) on the rows of `batch` whose start is inside their episode
    (`LatentWindows.batch(idx, history_chunks=R)`: history (B, K, C, s, s) the real frames up to t0,
    history_actions (B, R*H, A) a_t0 .. a_(t0+RH-1), history_target (B, H+K, C, s, s) the real frames
    t0 .. t0+H+K-1, history_valid (B,)). Only the last backward chunk carries gradient. Its loss weighs
    latent elements as the same backward window with real frames would be weighed (motion between the
    real frames H+K-1 .. H and the target), so that the imagined context's own errors never count as
    motion the model is paid to reproduce."""
    k, h = model.cfg.context, model.cfg.chunk
    rows = batch["history_valid"].nonzero().squeeze(1)
    hist, acts, real = batch["history"][rows], batch["history_actions"][rows], batch["history_target"][rows]
    words = batch["instruction"][rows] if "instruction" in batch else None  # (B, W)
    target = real[:, :h]  # (B, H, C, s, s): the real frames t0 .. t0+H-1
    r = acts.shape[1] // h
    if r < min_cycle_chunks(model.cfg):
        raise ValueError(f"a cycle needs at least {min_cycle_chunks(model.cfg)} chunks forward, got {r}")
    if not len(rows):
        zero = target.sum() * 0.0
        return zero, {"cycle": 0.0}
    with torch.no_grad():
        lat, _ = rollout(model, WorldModelState(hist, words), acts)  # (B, R*H, C, s, s): frames t0+1 .. t0+RH
        frames = torch.cat([hist[:, -1:], lat], dim=1)  # index j holds frame t0+j, j = 0 .. RH
        q = r * h - k + 1  # the oldest frame of the forward rollout's last context
        if q > h:  # play back from there to frame H, whole chunks, the overshoot dropped
            back_act = acts[:, h:q].flip(1)  # a_(q-1) .. a_H: action i takes frame i to i+1
            pad = math.ceil((q - h) / h) * h - (q - h)
            back_act = torch.cat([back_act, back_act.new_zeros(len(rows), pad, back_act.shape[2])], dim=1)
            back, _ = rollout(model, WorldModelState(frames[:, q : q + k].flip(1), words), back_act, BACKWARD)
            frames = torch.cat([frames[:, :h], back[:, : q - h].flip(1), frames[:, q:]], dim=1)  # b_H .. b_(q-1)
    context = frames[:, h : h + k].flip(1)  # frames H+K-1 .. H: newest last in reversed time
    direction = torch.full((len(rows),), BACKWARD, device=context.device)
    no_pad = torch.zeros(len(rows), h, dtype=torch.bool, device=context.device)
    loss, _, _ = model.diffusion_loss(context, target.flip(1), acts[:, :h].flip(1), direction, no_pad,
                                      weight_context=real[:, h : h + k].flip(1), instruction=words)
    return loss, {"cycle": float(loss.detach())}


def dynamics_loss(model: LatentWorldModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """The dynamics stage's loss for `model.cfg.objective`: the joint loss, plus cycle_weight times
    the cycle term when the batch carries a cycle (objective 'cycle', curriculum stage 1 on)."""
    loss, logs = model.loss(batch)
    if model.cfg.objective == "cycle" and "history_target" in batch:
        cycle, cycle_logs = cycle_loss(model, batch)
        loss = loss + model.cfg.cycle_weight * cycle
        logs = {**logs, **cycle_logs, "loss": float(loss.detach())}
    return loss, logs
