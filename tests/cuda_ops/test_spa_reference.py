"""The PyTorch reference against torch SDPA on the replicated layout (the independent oracle)."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

import wmsuite.cuda_ops.reference as reference_module
from tests.cuda_ops.spa_oracle import MASKS, fwd_bwd, oracle_attention, qkv, random_layout
from wmsuite.cuda_ops import SharedPrefixLayout, reference_attention


def assert_matches_oracle(layout, hq, hkv, d, dtype=torch.float64, atol=1e-10, seed=0):
    q, k, v = qkv(layout, hq, hkv, d, dtype, seed=seed)
    do = torch.randn_like(q)
    got = fwd_bwd(lambda q, k, v: reference_attention(q, k, v, layout), q, k, v, do)
    want = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, rtol=0, atol=atol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("chunk", [None, 3])
def test_random_layouts_fp64(monkeypatch, chunk):
    """Random ragged layouts, every mask pair, grouped-query heads; out and all gradients."""
    if chunk is not None:  # many query chunks per region
        monkeypatch.setattr(reference_module, "QUERY_CHUNK", chunk)
        monkeypatch.setattr(reference_module, "FULL_QUERY_CHUNK", chunk)
    rng = random.Random(chunk or 0)
    for trial in range(40):
        layout = random_layout(rng, SharedPrefixLayout)
        hkv = rng.choice([1, 2])
        assert_matches_oracle(layout, hkv * rng.choice([1, 3]), hkv, rng.choice([4, 8]), seed=trial)


EDGE_LAYOUTS = {
    "N=1": ([6], [[5]]),
    "P=0": ([0], [[4, 3]]),
    "R=0": ([5], [[0]]),
    "R=0 and R>0": ([5], [[0, 3, 0]]),
    "P=0,N=1": ([0], [[6]]),
    "ragged groups": ([7, 0, 3], [[1, 4], [2], [0, 0, 5]]),
}


@pytest.mark.parametrize("prefix_mask", MASKS)
@pytest.mark.parametrize("suffix_mask", MASKS)
@pytest.mark.parametrize("edge", EDGE_LAYOUTS)
def test_edge_cases_every_mask(edge, prefix_mask, suffix_mask):
    layout = SharedPrefixLayout.from_lists(*EDGE_LAYOUTS[edge], prefix_mask, suffix_mask)
    assert_matches_oracle(layout, 2, 1, 8)


def test_uniform_causal_equals_plain_causal_sdpa():
    """With causal masks everywhere the replicated layout is ordinary causal attention."""
    n, p, r, h, d = 3, 11, 6, 2, 8
    layout = SharedPrefixLayout.uniform(1, n, p, r)
    q, k, v = qkv(layout, h, h, d, torch.float64)
    out = reference_attention(q, k, v, layout)
    rep = [layout.unpack(x).transpose(1, 2) for x in (q, k, v)]  # (N, H, P+R, D)
    want = F.scaled_dot_product_attention(*rep, is_causal=True).transpose(1, 2)  # (N, P+R, H, D)
    torch.testing.assert_close(out[:p], want[0, :p], rtol=0, atol=1e-12)
    for i in range(n):  # every copy of the prefix gives the same outputs; suffixes their own
        torch.testing.assert_close(out[:p], want[i, :p], rtol=0, atol=1e-12)
        torch.testing.assert_close(out[p + i * r:p + (i + 1) * r], want[i, p:], rtol=0, atol=1e-12)


def test_prefix_gradient_is_summed_over_suffixes():
    """N identical suffixes: the prefix receives exactly N times the gradient of one."""
    p, r, h, d = 5, 4, 2, 8
    g = torch.Generator().manual_seed(1)
    base = [torch.randn(p + r, h, d, generator=g, dtype=torch.float64) for _ in range(3)]
    do_base = torch.randn(p + r, h, d, generator=g, dtype=torch.float64)
    do_base[:p] = 0  # only suffix outputs carry a loss
    grads = {}
    for n in (1, 4):
        layout = SharedPrefixLayout.uniform(1, n, p, r)
        q, k, v = (torch.cat([x[:p]] + [x[p:]] * n).requires_grad_() for x in base)
        do = torch.cat([do_base[:p]] + [do_base[p:]] * n)
        reference_attention(q, k, v, layout).backward(do)
        grads[n] = (q.grad[:p], k.grad[:p], v.grad[:p], k.grad[p:p + r])
    for one, four in zip(grads[1][:3], grads[4][:3]):
        torch.testing.assert_close(four, 4 * one, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grads[4][3], grads[1][3], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lists,masks", [
    (([3], [[2, 3]]), ("causal", "causal")),
    (([3, 0], [[2, 0], [3]]), ("block:2", "full")),
    (([4], [[1, 2]]), ("full", "block:2")),
])
def test_gradcheck_fp64(lists, masks):
    layout = SharedPrefixLayout.from_lists(*lists, *masks)
    q, k, v = qkv(layout, 2, 1, 4, torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: reference_attention(q, k, v, layout), (q, k, v))


def test_fp32_tight():
    rng = random.Random(7)
    for trial in range(5):
        layout = random_layout(rng, SharedPrefixLayout, max_p=30, max_r=20)
        q, k, v = qkv(layout, 4, 2, 32, torch.float64, seed=trial)
        do = torch.randn_like(q)
        want = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
        got = fwd_bwd(lambda q, k, v, layout=layout: reference_attention(q, k, v, layout), *(x.float() for x in (q, k, v, do)))
        for a, b in zip(got, want):
            torch.testing.assert_close(a.double(), b, rtol=0, atol=2e-5)


def lowp_errors(impl, layout, dtype, seed, hq=4, hkv=2, d=32, device="cpu"):
    """Max errors (out, dq, dk, dv) of `impl` at `dtype` against the fp64 oracle on the same
    (rounded) inputs, and the allowed bound of flash-attention's test rule:
    2 x the error of SDPA at `dtype` + 2 x the rounding of `dtype` at the magnitude of the
    values (`(x + 0.3 - 0.3) - x` evaluated in `dtype`)."""
    q, k, v = qkv(layout, hq, hkv, d, dtype, device=device, seed=seed)
    g = torch.Generator().manual_seed(seed)
    do = torch.randn(q.shape, dtype=torch.float64, generator=g).to(device=device, dtype=dtype)
    exact = fwd_bwd(lambda q, k, v: oracle_attention(q, k, v, layout), *(x.double() for x in (q, k, v, do)))
    ours = fwd_bwd(impl, q, k, v, do)
    sdpa = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
    err = [(a.double() - e).abs().max().item() for a, e in zip(ours, exact)]
    bound = []
    for s, e in zip(sdpa, exact):
        low = e.to(dtype)
        rounding = (low + 0.3 - 0.3 - low).abs().max().item()
        bound.append(2 * (s.double() - e).abs().max().item() + 2 * rounding)
    return err, bound


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_within_twice_sdpa_error(dtype):
    rng = random.Random(11)
    for trial in range(3):
        layout = random_layout(rng, SharedPrefixLayout, max_p=30, max_r=20)
        err, bound = lowp_errors(lambda q, k, v, layout=layout: reference_attention(q, k, v, layout), layout, dtype, trial)
        for name, e, b in zip(("out", "dq", "dk", "dv"), err, bound):
            assert e <= b, f"{name}: error {e:.2e} above the bound {b:.2e} ({dtype})"
