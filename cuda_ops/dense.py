"""Shared-prefix attention of a *uniform* layout on dense tensors: the fast path off the GPU.

A uniform layout (every group one prefix of P tokens and N suffixes of R tokens: candidate chunks
after one observation, GRPO responses of one length) reshapes into dense tensors without padding or
index maps:

    packed (T, H, D) = G groups of [prefix (P) | N suffixes (R each)]
    prefix queries   (G, H, P, D)     -> the prefix keys, with the prefix mask (torch SDPA)
    suffix queries   (G, H, N*R, D)   -> scores against the prefix keys, one (N*R, P) product per
                                         group and head, beside the scores against their own
                                         segment's keys, (N, R, R) with the suffix mask; one softmax
                                         over the two, then the two value products summed

so every suffix query scores exactly the P + R keys it may see (N*R*(P+R) pairs, against N*(P+R)^2
replicated), and the prefix keys are read by one large product instead of once per suffix. On CPU
the generic reference's bookkeeping (gathers, padding, two regions merged by their log-sum-exps)
and SDPA's small per-suffix products cost more than the arithmetic at the sizes of a policy's
candidates. Differentiable by autograd; fp16/bf16 computed in fp32, as the reference does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .layout import FULL, SharedPrefixLayout

MAX_SCORES = 1 << 24
"""The automatic choice takes the dense path only while its score tensors stay this small (elements,
all groups and heads): it holds every score at once (and autograd keeps them for the backward),
where the reference walks query chunks; long prefixes and suffixes go to the reference."""


def dense_fits(layout: SharedPrefixLayout, heads: int) -> bool:
    """Is `layout` uniform, and its score tensors (prefix P x P, suffixes N x R x (P + R), per group and
    head) within MAX_SCORES?"""
    if not layout.is_uniform:
        return False
    p, n, r = layout.prefix_lens[0], len(layout.suffix_lens[0]), layout.suffix_lens[0][0]
    return layout.num_groups * heads * (p * p + n * r * (p + r)) <= MAX_SCORES


def region_mask(length: int, blk: int) -> torch.Tensor | None:
    """(length, length) bool: key j visible to query i inside a region with mask `blk` (None: all)."""
    if blk == FULL:
        return None
    i = torch.arange(length)
    return (i[:, None] // blk) >= (i[None, :] // blk)


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SharedPrefixLayout,
                    scale: float | None = None) -> torch.Tensor:
    """q: (T, Hq, D); k, v: (T, Hkv, D) packed in a uniform `layout` -> (T, Hq, D) in q's dtype."""
    if not layout.is_uniform:
        raise ValueError("the dense backend takes a uniform layout (one P, N and R for every group); "
                         "use the reference backend for ragged ones")
    if q.dtype in (torch.float16, torch.bfloat16):
        return dense_attention(q.float(), k.float(), v.float(), layout, scale).to(q.dtype)
    g, p = layout.num_groups, layout.prefix_lens[0]
    n, r = len(layout.suffix_lens[0]), layout.suffix_lens[0][0]
    t, hq, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if hq != k.shape[1]:  # grouped-query heads: query head i reads kv head i // (Hq / Hkv)
        k, v = (x.repeat_interleave(hq // k.shape[1], dim=1) for x in (k, v))
    if t == 0:
        return q.new_zeros(q.shape) + 0 * (k.sum() + v.sum())

    def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.view(g, p + n * r, hq, d).transpose(1, 2)  # (G, H, P + N*R, D)
        return x[:, :, :p], x[:, :, p:]  # (G, H, P, D), (G, H, N*R, D)

    (qp, qs), (kp, ks), (vp, vs) = split(q), split(k), split(v)
    parts = []
    if p:
        mask = region_mask(p, layout.prefix_blk)
        parts.append(F.scaled_dot_product_attention(qp, kp, vp, attn_mask=None if mask is None else mask.to(q.device),
                                                    scale=scale))  # (G, H, P, D)
    if r:
        qo, ko, vo = (x.reshape(g, hq, n, r, d) for x in (qs, ks, vs))  # each suffix on its own
        to_prefix = (qs @ kp.transpose(-1, -2)).view(g, hq, n, r, p)  # (G, H, N, R, P)
        to_own = qo @ ko.transpose(-1, -2)  # (G, H, N, R, R)
        own = region_mask(r, layout.suffix_blk)
        if own is not None:  # a suffix token always sees itself: no row is empty
            to_own = to_own.masked_fill(~own.to(q.device), float("-inf"))
        weights = (torch.cat([to_prefix, to_own], dim=-1) * scale).softmax(dim=-1)  # (G, H, N, R, P + R)
        out = (weights[..., :p].reshape(g, hq, n * r, p) @ vp
               + (weights[..., p:] @ vo).reshape(g, hq, n * r, d))  # (G, H, N*R, D)
        parts.append(out)
    return torch.cat(parts, dim=2).transpose(1, 2).reshape(t, hq, d)
