"""The dense backend for uniform layouts against torch SDPA on the replicated layout (the oracle), and
the automatic choice: dense for uniform layouts off the GPU, the reference for ragged ones."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from tests.cuda_ops.spa_oracle import MASKS, fwd_bwd, oracle_attention, qkv
from wmsuite.cuda_ops import SharedPrefixLayout, select_backend, shared_prefix_attention
from wmsuite.cuda_ops.dense import dense_attention, dense_fits

SHAPES = [(1, 16, 57, 8), (3, 2, 5, 4), (2, 1, 6, 0), (1, 3, 0, 5), (2, 4, 1, 1)]  # (G, N, P, R), P = 0 and R = 0 too


@pytest.mark.parametrize("masks", list(itertools.product(MASKS, MASKS)))
def test_uniform_layouts_match_the_replicated_oracle_with_gradients(masks):
    rng = random.Random(0)
    for trial, (g, n, p, r) in enumerate(SHAPES):
        layout = SharedPrefixLayout.uniform(g, n, p, r, *masks)
        hkv = rng.choice([1, 2])
        q, k, v = qkv(layout, hkv * rng.choice([1, 2]), hkv, 8, torch.float64, seed=trial)
        do = torch.randn_like(q)
        got = fwd_bwd(lambda q, k, v, layout=layout: dense_attention(q, k, v, layout), q, k, v, do)
        want = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
        for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=lambda m, name=name, layout=layout: f"{layout}: {name}: {m}")


def test_half_precision_is_computed_in_float32():
    layout = SharedPrefixLayout.uniform(2, 3, 7, 4, "full", "causal")
    q, k, v = (x.detach() for x in qkv(layout, 2, 2, 8, torch.float32))
    got = dense_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), layout)
    assert got.dtype == torch.bfloat16
    want = dense_attention(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(), layout)
    torch.testing.assert_close(got, want.bfloat16(), rtol=0, atol=0)


def test_the_automatic_choice_and_a_ragged_layout_refused():
    uniform, ragged = SharedPrefixLayout.uniform(2, 3, 5, 4), SharedPrefixLayout.from_lists([5, 4], [[4], [4, 4]])
    q = torch.zeros(uniform.num_tokens, 2, 8)
    assert select_backend(q, layout=uniform)[0] == "dense" and select_backend(q, layout=ragged)[0] == "reference"
    assert select_backend(q, "reference", uniform)[0] == "reference"  # asked for: honoured
    long = SharedPrefixLayout.uniform(1, 16, 1024, 128)  # 16 x 128 x 1152 + 1024^2 scores per head
    q8 = torch.zeros(long.num_tokens, 8, 8)
    assert not dense_fits(long, 8) and select_backend(q8, layout=long)[0] == "reference"  # too big to hold at once
    x = torch.randn(ragged.num_tokens, 2, 8)
    with pytest.raises(ValueError, match="reference backend"):
        shared_prefix_attention(x, x, x, ragged, backend="dense")
    q, k, v = (t.detach() for t in qkv(uniform, 2, 2, 8, torch.float64))
    torch.testing.assert_close(shared_prefix_attention(q, k, v, uniform),
                               shared_prefix_attention(q, k, v, uniform, backend="reference"), rtol=0, atol=1e-12)
