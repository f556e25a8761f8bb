"""Triton kernels of shared-prefix attention (forward, dQ, dK/dV). Host code: `triton_op.py`.

Tokens are packed `(T, H, D)`; a block table (see `SharedPrefixLayout.query_table/key_table`)
tells each program which rows it owns and the two key (or query) regions it walks:

- forward / dQ: one program per (query block, query head). Region A is the group's prefix (full
  mask; empty for prefix queries), region B the block's own segment with its mask. Both are
  walked by one online softmax (FlashAttention-2), so the prefix is read once per query block and
  never replicated.
- dK/dV: one program per (key block [x split chunk], kv head), looping over every query that sees
  the block and over the query heads of its group: for a prefix key block that is the prefix
  itself plus the queries of *all* suffixes of the group, so the prefix gradient is summed over
  suffixes inside the program, in a fixed order, without atomics. With split > 1 the suffix queries
  are cut into chunks whose fp32 partials the host sums in a fixed order.

Masks: `blk` = 0 full, else key j visible to query i iff i // blk >= j // blk (indices counted from
the region start; 1 = causal). Each walk has an unmasked stage (blocks visible to every row) and a
masked stage. Scores are in log2 units: qk_scale = softmax scale * log2(e); LSE is stored as log2.

Loaded twice by `triton_op.py`: compiled for CUDA tensors and, under the Triton interpreter, for
CPU tensors (tests), in one process, whatever TRITON_INTERPRET said when triton was imported.
"""

import triton
import triton.language as tl

# Only builtins of triton.language below (no tl.max, tl.sum, tl.zeros, tl.cdiv: those are
# @triton.jit functions of triton's standard library, compiled or interpreted depending on
# TRITON_INTERPRET when triton was imported; using them would tie this module to that choice).


@triton.jit
def _max2(a, b):
    return tl.maximum(a, b)


@triton.jit
def _add2(a, b):
    return a + b


@triton.jit
def _fwd_walk(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok, offs_m_local,
              kv_start, kv_len, blk, n_lo, n_hi, qk_scale,
              MASKED: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    """Online softmax of q over keys [n_lo, n_hi) of a region (local indices)."""
    for n0 in range(n_lo, n_hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)  # local key index
        n_ok = offs_n < kv_len
        rows = kv_start + offs_n
        k = tl.load(k_base + rows[:, None] * stride_kt + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        v = tl.load(v_base + rows[:, None] * stride_vt + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N)
        if MASKED:
            blk_s = tl.maximum(blk, 1)
            ok = n_ok[None, :] & ((blk == 0) | ((offs_m_local[:, None] // blk_s) >= (offs_n[None, :] // blk_s)))
            s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.reduce(s, 1, _max2))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.reduce(p, 1, _add2)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _key_stages(first, last, kv_len, blk, BLOCK_N: tl.constexpr):
    """For query rows [first, last] (local): keys [0, split) are visible to all of them; keys
    [split, hi) need the mask. split is a multiple of BLOCK_N."""
    blk_s = tl.maximum(blk, 1)
    hi = tl.where(blk == 0, kv_len, tl.minimum(kv_len, (last // blk_s + 1) * blk_s))
    full = tl.where(blk == 0, kv_len, tl.minimum(hi, (first // blk_s) * blk_s))
    split = (full // BLOCK_N) * BLOCK_N
    return split, hi


@triton.jit
def _fwd_kernel(Q, K, V, Out, LSE, TAB,
                stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
                T, qk_scale, HEAD_DIM,
                GQA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                PRECISION: tl.constexpr):
    row = tl.program_id(0)
    h = tl.program_id(1)
    hk = h // GQA
    tab = TAB + row * 8
    q_start = tl.load(tab)
    q_end = tl.load(tab + 1)
    offs_m = q_start + tl.arange(0, BLOCK_M)
    m_ok = offs_m < q_end
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(Q + offs_m[:, None] * stride_qt + h * stride_qh + offs_d[None, :],
                mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    q_last = tl.minimum(q_start + BLOCK_M, q_end) - 1
    k_base = K + hk * stride_kh
    v_base = V + hk * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0.0, tl.float32)
    acc = tl.full([BLOCK_M, BLOCK_D], 0.0, tl.float32)
    for r in tl.static_range(2):  # region A (prefix seen by a suffix), region B (own segment)
        start = tl.load(tab + 2 + 3 * r)
        length = tl.load(tab + 3 + 3 * r)
        blk = tl.load(tab + 4 + 3 * r)
        split, hi = _key_stages(q_start - start, q_last - start, length, blk, BLOCK_N)
        acc, m_i, l_i = _fwd_walk(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok,
                                  offs_m - start, start, length, blk, 0, split, qk_scale,
                                  False, BLOCK_N, PRECISION)
        acc, m_i, l_i = _fwd_walk(acc, m_i, l_i, q, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok,
                                  offs_m - start, start, length, blk, split, hi, qk_scale,
                                  True, BLOCK_N, PRECISION)
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf"))
    tl.store(Out + offs_m[:, None] * stride_ot + h * stride_oh + offs_d[None, :], out.to(Out.dtype.element_ty),
             mask=m_ok[:, None] & d_ok[None, :])
    tl.store(LSE + h * T + offs_m, lse, mask=m_ok)


@triton.jit
def _dq_walk(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok, offs_m_local,
             kv_start, kv_len, blk, n_lo, n_hi, qk_scale,
             MASKED: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    for n0 in range(n_lo, n_hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_ok = offs_n < kv_len
        rows = kv_start + offs_n
        k = tl.load(k_base + rows[:, None] * stride_kt + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        v = tl.load(v_base + rows[:, None] * stride_vt + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        p = tl.exp2(s - lse[:, None])
        if MASKED:
            blk_s = tl.maximum(blk, 1)
            ok = n_ok[None, :] & ((blk == 0) | ((offs_m_local[:, None] // blk_s) >= (offs_n[None, :] // blk_s)))
            p = tl.where(ok, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    return dq


@triton.jit
def _dq_kernel(Q, K, V, DO, DQ, LSE, DELTA, TAB,
               stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
               stride_dot, stride_doh, stride_dqt, stride_dqh,
               T, qk_scale, sm_scale, HEAD_DIM,
               GQA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
               PRECISION: tl.constexpr):
    row = tl.program_id(0)
    h = tl.program_id(1)
    hk = h // GQA
    tab = TAB + row * 8
    q_start = tl.load(tab)
    q_end = tl.load(tab + 1)
    offs_m = q_start + tl.arange(0, BLOCK_M)
    m_ok = offs_m < q_end
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    md = m_ok[:, None] & d_ok[None, :]
    q = tl.load(Q + offs_m[:, None] * stride_qt + h * stride_qh + offs_d[None, :], mask=md, other=0.0)
    do = tl.load(DO + offs_m[:, None] * stride_dot + h * stride_doh + offs_d[None, :], mask=md, other=0.0)
    lse = tl.load(LSE + h * T + offs_m, mask=m_ok, other=0.0)
    delta = tl.load(DELTA + h * T + offs_m, mask=m_ok, other=0.0)
    q_last = tl.minimum(q_start + BLOCK_M, q_end) - 1
    k_base = K + hk * stride_kh
    v_base = V + hk * stride_vh
    dq = tl.full([BLOCK_M, BLOCK_D], 0.0, tl.float32)
    for r in tl.static_range(2):
        start = tl.load(tab + 2 + 3 * r)
        length = tl.load(tab + 3 + 3 * r)
        blk = tl.load(tab + 4 + 3 * r)
        split, hi = _key_stages(q_start - start, q_last - start, length, blk, BLOCK_N)
        dq = _dq_walk(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok,
                      offs_m - start, start, length, blk, 0, split, qk_scale, False, BLOCK_N, PRECISION)
        dq = _dq_walk(dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, offs_d, d_ok,
                      offs_m - start, start, length, blk, split, hi, qk_scale, True, BLOCK_N, PRECISION)
    tl.store(DQ + offs_m[:, None] * stride_dqt + h * stride_dqh + offs_d[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=md)


@triton.jit
def _dkdv_walk(dk, dv, k, v, offs_n_local, n_ok, q_base, do_base, lse_base, delta_base,
               stride_qt, stride_dot, offs_d, d_ok, q_start, q_len, blk, m_lo, m_hi, qk_scale,
               MASKED: tl.constexpr, BLOCK_M: tl.constexpr, PRECISION: tl.constexpr):
    """Accumulate dK, dV of one key block over queries [m_lo, m_hi) (local to the query region)."""
    for m0 in range(m_lo, m_hi, BLOCK_M):
        offs_m = m0 + tl.arange(0, BLOCK_M)
        m_ok = offs_m < q_len
        rows = q_start + offs_m
        md = m_ok[:, None] & d_ok[None, :]
        q = tl.load(q_base + rows[:, None] * stride_qt + offs_d[None, :], mask=md, other=0.0)
        do = tl.load(do_base + rows[:, None] * stride_dot + offs_d[None, :], mask=md, other=0.0)
        lse = tl.load(lse_base + rows, mask=m_ok, other=0.0)
        delta = tl.load(delta_base + rows, mask=m_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (BLOCK_N, BLOCK_M)
        p_t = tl.exp2(s_t - lse[None, :])
        ok = n_ok[:, None] & m_ok[None, :]
        if MASKED:
            blk_s = tl.maximum(blk, 1)
            ok = ok & ((blk == 0) | ((offs_m[None, :] // blk_s) >= (offs_n_local[:, None] // blk_s)))
        p_t = tl.where(ok, p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
    return dk, dv


@triton.jit
def _query_stages(first, last, q_len, blk, BLOCK_M: tl.constexpr):
    """For keys [first, last] (local): queries before lo see none of them; queries [lo, mid) need
    the mask; queries [mid, q_len) see all of them."""
    blk_s = tl.maximum(blk, 1)
    lo = tl.where(blk == 0, 0, (first // blk_s) * blk_s)
    full = tl.where(blk == 0, 0, tl.minimum(q_len, (last // blk_s) * blk_s))
    mid = lo + (tl.maximum(full - lo, 0) + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    return lo, mid


@triton.jit
def _dkdv_kernel(Q, K, V, DO, DK, DV, DKP, DVP, LSE, DELTA, TAB,
                 stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                 stride_dot, stride_doh, stride_dkt, stride_dkh, stride_dvt, stride_dvh,
                 stride_pt, stride_ph,
                 T, qk_scale, sm_scale, HEAD_DIM,
                 GQA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 PRECISION: tl.constexpr):
    row = tl.program_id(0)
    hk = tl.program_id(1)
    tab = TAB + row * 9
    kv_start = tl.load(tab)
    kv_end = tl.load(tab + 1)
    offs_n = kv_start + tl.arange(0, BLOCK_N)
    n_ok = offs_n < kv_end
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    nd = n_ok[:, None] & d_ok[None, :]
    k = tl.load(K + offs_n[:, None] * stride_kt + hk * stride_kh + offs_d[None, :], mask=nd, other=0.0)
    v = tl.load(V + offs_n[:, None] * stride_vt + hk * stride_vh + offs_d[None, :], mask=nd, other=0.0)
    k_last = tl.minimum(kv_start + BLOCK_N, kv_end) - 1
    dk = tl.full([BLOCK_N, BLOCK_D], 0.0, tl.float32)
    dv = tl.full([BLOCK_N, BLOCK_D], 0.0, tl.float32)
    for g in range(GQA):  # query heads sharing this kv head, in order
        h = hk * GQA + g
        q_base = Q + h * stride_qh
        do_base = DO + h * stride_doh
        lse_base = LSE + h * T
        delta_base = DELTA + h * T
        for r in tl.static_range(2):  # region A: own segment's queries; B: all suffix queries of the group
            q_start = tl.load(tab + 2 + 3 * r)
            q_len = tl.load(tab + 3 + 3 * r)
            blk = tl.load(tab + 4 + 3 * r)
            lo, mid = _query_stages(kv_start - q_start, k_last - q_start, q_len, blk, BLOCK_M)
            dk, dv = _dkdv_walk(dk, dv, k, v, offs_n - q_start, n_ok, q_base, do_base, lse_base, delta_base,
                                stride_qt, stride_dot, offs_d, d_ok, q_start, q_len, blk, lo, mid, qk_scale,
                                True, BLOCK_M, PRECISION)
            dk, dv = _dkdv_walk(dk, dv, k, v, offs_n - q_start, n_ok, q_base, do_base, lse_base, delta_base,
                                stride_qt, stride_dot, offs_d, d_ok, q_start, q_len, blk, mid, q_len, qk_scale,
                                False, BLOCK_M, PRECISION)
    dk = dk * sm_scale
    slot = tl.load(tab + 8)
    if slot < 0:  # this program owns the block's gradient: write it in place
        tl.store(DK + offs_n[:, None] * stride_dkt + hk * stride_dkh + offs_d[None, :], dk.to(DK.dtype.element_ty), mask=nd)
        tl.store(DV + offs_n[:, None] * stride_dvt + hk * stride_dvh + offs_d[None, :], dv.to(DV.dtype.element_ty), mask=nd)
    else:  # one chunk of a split prefix block: fp32 partial, summed on the host in a fixed order
        prow = slot + tl.arange(0, BLOCK_N)
        tl.store(DKP + prow[:, None] * stride_pt + hk * stride_ph + offs_d[None, :], dk, mask=nd)
        tl.store(DVP + prow[:, None] * stride_pt + hk * stride_ph + offs_d[None, :], dv, mask=nd)
