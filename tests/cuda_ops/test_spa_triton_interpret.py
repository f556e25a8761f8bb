"""The Triton kernel, run by the Triton interpreter on CPU, against the SDPA oracle.

No GPU needed: the dispatcher loads a second, interpreted copy of the kernels for CPU tensors
(whatever TRITON_INTERPRET was when triton was imported). The interpreter is slow and computes
bf16 wrongly, so these cases are small and fp32/fp16; `test_spa_gpu.py` covers the compiled
kernel and bf16 on CUDA.
"""

from __future__ import annotations

import logging
import random

import pytest
import torch

import wmsuite.cuda_ops.attention as attention_module
from tests.cuda_ops.spa_oracle import MASKS, fwd_bwd, oracle_attention, qkv, random_layout
from tests.cuda_ops.test_spa_reference import lowp_errors
from wmsuite.cuda_ops import SharedPrefixLayout, shared_prefix_attention, use_backend
from wmsuite.cuda_ops.attention import ENV_VAR

pytest.importorskip("triton")
from wmsuite.cuda_ops.triton_op import triton_attention  # noqa: E402


def check_fp32(layout, hq, hkv, d, split, seed=0, atol=2e-5):
    q, k, v = qkv(layout, hq, hkv, d, torch.float64, seed=seed)
    do = torch.randn_like(q)
    want = fwd_bwd(lambda q, k, v, layout=layout: oracle_attention(q, k, v, layout), q, k, v, do)
    got = fwd_bwd(lambda q, k, v: triton_attention(q, k, v, layout, split=split),
                  *(x.float() for x in (q, k, v, do)))
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        torch.testing.assert_close(a.double(), b, rtol=0, atol=atol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("seed", range(4))
def test_random_layouts_fp32(seed):
    """Ragged layouts spanning several 16-token blocks, grouped-query heads, head dims that are
    not powers of two, and the dK/dV split over suffix chunks."""
    rng = random.Random(seed)
    layout = random_layout(rng, SharedPrefixLayout, max_groups=2, max_n=3, max_p=40, max_r=24,
                           prefix_mask=MASKS[seed % 3], suffix_mask=MASKS[(seed + 1) % 3])
    check_fp32(layout, hq=2 * (1 + seed % 2), hkv=1 + seed % 2, d=(16, 24, 32, 40)[seed], split=1 + seed % 3, seed=seed)


@pytest.mark.parametrize("lists,masks", [
    (([0], [[21, 5]]), ("causal", "block:4")),  # P = 0
    (([19], [[0, 7, 0]]), ("block:4", "full")),  # R = 0 segments
    (([33], [[18]]), ("full", "causal")),  # N = 1
    (([5, 17, 0], [[3], [0, 20], [9]]), ("causal", "causal")),  # several groups
])
def test_edge_cases_fp32(lists, masks):
    layout = SharedPrefixLayout.from_lists(*lists, *masks)
    check_fp32(layout, hq=2, hkv=1, d=16, split=2)


def test_fp16_within_twice_sdpa_error():
    rng = random.Random(3)
    for trial in range(2):
        layout = random_layout(rng, SharedPrefixLayout, max_p=36, max_r=20)
        err, bound = lowp_errors(lambda q, k, v, layout=layout: triton_attention(q, k, v, layout), layout, torch.float16, trial)
        for name, e, b in zip(("out", "dq", "dk", "dv"), err, bound):
            assert e <= b, f"{name}: error {e:.2e} above the bound {b:.2e}"


def test_opcheck():
    """Schema, fake (meta) implementation, autograd registration and AOT dispatch of the op."""
    layout = SharedPrefixLayout.from_lists([9, 4], [[5, 0], [7]], "causal", "block:2")
    q, k, v = qkv(layout, 2, 1, 16, torch.float32)
    args = (q, k, v, layout.query_table(16, "cpu"), layout.key_table(16, 16, 2, "cpu"),
            layout.prefix_index("cpu"), 0.25, 16, 16, 2)
    torch.library.opcheck(torch.ops.wmsuite.shared_prefix_attention.default, args)


def test_torch_compile_fullgraph(monkeypatch, caplog):
    """The op composes with torch.compile without graph breaks: layout metadata and the backend
    choice are computed when traced, and the choice is logged then."""
    monkeypatch.setattr(attention_module, "_logged", set())
    caplog.set_level(logging.INFO, logger="wmsuite.cuda_ops")
    layout = SharedPrefixLayout.from_lists([10], [[6, 3]], "causal", "full")  # fresh: cold caches
    q, k, v = qkv(layout, 2, 2, 16, torch.float32)

    def f(q, k, v):
        return (shared_prefix_attention(q, k, v, layout, backend="triton") * 0.5).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    got = fwd_bwd(lambda q, k, v: compiled(q, k, v)[None], q, k, v, torch.ones(1))
    assert any("using triton on cpu" in r.getMessage() for r in caplog.records)
    want = fwd_bwd(lambda q, k, v: f(q, k, v)[None], q, k, v, torch.ones(1))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_dispatch_choice_override_and_logging(caplog, monkeypatch):
    monkeypatch.setattr(attention_module, "_logged", set())
    layout = SharedPrefixLayout.from_lists([5], [[3, 2]])
    q, k, v = (x.detach() for x in qkv(layout, 2, 2, 16, torch.float32))
    caplog.set_level(logging.INFO, logger="wmsuite.cuda_ops")
    ref = shared_prefix_attention(q, k, v, layout)
    with use_backend("triton"):
        tri = shared_prefix_attention(q, k, v, layout)
        tri2 = shared_prefix_attention(q, k, v, layout)
    msgs = [r.getMessage() for r in caplog.records if r.name == "wmsuite.cuda_ops"]
    assert msgs == ["shared_prefix_attention: using reference on cpu (cpu tensors)",
                    "shared_prefix_attention: using triton on cpu (requested by use_backend(); "
                    "Triton interpreter (slow, for tests))"]  # each once
    torch.testing.assert_close(tri, ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(tri2, tri, rtol=0, atol=0)
    monkeypatch.setenv(ENV_VAR, "triton")
    from wmsuite.cuda_ops import select_backend

    assert select_backend(q)[0] == "triton" and select_backend(q, "reference")[0] == "reference"
    monkeypatch.setenv(ENV_VAR, "cudnn")
    with pytest.raises(ValueError, match="backend must be one of"):
        select_backend(q)
    monkeypatch.delenv(ENV_VAR)
    with pytest.raises(ValueError, match="bf16 on CPU"):
        shared_prefix_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), layout, backend="triton")
    with pytest.raises(ValueError, match="head dim 8"):
        shared_prefix_attention(q[..., :8], k[..., :8], v[..., :8], layout, backend="triton")
