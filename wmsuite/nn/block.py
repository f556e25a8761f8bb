"""Pre-norm transformer block over packed shared-prefix tokens.

Policies (candidate action chunks after one observation prefix), world models (branch rollouts
after shared context frames) and the language-model side (GRPO responses after one prompt) run
the same block: tokens are packed once per group by a `SharedPrefixLayout`, rotary positions come
from the layout (so they equal those of the replicated sequences), and attention is
`wmsuite.cuda_ops.shared_prefix_attention`. Everything but attention is per token, so the packed
block computes exactly what the block computes on the replicated batch, on fewer tokens.

    block = SharedPrefixBlock(BlockConfig(dim=256, heads=4))
    y = block(x, layout)                                  # x: (T, C) packed -> (T, C)
    y_rep = block.forward_replicated(layout.unpack(x), layout.replicated_position_ids(), mask)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from wmsuite.cuda_ops import SharedPrefixLayout, shared_prefix_attention


@dataclass
class BlockConfig:
    dim: int = 256
    """Model width C."""
    heads: int = 4
    """Query heads; head dim = dim / heads (even, for rotary embeddings)."""
    kv_heads: int | None = None
    """Key/value heads (grouped-query attention); None = heads."""
    mlp_ratio: float = 4.0
    """Hidden width of the MLP as a multiple of dim."""
    rope_base: float = 10000.0
    """Base of the rotary position embedding frequencies."""
    norm_eps: float = 1e-6
    """Epsilon of the RMS norms."""

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            self.kv_heads = self.heads
        if self.dim < 1 or self.heads < 1 or self.kv_heads < 1:
            raise ValueError(f"dim, heads, kv_heads must be >= 1, got {self.dim}, {self.heads}, {self.kv_heads}")
        if self.dim % self.heads != 0 or (self.dim // self.heads) % 2 != 0:
            raise ValueError(f"dim / heads must be an even integer, got dim={self.dim}, heads={self.heads}")
        if self.heads % self.kv_heads != 0:
            raise ValueError(f"heads must be a multiple of kv_heads, got {self.heads} and {self.kv_heads}")
        if self.mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio must be > 0, got {self.mlp_ratio}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def hidden(self) -> int:
        return int(round(self.dim * self.mlp_ratio))

    def flops(self, tokens: int, pairs: int) -> int:
        """Forward FLOPs (2 per multiply-add) of the block on `tokens` tokens attending `pairs`
        (query, key) pairs. Backward is about twice this for both terms."""
        d, hq, hkv = self.head_dim, self.heads, self.kv_heads
        per_token = 2 * self.dim * (hq * d + 2 * hkv * d) + 2 * hq * d * self.dim + 4 * self.dim * self.hidden
        per_pair = 4 * hq * d  # q.k and p.v
        return tokens * per_token + pairs * per_pair


class SharedPrefixBlock(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        self.norm1 = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.qkv = nn.Linear(cfg.dim, (cfg.heads + 2 * cfg.kv_heads) * d, bias=False)
        self.proj = nn.Linear(cfg.heads * d, cfg.dim, bias=False)
        self.norm2 = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.fc1 = nn.Linear(cfg.dim, cfg.hidden)
        self.fc2 = nn.Linear(cfg.hidden, cfg.dim)
        inv_freq = 1.0 / cfg.rope_base ** (torch.arange(0, d, 2, dtype=torch.float32) / d)  # (D/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, layout: SharedPrefixLayout, backend: str | None = None) -> torch.Tensor:
        """x: (T, C) packed tokens of `layout` -> (T, C)."""
        if x.dim() != 2 or x.shape[0] != layout.num_tokens or x.shape[1] != self.cfg.dim:
            raise ValueError(f"expected packed tokens ({layout.num_tokens}, {self.cfg.dim}), got {tuple(x.shape)}")
        q, k, v = self._qkv(self.norm1(x), layout.position_ids(x.device))  # (T, H, D)
        o = shared_prefix_attention(q, k, v, layout, backend=backend)  # (T, Hq, D)
        x = x + self.proj(o.flatten(1))
        return x + self._mlp(x)

    def forward_replicated(self, x: torch.Tensor, position_ids: torch.Tensor, attn_mask: torch.Tensor | None = None,
                           is_causal: bool = False) -> torch.Tensor:
        """The same block on ordinary padded sequences with torch SDPA (the replicated baseline).

        x: (S, L, C); position_ids: (S, L); attn_mask: (S, L, L) bool (True = attend) or None."""
        q, k, v = self._qkv(self.norm1(x), position_ids)  # (S, L, H, D)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (S, H, L, D)
        rep = self.cfg.heads // self.cfg.kv_heads
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        mask = None if attn_mask is None else attn_mask[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)  # (S, Hq, L, D)
        x = x + self.proj(o.transpose(1, 2).flatten(2))
        return x + self._mlp(x)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))

    def _qkv(self, h: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h: (..., C), pos: (...) -> q (..., Hq, D), k and v (..., Hkv, D), rotary on q and k."""
        cfg, d = self.cfg, self.cfg.head_dim
        q, k, v = self.qkv(h).split([cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d], dim=-1)
        q = q.unflatten(-1, (cfg.heads, d))
        k = k.unflatten(-1, (cfg.kv_heads, d))
        v = v.unflatten(-1, (cfg.kv_heads, d))
        ftype = torch.promote_types(h.dtype, torch.float32)
        angles = pos.to(ftype)[..., None] * self.inv_freq.to(ftype)  # (..., D/2)
        angles = torch.cat([angles, angles], dim=-1)[..., None, :]  # (..., 1, D)
        cos, sin = angles.cos().to(h.dtype), angles.sin().to(h.dtype)
        return _rotate(q, cos, sin), _rotate(k, cos, sin), v


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention. x: (..., H, D); cos, sin: (..., 1, D)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin
