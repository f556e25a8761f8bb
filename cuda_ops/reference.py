"""Shared-prefix attention in plain PyTorch: the readable reference the tests trust.

Every group is gathered into padded tensors, attention is computed per region, and the two
regions a suffix query sees (the shared prefix, its own segment) are merged through their
log-sum-exps:

    O = sigmoid(L_A - L_B) * O_A + sigmoid(L_B - L_A) * O_B

which is softmax over the union of the two key sets. The prefix keys/values receive the sum
of the gradients of all suffixes that read them.
Regions with no visible key (P = 0) have L = -inf and weight 0; nothing produces NaN, neither
forward nor backward, also on padding. Attention inside one region is a small autograd Function
with its backward written out (`_RegionAttention`); the merge, gathers and casts are autograd.
"""

from __future__ import annotations

import math

import torch

from .layout import FULL, SharedPrefixLayout, constant_under_compile

# Query rows processed at once: keys past the last visible one of a chunk are skipped (causal
# regions cost about half of the full square) and temporaries stay one chunk large.
QUERY_CHUNK = 256
FULL_QUERY_CHUNK = 1024  # full regions skip nothing: larger products, fewer Python steps


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SharedPrefixLayout,
                        scale: float | None = None) -> torch.Tensor:
    """Shared-prefix attention of packed tokens.

    q: (T, Hq, D); k, v: (T, Hkv, D) with Hq a multiple of Hkv (grouped-query heads).
    Returns (T, Hq, D) in q's dtype; fp16/bf16 inputs are computed in fp32.
    """
    _check_inputs(q, k, v, layout)
    if q.dtype in (torch.float16, torch.bfloat16):
        return reference_attention(q.float(), k.float(), v.float(), layout, scale).to(q.dtype)
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    if T == 0:
        return q.new_zeros(q.shape) + 0 * (k.sum() + v.sum())
    G, Pm = layout.num_groups, max(layout.prefix_lens)
    Nm = max(len(rs) for rs in layout.suffix_lens)
    Rm = max(max(rs) for rs in layout.suffix_lens)
    pidx, sidx, inv = _padded_indices(layout, q.device)  # (G, Pm), (G, Nm, Rm), (T,)

    def gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        # (T, H, D) -> (*idx.shape, H, D) with zeros on padding (idx = -1)
        out = x[idx.clamp(min=0)]
        return out * (idx >= 0)[..., None, None].to(x.dtype)

    def heads(x: torch.Tensor, h: int) -> torch.Tensor:
        # (B, L, h*?, D) -> (B, Hkv, h // Hkv, L, D): query heads grouped under their kv head
        B, L = x.shape[:2]
        return x.reshape(B, L, Hkv, h // Hkv, D).permute(0, 2, 3, 1, 4)

    # Key masks only where some segment is shorter than the padded length (padded query rows are
    # computed and dropped).
    pvalid = (pidx >= 0) if len(set(layout.prefix_lens)) > 1 else None  # (G, Pm)
    ragged = len({r for rs in layout.suffix_lens for r in rs}) > 1
    svalid = (sidx >= 0).view(G * Nm, Rm) if ragged else None  # (G*Nm, Rm)

    # Prefix queries -> prefix keys, prefix mask.
    qp, kp, vp = (heads(gather(x, pidx), x.shape[1]) for x in (q, k, v))  # (G, Hkv, r, Pm, D)
    op, _ = _region(qp, kp, vp, pvalid, layout.prefix_blk, scale)  # (G, Hkv, r, Pm, D)

    # Suffix queries -> prefix keys (full), then -> own segment (suffix mask), merged.
    qs = heads(gather(q, sidx.view(G, Nm * Rm)), Hq)  # (G, Hkv, r, Nm*Rm, D)
    oa, la = _region(qs, kp, vp, pvalid, FULL, scale)  # (G, Hkv, r, Nm*Rm, D), (..., Nm*Rm)
    qo, ko, vo = (heads(gather(x, sidx.view(G * Nm, Rm)), x.shape[1]) for x in (q, k, v))  # (G*Nm, Hkv, r, Rm, D)
    ob, lb = _region(qo, ko, vo, svalid, layout.suffix_blk, scale)
    r = Hq // Hkv
    ob = ob.view(G, Nm, Hkv, r, Rm, D).permute(0, 2, 3, 1, 4, 5).reshape(oa.shape)
    lb = lb.view(G, Nm, Hkv, r, Rm).permute(0, 2, 3, 1, 4).reshape(la.shape)
    os_ = merge(oa, la, ob, lb)  # (G, Hkv, r, Nm*Rm, D)

    # Back to packed order: flatten both padded outputs token-major and gather.
    flat = torch.cat([op.permute(0, 3, 1, 2, 4).reshape(G * Pm, Hq, D),
                      os_.permute(0, 3, 1, 2, 4).reshape(G * Nm * Rm, Hq, D)])
    return flat[inv]


def merge(oa: torch.Tensor, la: torch.Tensor, ob: torch.Tensor, lb: torch.Tensor) -> torch.Tensor:
    """Softmax over the union of two disjoint key sets from the per-set outputs and log-sum-exps.

    oa, ob: (..., L, D); la, lb: (..., L), -inf where a set has no visible key."""
    d = la - lb
    d = torch.where(torch.isnan(d), torch.zeros_like(d), d)  # both empty (padding): any finite weight
    return torch.sigmoid(d)[..., None] * oa + torch.sigmoid(-d)[..., None] * ob


def _region(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor | None, blk: int,
            scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q to k/v of one region with mask `blk` (0 = full, else block-causal by `blk`,
    indices counted from the region start) and padded keys masked out.

    q: (B, Hkv, r, Lq, D); k, v: (B, Hkv, 1, Lk, D); key_valid: (B, Lk) or None (all valid).
    Returns O (B, Hkv, r, Lq, D) and its log-sum-exp L (B, Hkv, r, Lq); rows without a visible key
    give O = 0, L = -inf."""
    Lq, Lk = q.shape[-2], k.shape[-2]
    if Lk == 0 or Lq == 0:
        return q * 0, q.new_full(q.shape[:-1], float("-inf"))
    k, v = k.squeeze(2).contiguous(), v.squeeze(2).contiguous()  # (B, Hkv, Lk, D)
    return _RegionAttention.apply(q, k, v, key_valid, blk, scale)


def _chunks(lq: int, lk: int, blk: int) -> list[tuple[int, int, int]]:
    """(i0, i1, hi): query rows [i0, i1) and the keys [0, hi) any of them can see."""
    out = []
    step = QUERY_CHUNK if blk != FULL else FULL_QUERY_CHUNK
    for i0 in range(0, lq, step):
        i1 = min(i0 + step, lq)
        out.append((i0, i1, lk if blk == FULL else min(lk, ((i1 - 1) // blk + 1) * blk)))
    return out


class _RegionAttention(torch.autograd.Function):
    """Softmax attention returning (O, LSE), with the textbook backward written out: with
    P = exp(S - L), dS = P * (dP - rowsum(dO * O) + dL).

    The forward keeps E = exp(S - m) (row max m, unnormalised, one exp per score) and divides O by
    the row sums l; the backward uses P = E / l by scaling dO's rows by 1/l before the products
    (dP / l = (dO / l) V^T, dV = E^T (dO / l)), so each pass over the score matrix is one in-place
    op. About three times faster on CPU than the same formulas through autograd."""

    @staticmethod
    def forward(ctx, q, k, v, key_valid, blk, scale):
        # q: (B, Hkv, r, Lq, D); k, v: (B, Hkv, Lk, D) contiguous
        B, Hkv, r, Lq, D = q.shape
        Lk = k.shape[2]
        qs = q * scale
        kf, vf = k.view(B * Hkv, Lk, D), v.view(B * Hkv, Lk, D)
        out = q.new_empty(B, Hkv, r, Lq, D)
        lse = q.new_empty(B, Hkv, r, Lq)
        inv_l = q.new_empty(B, Hkv, r, Lq)  # 1 / row sum, 0 on rows that see nothing
        exps = []
        for i0, i1, hi in _chunks(Lq, Lk, blk):
            c = i1 - i0
            qc = qs[..., i0:i1, :].reshape(B * Hkv, r * c, D)
            s = torch.bmm(qc, kf[:, :hi].transpose(1, 2)).view(B, Hkv, r, c, hi)  # scores
            if key_valid is not None:  # padded keys of shorter segments
                s.masked_fill_(~key_valid[:, None, None, None, :hi], float("-inf"))
            if blk != FULL:  # keys before `lo` are visible to every row of the chunk
                lo = (i0 // blk) * blk
                i = torch.arange(i0, i1, device=q.device) // blk
                j = torch.arange(lo, hi, device=q.device) // blk
                s[..., lo:].masked_fill_(j[None, :] > i[:, None], float("-inf"))  # (c, hi - lo)
            m = s.amax(dim=-1)  # (B, Hkv, r, c); -inf on rows that see nothing
            m = torch.where(torch.isinf(m), 0.0, m)
            e = s.sub_(m[..., None]).exp_()  # E = exp(S - m)
            l_ = e.sum(dim=-1)
            nonempty = l_ > 0
            il = torch.where(nonempty, 1.0 / torch.where(nonempty, l_, 1.0), 0.0)
            pv = torch.bmm(e.view(B * Hkv, r * c, hi), vf[:, :hi]).view(B, Hkv, r, c, D)
            out[..., i0:i1, :] = pv * il[..., None]
            lse[..., i0:i1] = torch.where(nonempty, m + torch.log(torch.where(nonempty, l_, 1.0)), float("-inf"))
            inv_l[..., i0:i1] = il
            exps.append(e)
        ctx.save_for_backward(qs, kf, vf, out, inv_l, *exps)
        ctx.blk, ctx.scale, ctx.shape = blk, scale, (B, Hkv, r, Lq, Lk, D)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        qs, kf, vf, out, inv_l, *exps = ctx.saved_tensors
        B, Hkv, r, Lq, Lk, D = ctx.shape
        delta = (dout * out).sum(-1)  # (B, Hkv, r, Lq)
        if dlse is not None:
            delta = delta - dlse
        dout = dout * inv_l[..., None]  # dO / l
        delta = delta * inv_l  # (delta - dL) / l
        dq = torch.empty_like(qs)
        dk, dv = torch.zeros_like(kf), torch.zeros_like(vf)  # (B*Hkv, Lk, D)
        for (i0, i1, hi), e in zip(_chunks(Lq, Lk, ctx.blk), exps):
            c = i1 - i0
            doc = dout[..., i0:i1, :].reshape(B * Hkv, r * c, D)
            qc = qs[..., i0:i1, :].reshape(B * Hkv, r * c, D)
            dp = torch.bmm(doc, vf[:, :hi].transpose(1, 2)).view(B, Hkv, r, c, hi)  # dP / l
            ds = dp.sub_(delta[..., i0:i1, None]).mul_(e).view(B * Hkv, r * c, hi)  # E (dP - delta) / l
            ef = e.view(B * Hkv, r * c, hi)
            dv[:, :hi] += torch.bmm(ef.transpose(1, 2), doc)
            dk[:, :hi] += torch.bmm(ds.transpose(1, 2), qc)
            dq[..., i0:i1, :] = torch.bmm(ds, kf[:, :hi]).view(B, Hkv, r, c, D)
        return dq * ctx.scale, dk.view(B, Hkv, Lk, D), dv.view(B, Hkv, Lk, D), None, None, None


@constant_under_compile
def _padded_indices(layout: SharedPrefixLayout, device: torch.device
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed token index of every padded prefix slot (G, Pm) and suffix slot (G, Nm, Rm), -1 on
    padding, and for every packed token its row in cat(prefix slots, suffix slots) flattened. # (T,)"""
    key = ("ref_idx", str(device))
    if key not in layout._cache:
        G, Pm = layout.num_groups, max(layout.prefix_lens)
        Nm = max(len(rs) for rs in layout.suffix_lens)
        Rm = max(max(rs) for rs in layout.suffix_lens)
        pidx = torch.full((G, Pm), -1, dtype=torch.int64)
        sidx = torch.full((G, Nm, Rm), -1, dtype=torch.int64)
        inv = torch.empty(layout.num_tokens, dtype=torch.int64)
        for g, (p, rs) in enumerate(zip(layout.prefix_lens, layout.suffix_lens)):
            start = layout.group_starts[g]
            pidx[g, :p] = torch.arange(start, start + p)
            inv[start:start + p] = g * Pm + torch.arange(p)
            off = start + p
            for i, r in enumerate(rs):
                sidx[g, i, :r] = torch.arange(off, off + r)
                inv[off:off + r] = G * Pm + (g * Nm + i) * Rm + torch.arange(r)
                off += r
        layout._cache[key] = (pidx.to(device), sidx.to(device), inv.to(device))
    return layout._cache[key]


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SharedPrefixLayout) -> None:
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError(f"q, k, v must be (T, H, D); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"k and v must be (T, Hkv, D) like q (T, Hq, D); got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"query heads ({q.shape[1]}) must be a multiple of kv heads ({k.shape[1]})")
    if q.shape[0] != layout.num_tokens:
        raise ValueError(f"layout has {layout.num_tokens} packed tokens but q has {q.shape[0]}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
