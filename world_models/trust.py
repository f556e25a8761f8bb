"""Trust signals for imagined rollouts: the round-trip error and the start-reading error.

Round trip (arXiv 2608.00675). A rollout imagined N steps forward from a real frame f_0 is played
backward through the same model, with the same actions reversed, until it is back at f_0; how far
it lands from the real f_0 ranks how wrong the forward rollout is, without knowing the truth:

    forward    f_0 --a_0--> f_1 --a_1--> ... --a_{N-1}--> f_N        (imagined)
    context    f_{N-K+1} .. f_N, the K newest imagined frames
    backward   context flipped (newest last is f_{N-K+1}); action a_m takes frame m+1 back to frame m:
               a_{N-K}, a_{N-K-1}, .., a_0 -> f_{N-K}, .., f_0, zero actions after a_0 to fill a chunk
    error      |backward f_0 - real f_0|

This is exactly how `LatentWorldModel.loss` builds its backward windows, so the backward pass asks
the model nothing it was not trained on. When N < K the real f_0 is still inside the context and the
round trip costs nothing (and measures nothing: its error is that of the context itself).

The backward pass may run through a second model (`backward=`): a copy of the simulator fine-tuned
on backward windows only (`p_backward` 1), sharing its codec. Learning both directions in one network
of the simulator's size costs its forward closed loop (experiments/trust_journal.md); a copy of its
own leaves the simulator exactly as it was and adds only the round trip's cost. Its landing point is
read with the simulator's heads, so the object-space error is measured in the simulator's own terms.
The shipped PushCube simulators' copy is assets/wm/pushcube-back.

The calibrator that turns these signals into one trust score per rollout is
world_models/calibrator.py.

Shapes: B batch, K context, H chunk, N imagined steps, A action size, C latent channels, s latent
side, E environment-state size.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from wmsuite.world_models.model import BACKWARD, LatentWorldModel
from wmsuite.world_models.rollout import WorldModelState, rollout


def round_trip_chunks(depth: int, context: int, chunk: int) -> int:
    """The chunks a round trip from `depth` N generates: ceil((N - K + 1) / H), 0 when N < K (the
    cost of the signal, in `model.generate` calls)."""
    if depth < 0 or context < 1 or chunk < 1:
        raise ValueError(f"need depth >= 0, context >= 1, chunk >= 1, got {depth}, {context}, {chunk}")
    return max(0, math.ceil((depth - context + 1) / chunk))


def check_backward_model(model: LatentWorldModel, backward: LatentWorldModel | None = None) -> None:
    """ValueError unless `backward` (None: `model` itself) can play `model`'s rollouts back: trained
    on backward windows and, when it is a second model, with `model`'s context, chunk and action size
    and the very same codec (its latents are the simulator's; a copy fine-tuned from the simulator
    keeps the codec frozen)."""
    fix = ("for the shipped PushCube simulators pass the shipped backward copy (--round-trip-wm "
           "assets:wm/pushcube-back); for another simulator fine-tune a backward copy of it on backward windows "
           "only, as experiments/scripts/wm_backward_train.sh does for the shipped one")
    if backward is None:
        if model.cfg.p_backward <= 0:
            raise ValueError(f"the round trip needs a model that steps backward, and the simulator was trained "
                             f"forward only (p_backward = 0); {fix} and pass it as the round-trip model")
        return
    if backward.cfg.p_backward <= 0:
        raise ValueError(f"the round-trip model was trained forward only (p_backward = 0); {fix}")
    for name in ("context", "chunk", "action_dim"):
        if getattr(backward.cfg, name) != getattr(model.cfg, name):
            raise ValueError(f"the round-trip model's {name} is {getattr(backward.cfg, name)}, the simulator's "
                             f"{getattr(model.cfg, name)}; {fix}")
    ours, theirs = model.codec.state_dict(), backward.codec.state_dict()
    if ours.keys() != theirs.keys() or not all(torch.equal(ours[k].float(), theirs[k].float().to(ours[k].device))
                                               for k in ours):
        raise ValueError(f"the round-trip model's codec differs from the simulator's, so their latents are not "
                         f"comparable; {fix}")


@torch.no_grad()
def round_trip_error(model: LatentWorldModel, start: torch.Tensor, current: torch.Tensor, actions: torch.Tensor,
                     start_env_state: torch.Tensor | None = None, steps: int | None = None,
                     generator: torch.Generator | None = None, samples: int = 1,
                     backward: LatentWorldModel | None = None,
                     instruction: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Play imagined rollouts back to their start and measure how far they land from the real one.

    start (B, C, s, s): latent of the real start frame f_0. current (B, K, C, s, s): the K newest
    imagined latents f_{N-K+1} .. f_N, oldest first (a rollout's `state.context`). actions (B, N, A):
    a_0 .. a_{N-1}, the actions that produced f_1 .. f_N; N is common to the batch (group rollouts
    by depth). start_env_state (B, E), optional: the real start's environment state. `steps` and
    `generator` go to the backward rollout as they would to a forward one. `samples` R > 1 draws R
    backward passes per rollout (one batch of B*R) and compares their mean f_0 with the start: the
    backward pass's own sampling noise averages out of the signal, at R times the cost. `backward`:
    the model that plays the rollout back (None: `model` itself; see `check_backward_model`); the
    heads that read the landing point are `model`'s either way. `instruction` (B, W): each rollout's
    task words (`WorldModelState.instruction`), which a model trained with instructions reads going
    back as it did going forward.

    Returns {"latent": (B,) mean squared latent difference between the backward f_0 and `start`,
    "estimate": (B, C, s, s) the backward f_0} and, with `start_env_state`, "env_state": (B, E) the
    absolute difference between the environment state the heads read from the backward f_0 and the
    real one.
    """
    k, h = model.cfg.context, model.cfg.chunk
    _check_shapes(model, start, current, actions, start_env_state)
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    n = actions.shape[1]
    if n < k:  # f_0 is still in the context: no generation
        estimate = current[:, k - 1 - n]  # (B, C, s, s)
    else:
        back = actions[:, : n - k + 1].flip(1)  # (B, N-K+1, A): a_{N-K} .. a_0
        pad = round_trip_chunks(n, k, h) * h - back.shape[1]
        back = torch.cat([back, back.new_zeros(back.shape[0], pad, back.shape[2])], dim=1)  # whole chunks
        context = current.flip(1).repeat_interleave(samples, 0)  # (B*R, K, C, s, s)
        player = model if backward is None else backward
        words = instruction.repeat_interleave(samples, 0) if instruction is not None else None  # (B*R, W)
        latents, _ = rollout(player, WorldModelState(context, words), back.repeat_interleave(samples, 0), BACKWARD,
                             steps, generator)
        estimate = latents[:, n - k].unflatten(0, (-1, samples)).mean(1)  # (B, C, s, s): f_0, mean of R
    out = {"latent": ((estimate - start) ** 2).mean(dim=(1, 2, 3)), "estimate": estimate}
    if start_env_state is not None:
        predicted = model.predict_heads(estimate)["environment_state"]  # (B, E)
        out["env_state"] = (predicted - start_env_state).abs()
    return out


@torch.no_grad()
def start_reading_error(model: LatentWorldModel, start: torch.Tensor, start_state: Any, sel: slice) -> torch.Tensor:
    """start (B, C, s, s) real start latents, start_state (B, E) their real environment_state -> (B,)
    the distance, over the entries `sel` (e.g. the object's position), between what the model's heads
    read off each start and the truth: whether the model can read the scene it starts from at all."""
    read = model.predict_heads(start)["environment_state"][:, sel]  # (B, |sel|)
    truth = torch.as_tensor(np.asarray(start_state), dtype=read.dtype, device=read.device)[:, sel]
    return (read - truth).norm(dim=-1)


def _check_shapes(model: LatentWorldModel, start: torch.Tensor, current: torch.Tensor, actions: torch.Tensor,
                  start_env_state: torch.Tensor | None) -> None:
    """ValueErrors naming the shape that does not fit the others or the model."""
    k = model.cfg.context
    if current.ndim != 5 or current.shape[1] != k:
        raise ValueError(f"current must be (B, K={k}, C, s, s), the K newest imagined latents; "
                         f"got {tuple(current.shape)}")
    b, latent = current.shape[0], tuple(current.shape[2:])
    if tuple(start.shape) != (b, *latent):
        raise ValueError(f"start must be (B, C, s, s) = {(b, *latent)} to match current {tuple(current.shape)}; "
                         f"got {tuple(start.shape)}")
    a = getattr(model.cfg, "action_dim", None)
    if actions.ndim != 3 or actions.shape[0] != b or (a is not None and actions.shape[2] != a):
        raise ValueError(f"actions must be (B={b}, N, A={a}), a_0 .. a_(N-1) of the rollout; "
                         f"got {tuple(actions.shape)}")
    if start_env_state is not None and (start_env_state.ndim != 2 or start_env_state.shape[0] != b):
        raise ValueError(f"start_env_state must be (B={b}, E); got {tuple(start_env_state.shape)}")
