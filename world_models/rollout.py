"""World-model state and the one autoregressive rollout.

    state = WorldModelState.from_frames(model, frames)          # frames (B, K', S, S, 3) uint8, K' <= K
    latents, state = rollout(model, state, actions, generator=gen)   # actions (B, N*H, A)

A `LatentWorldModel` generates one chunk of H latent frames from the K newest latent frames and H
actions. Longer horizons are autoregressive: each chunk's frames join the context and the oldest
leave it. `rollout` is the one place that shift is written; `WorldModelEnv`, self forcing in
training, the heads' generated data and the open-loop fidelity figures all roll through it, so they
draw from the sampler in the same order and agree bit for bit on the same generator.

`WorldModelState` is what a rollout carries from one chunk to the next: today the K context latents,
later also the spatial memory. Rows are independent sub-rollouts; `assign` replaces some of them
(a partial reset of a batched environment).

Shapes: B batch, K context, H chunk, N chunks, A action size, C latent channels, s latent side,
S image side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from wmsuite.world_models.latent_memory import LatentMemory
from wmsuite.world_models.model import FORWARD, LatentWorldModel, instruction_tokens

Rows = torch.Tensor | np.ndarray | Sequence[int] | slice


@dataclass
class WorldModelState:
    """What an autoregressive rollout carries from one chunk to the next (later: spatial memory)."""

    context: torch.Tensor
    """(B, K, C, s, s) latent frames, newest last (in the rollout's own time direction)."""
    instruction: torch.Tensor | None = None
    """(B, W) word ids of each row's task instruction (model.instruction_tokens), for a model trained
    with instructions; None: none."""

    @classmethod
    def from_latents(cls, latents: torch.Tensor, context: int) -> WorldModelState:
        """latents (B, K', C, s, s), 1 <= K' <= K = `context`, oldest first -> a state whose context
        repeats the oldest latent to fill K frames, as a rollout from a reset starts in training."""
        if latents.ndim != 5 or not 1 <= latents.shape[1] <= context:
            raise ValueError(f"latents must be (B, K', C, s, s) with 1 <= K' <= {context}, got {tuple(latents.shape)}")
        pad = latents[:, :1].expand(-1, context - latents.shape[1], -1, -1, -1)
        return cls(torch.cat([pad, latents], dim=1))

    @classmethod
    def from_frames(cls, model: LatentWorldModel, frames: torch.Tensor | np.ndarray | Sequence[np.ndarray],
                    device: str | torch.device | None = None, tasks: Sequence[str] | None = None) -> WorldModelState:
        """Encode real frames into a state: frames (B, K', S, S, 3 M) uint8 (M cameras stacked on
        channels, codec.stack_cameras), oldest first, or a sequence of B arrays (K'_i, S, S, 3 M) of
        different lengths 1..K. Each row repeats its oldest frame to fill
        the model's K context frames (before encoding, so every row encodes exactly K frames). `tasks`:
        each row's task instruction, which a model trained with instructions reads (else ignored)."""
        k, size, ch = model.cfg.context, model.codec_cfg.image_size, 3 * model.codec_cfg.cameras
        device = device if device is not None else model.state_mean.device
        rows = [f if torch.is_tensor(f) else torch.as_tensor(np.asarray(f)) for f in frames]  # each (K'_i, S, S, 3M)
        if not rows:
            raise ValueError("from_frames needs at least one row of frames")
        for r in rows:
            if r.ndim != 4 or not 1 <= r.shape[0] <= k or tuple(r.shape[1:]) != (size, size, ch):
                raise ValueError(f"each row of frames must be (K', {size}, {size}, {ch}) with 1 <= K' <= {k} (the "
                                 f"model's context, image size and cameras), got {tuple(r.shape)}")
        filled = [torch.cat([r[:1].expand(k - len(r), *r.shape[1:]), r]) for r in rows]  # each (K, S, S, 3M)
        pix = torch.stack(filled).to(device)  # (B, K, S, S, 3M)
        with torch.no_grad():
            lat = model.codec.encode(pix.flatten(0, 1).permute(0, 3, 1, 2))  # (B*K, MC, s, s)
        words = None
        if tasks is not None and model.cfg.instruction_buckets:
            if len(tasks) != len(rows):
                raise ValueError(f"tasks holds {len(tasks)} instructions for {len(rows)} rows of frames")
            words = instruction_tokens(tasks, model.cfg.instruction_buckets).to(device)  # (B, W)
        return cls(lat.view(len(rows), k, *lat.shape[1:]), words)

    @property
    def newest(self) -> torch.Tensor:
        """(B, C, s, s): the latest latent frame, the one the next chunk's first action starts from."""
        return self.context[:, -1]

    def assign(self, rows: Rows, other: WorldModelState) -> None:
        """Replace the sub-rollouts `rows` with `other`'s, in place (e.g. the rows a reset restarts)."""
        index = _index(rows, self.context.device)
        self.context[index] = other.context.to(self.context)
        if other.instruction is not None:
            if self.instruction is None:
                self.instruction = torch.zeros((len(self.context), other.instruction.shape[1]), dtype=torch.int64,
                                               device=self.context.device)
            self.instruction[index] = other.instruction.to(self.instruction.device)


@torch.no_grad()
def rollout(model: LatentWorldModel, state: WorldModelState, actions: torch.Tensor, direction: int = FORWARD,
            steps: int | None = None, generator: torch.Generator | None = None,
            memory: LatentMemory | None = None) -> tuple[torch.Tensor, WorldModelState]:
    """actions (B, N*H, A) -> generated latents (B, N*H, C, s, s) and the state after them: N chunks,
    each generated from the newest K latents (`model.generate` once per chunk, in order, all drawing
    from `generator`). `direction` FORWARD or BACKWARD (then the state holds later frames, newest last
    in reversed time, and the actions run backwards); `steps` Euler steps per chunk (None: the model's).
    The frame each chunk starts from (e.g. for the inverse-dynamics head) is `state.newest` for the
    first and latents[:, j*H - 1] for chunk j. The input state is left unchanged. `memory` (a model with
    memory_frames > 0, forward only): asked for each chunk's memory input before it, shown its frames
    after it (latent_memory.LatentMemory; without it such a model sees no memory)."""
    k, h = model.cfg.context, model.cfg.chunk
    context = state.context  # (B, K, C, s, s)
    if actions.ndim != 3 or actions.shape[0] != context.shape[0] or actions.shape[1] % h:
        raise ValueError(f"actions must be (B={context.shape[0]}, N*H, A) with H={h}, got {tuple(actions.shape)}")
    if context.shape[1] != k:
        raise ValueError(f"the state holds {context.shape[1]} context frames; the model needs {k}")
    if memory is not None and direction != FORWARD:
        raise ValueError("the spatial memory serves forward rollouts only")
    chunks = []
    for r in range(actions.shape[1] // h):
        chunk = actions[:, r * h : (r + 1) * h]  # (B, H, A)
        retrieved = {"memory": memory.context(chunk)} if memory is not None else {}  # (B, M, C+1, s, s)
        lat = model.generate(context, chunk, direction, steps, generator,
                             instruction=state.instruction, **retrieved)  # (B, H, C, s, s)
        if memory is not None:
            memory.observe(lat)
        chunks.append(lat)
        context = torch.cat([context, lat], dim=1)[:, -k:]  # the one autoregressive shift
    if not chunks:  # N = 0: nothing generated, the state as it was
        return context.new_zeros((context.shape[0], 0, *context.shape[2:])), state
    return torch.cat(chunks, dim=1), WorldModelState(context, state.instruction)


def _index(rows: Rows, device: torch.device) -> torch.Tensor | slice:
    """Rows as a tensor index on `device`: a boolean mask stays a mask, anything else becomes int64."""
    if isinstance(rows, slice):
        return rows
    if torch.is_tensor(rows):
        return rows.to(device)
    rows = np.asarray(rows)
    return torch.as_tensor(rows if rows.dtype == bool else rows.astype(np.int64), device=device)
