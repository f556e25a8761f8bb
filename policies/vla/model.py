"""A small VLA: instruction, image patches and proprioception as one prefix, action chunks as suffixes.

    prefix  [instruction bytes (L) | patches of each camera (n_cam * (S/p)^2; with the conv stem the
             cells of its map) | proprioception (1)]
    suffix  the H noisy actions of a chunk, each a token (action + its position + the flow time or
            diffusion step), N of them (candidate chunks) after one prefix

Every layer is a `wmsuite.nn.SharedPrefixBlock` over the packed tokens of a `SharedPrefixLayout`
(full attention inside the prefix and inside each suffix, each suffix attending to its prefix), so N
candidate chunks for one observation cost P + N*H tokens instead of N*(P+H), and compute exactly what
N separate sequences would. The chunk's outputs are read off its suffix tokens. A single chunk per
observation (training, plain sampling) shares nothing, and runs as ordinary sequences through torch
SDPA with the same mask. The flow / diffusion
machinery (training times, targets, sampling) is the policy's `ActionHead`; this module is its
denoiser, as pi0's action expert is.

The instruction is read byte by byte (UTF-8, 1..256, 0 for padding): no vocabulary to ship or to
miss, and an instruction never seen in training still shares its letters with those that were.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from wmsuite.cuda_ops import SharedPrefixLayout
from wmsuite.nn import BlockConfig, SharedPrefixBlock
from wmsuite.policies.config import PolicyConfig
from wmsuite.policies.encoders import conv_stack, time_embedding

TIME_DIM = 64


def instruction_tokens(texts: Sequence[str], length: int) -> torch.Tensor:
    """Instructions -> (B, length) int64: UTF-8 bytes + 1, cut at `length`, padded with 0."""
    out = torch.zeros((len(texts), length), dtype=torch.int64)
    for i, text in enumerate(texts):
        data = list(str(text).encode("utf-8"))[:length]
        out[i, : len(data)] = torch.tensor(data, dtype=torch.int64) + 1
    return out


class VLAPrefix(nn.Module):
    """Observation -> prefix tokens (B, P, C): instruction bytes, image patches per camera, one
    proprioception token, each with a learned position."""

    def __init__(self, cfg: PolicyConfig, low_dim: int) -> None:
        super().__init__()
        d, p = cfg.vla_dim, cfg.vla_patch
        self.cfg = cfg
        self.words = nn.Embedding(257, d, padding_idx=0)
        if cfg.vla_stem == "conv":  # the conv stack's cells, mapped to the width
            self.patches = nn.ModuleDict({cam: nn.Sequential(conv_stack(cfg.channels), nn.Conv2d(cfg.channels[-1], d, 1))
                                          for cam in cfg.cameras})
            side = cfg.image_size // 2 ** len(cfg.channels)
        else:
            self.patches = nn.ModuleDict({cam: nn.Conv2d(3, d, p, stride=p) for cam in cfg.cameras})
            side = cfg.image_size // p
        self.state = nn.Sequential(nn.Linear(low_dim, d), nn.SiLU(), nn.Linear(d, d))
        self.tokens = cfg.instruction_bytes + len(cfg.cameras) * side**2 + 1  # P
        self.position = nn.Parameter(torch.randn(self.tokens, d) * 0.02)

    def forward(self, images: dict[str, torch.Tensor], low_dim: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """images[cam] (B, 3, S, S) in [-1, 1], low_dim (B, L) standardised, words (B, W) byte ids -> (B, P, C)."""
        parts = [self.words(words)]  # (B, W, C)
        for cam in self.cfg.cameras:
            parts.append(self.patches[cam](images[cam]).flatten(2).transpose(1, 2))  # (B, cells, C)
        parts.append(self.state(low_dim)[:, None])  # (B, 1, C)
        return torch.cat(parts, dim=1) + self.position


class VLADenoiser(nn.Module):
    """(noisy chunks, time, prefix tokens) -> the action head's prediction for every chunk."""

    def __init__(self, cfg: PolicyConfig, action_dim: int) -> None:
        super().__init__()
        d = cfg.vla_dim
        self.inp = nn.Linear(action_dim, d)
        self.step = nn.Parameter(torch.zeros(cfg.horizon, d))  # each action's place in the chunk
        self.time = nn.Sequential(nn.Linear(TIME_DIM, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(SharedPrefixBlock(BlockConfig(dim=d, heads=cfg.vla_heads))
                                    for _ in range(cfg.vla_layers))
        self.norm = nn.RMSNorm(d)
        self.out = nn.Linear(d, action_dim)

    def suffix(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x (B, N, H, A), t (B,) in [0, 1000] -> suffix tokens (B, N, H, C)."""
        temb = self.time(time_embedding(t, TIME_DIM).to(x.dtype))  # (B, C)
        return self.inp(x) + self.step + temb[:, None, None]

    def prefix_features(self, prefix: torch.Tensor) -> torch.Tensor:
        """prefix (B, P, C) -> (B, C): the prefix through the blocks alone (it attends to nothing else,
        so these are the prefix outputs any chunk sees), averaged over its tokens."""
        b, p, _ = prefix.shape
        layout = SharedPrefixLayout.uniform(b, 1, p, 0, prefix_mask="full", suffix_mask="full")
        packed = prefix.flatten(0, 1)
        for block in self.blocks:
            packed = block(packed, layout)
        return self.norm(packed.view(b, p, -1)).mean(dim=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, prefix: torch.Tensor, backend: str | None = None,
                with_features: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """x (B, H, A) or N candidates (B, N, H, A), t (B,) in [0, 1000], prefix (B, P, C) -> x's shape;
        with_features (one chunk per observation only), also `prefix_features(prefix)` (B, C), read off
        the same pass: the prefix attends only to itself, so its outputs are the same."""
        chunks = x if x.dim() == 4 else x[:, None]
        b, n, h, _ = chunks.shape
        p = prefix.shape[1]
        if n == 1:  # nothing shared: plain sequences through torch SDPA (the same function, faster on CPU)
            seq = torch.cat([prefix, self.suffix(chunks, t)[:, 0]], dim=1)  # (B, P + H, C)
            mask = torch.ones(p + h, p + h, dtype=torch.bool, device=seq.device)
            mask[:p, p:] = False  # the prefix sees only itself; the chunk sees everything
            pos = torch.arange(p + h, device=seq.device).expand(b, -1)
            for block in self.blocks:
                seq = block.forward_replicated(seq, pos, mask.expand(b, -1, -1))
            normed = self.norm(seq)  # (B, P + H, C)
            out = self.out(normed[:, p:])  # (B, H, A)
            out = out[:, None] if x.dim() == 4 else out
            return (out, normed[:, :p].mean(dim=1)) if with_features else out
        if with_features:
            raise ValueError(f"with_features takes one chunk per observation (training), got N = {n} candidates")
        layout = SharedPrefixLayout.uniform(b, n, p, h, prefix_mask="full", suffix_mask="full")
        # uniform groups are contiguous: group b's prefix, then its N suffixes in order
        tokens = torch.cat([prefix, self.suffix(chunks, t).flatten(1, 2)], dim=1)  # (B, P + N*H, C)
        packed = tokens.flatten(0, 1)  # (T, C)
        for block in self.blocks:
            packed = block(packed, layout, backend=backend)
        out = self.out(self.norm(packed.view(b, p + n * h, -1)[:, p:]))  # (B, N*H, A)
        out = out.view(b, n, h, -1)
        return out if x.dim() == 4 else out[:, 0]
