"""The compiled Triton kernel on CUDA (marked `gpu`; skipped without a CUDA device)."""

from __future__ import annotations

import logging
import random

import pytest
import torch

from tests.cuda_ops.spa_oracle import MASKS, fwd_bwd, oracle_attention, qkv, random_layout
from tests.cuda_ops.test_spa_reference import lowp_errors
from wmsuite.cuda_ops import SharedPrefixLayout, shared_prefix_attention

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
pytest.importorskip("triton")


@pytest.fixture(autouse=True)
def exact_fp32_matmuls():
    """The fp64 oracle must not run through TF32."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def triton(layout, split=None):
    from wmsuite.cuda_ops.triton_op import triton_attention

    return lambda q, k, v: triton_attention(q, k, v, layout, split=split)


@pytest.mark.parametrize("d", [32, 64, 80, 128])
def test_fp32_matches_oracle(d):
    rng = random.Random(d)
    for trial in range(3):
        layout = random_layout(rng, SharedPrefixLayout, max_groups=3, max_n=5, max_p=300, max_r=150)
        q, k, v = qkv(layout, 4, 2, d, torch.float64, device="cuda", seed=trial)
        do = torch.randn_like(q)
        want = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
        got = fwd_bwd(triton(layout, split=1 + trial), *(x.float() for x in (q, k, v, do)))
        for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
            torch.testing.assert_close(a.double(), b, rtol=0, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
def test_low_precision_within_twice_sdpa_error(dtype, d):
    rng = random.Random(7)
    for trial in range(3):
        layout = random_layout(rng, SharedPrefixLayout, max_groups=2, max_n=6, max_p=400, max_r=200)
        err, bound = lowp_errors(triton(layout), layout, dtype, trial, hq=8, hkv=2, d=d, device="cuda")
        for name, e, b in zip(("out", "dq", "dk", "dv"), err, bound):
            assert e <= b, f"{name}: error {e:.2e} above the bound {b:.2e} ({dtype}, d={d})"


@pytest.mark.parametrize("prefix_mask", MASKS)
@pytest.mark.parametrize("suffix_mask", MASKS)
def test_edge_cases_every_mask(prefix_mask, suffix_mask):
    for lists in (([0], [[70, 5]]), ([90], [[0, 33, 0]]), ([130], [[64]]), ([5, 77, 0], [[3], [0, 120], [9]])):
        layout = SharedPrefixLayout.from_lists(*lists, prefix_mask, suffix_mask)
        err, bound = lowp_errors(triton(layout), layout, torch.float16, 0, hq=4, hkv=1, d=64, device="cuda")
        assert all(e <= b for e, b in zip(err, bound)), (lists, err, bound)


def test_backward_is_deterministic():
    layout = SharedPrefixLayout.uniform(2, 12, 256, 64)
    q, k, v = qkv(layout, 8, 2, 64, torch.bfloat16, device="cuda")
    do = torch.randn_like(q)
    first = fwd_bwd(triton(layout, split=4), q, k, v, do)
    for _ in range(3):
        again = fwd_bwd(triton(layout, split=4), q, k, v, do)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


def test_dispatch_picks_triton_and_logs(caplog):
    layout = SharedPrefixLayout.uniform(1, 2, 40, 8)
    q, k, v = (x.detach() for x in qkv(layout, 2, 2, 64, torch.float16, device="cuda"))
    caplog.set_level(logging.INFO, logger="wmsuite.cuda_ops")
    out = shared_prefix_attention(q, k, v, layout)
    assert torch.isfinite(out).all()
    from wmsuite.cuda_ops.attention import _logged

    assert ("triton", "cuda", "CUDA tensors") in _logged
    # fp64 is not a kernel dtype: the reference runs, with a warning rather than silently.
    shared_prefix_attention(q.double(), k.double(), v.double(), layout)
    assert any(key[0] == "reference" and key[1] == "cuda" for key in _logged)


def test_opcheck_cuda():
    layout = SharedPrefixLayout.from_lists([70, 4], [[50, 0], [65]], "causal", "block:16")
    q, k, v = qkv(layout, 4, 2, 64, torch.float16, device="cuda")
    args = (q, k, v, layout.query_table(64, "cuda"), layout.key_table(64, 64, 2, "cuda"),
            layout.prefix_index("cuda"), 0.125, 64, 64, 2)
    torch.library.opcheck(torch.ops.wmsuite.shared_prefix_attention.default, args)


def test_torch_compile_inductor():
    layout = SharedPrefixLayout.uniform(1, 4, 128, 32)
    q, k, v = qkv(layout, 4, 4, 64, torch.bfloat16, device="cuda")

    def f(q, k, v):
        return shared_prefix_attention(q, k, v, layout).float().square().sum()[None]

    got = fwd_bwd(torch.compile(f, fullgraph=True), q, k, v, torch.ones(1, device="cuda"))
    want = fwd_bwd(f, q, k, v, torch.ones(1, device="cuda"))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_block_on_cuda_matches_reference():
    from wmsuite.nn import BlockConfig, SharedPrefixBlock

    layout = SharedPrefixLayout.from_lists([100, 7], [[20, 30, 0], [50]], "full", "causal")
    block = SharedPrefixBlock(BlockConfig(dim=256, heads=4, kv_heads=2)).cuda().float()
    x = torch.randn(layout.num_tokens, 256, device="cuda")
    torch.testing.assert_close(block(x, layout, backend="triton"), block(x, layout, backend="reference"),
                               rtol=1e-4, atol=1e-4)


def test_bench_quick_on_gpu(tmp_path):
    from wmsuite.cli import main

    assert main(["bench", "attention", "--quick", "--device", "cuda", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "metrics.json").exists()
