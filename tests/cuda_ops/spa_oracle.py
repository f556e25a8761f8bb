"""Independent oracle for shared-prefix attention: torch SDPA over every replicated sequence.

Built from the definition only (it does not use the layout's index maps): for each suffix i of
group g the sequence `cat(prefix_g, suffix_gi)` goes through
`torch.nn.functional.scaled_dot_product_attention` with the equivalent dense mask, and the packed
output is assembled from the first copy of each prefix and every suffix.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

MASKS = ("causal", "full", "block:3")


def allowed(i: torch.Tensor, j: torch.Tensor, spec: str) -> torch.Tensor:
    """Mask of one region from its spec, on indices counted from the region start."""
    if spec == "full":
        return torch.ones(len(i), len(j), dtype=torch.bool)
    size = 1 if spec == "causal" else int(spec.split(":")[1])
    return (i[:, None] // size) >= (j[None, :] // size)


def sequence_mask(p: int, r: int, prefix_mask: str, suffix_mask: str) -> torch.Tensor:
    """(P+R, P+R) bool mask of one replicated sequence [prefix, suffix]."""
    m = torch.zeros(p + r, p + r, dtype=torch.bool)
    m[:p, :p] = allowed(torch.arange(p), torch.arange(p), prefix_mask)
    m[p:, :p] = True  # every suffix token sees the whole prefix
    m[p:, p:] = allowed(torch.arange(r), torch.arange(r), suffix_mask)
    return m  # prefix never sees the suffix: m[:p, p:] stays False


def oracle_attention(q, k, v, layout, scale=None):
    """q: (T, Hq, D); k, v: (T, Hkv, D) packed -> (T, Hq, D) via SDPA on replicated sequences."""
    rep = q.shape[1] // k.shape[1]
    pieces, start = [], 0
    for p, rs in zip(layout.prefix_lens, layout.suffix_lens):
        off = start + p
        for i, r in enumerate(rs):
            idx = torch.cat([torch.arange(start, start + p), torch.arange(off, off + r)])
            qs, ks, vs = q[idx].transpose(0, 1), k[idx].transpose(0, 1), v[idx].transpose(0, 1)
            ks, vs = ks.repeat_interleave(rep, 0), vs.repeat_interleave(rep, 0)  # (Hq, L, D)
            mask = sequence_mask(p, r, layout.prefix_mask, layout.suffix_mask).to(q.device)
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=scale).transpose(0, 1)
            if i == 0:
                pieces.append(o[:p])
            pieces.append(o[p:])
            off += r
        start = off
    return torch.cat(pieces) if pieces else q.new_zeros(q.shape)


def random_layout(rng: random.Random, layout_cls, max_groups=2, max_n=3, max_p=9, max_r=7,
                  prefix_mask=None, suffix_mask=None):
    """A random ragged layout (P = 0 and R = 0 occur)."""
    g = rng.randint(1, max_groups)
    prefix = [rng.randint(0, max_p) for _ in range(g)]
    suffix = [[rng.randint(0, max_r) for _ in range(rng.randint(1, max_n))] for _ in range(g)]
    if sum(prefix) + sum(map(sum, suffix)) == 0:
        suffix[0][0] = 1
    return layout_cls.from_lists(prefix, suffix, prefix_mask or rng.choice(MASKS),
                                 suffix_mask or rng.choice(MASKS))


def qkv(layout, hq, hkv, d, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    t = layout.num_tokens
    out = [torch.randn(t, h, d, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
           for h in (hq, hkv, hkv)]
    return [x.requires_grad_() for x in out]


def fwd_bwd(fn, q, k, v, do):
    """Output and (dq, dk, dv) of `fn(q, k, v)` for upstream gradient `do`."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    o = fn(q, k, v)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad
