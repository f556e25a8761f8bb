"""SharedPrefixBlock on packed tokens equals the same block on the replicated batch (torch SDPA)."""

from __future__ import annotations

import random

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from tests.cuda_ops.spa_oracle import random_layout, sequence_mask
from wmsuite.cuda_ops import SharedPrefixLayout
from wmsuite.nn import BlockConfig, SharedPrefixBlock


def replicated_mask(layout: SharedPrefixLayout) -> torch.Tensor:
    """(S, L_max, L_max) bool: each sequence's mask, padding attends only to itself."""
    L = layout.max_len
    masks = []
    for p, rs in zip(layout.prefix_lens, layout.suffix_lens):
        for r in rs:
            m = torch.eye(L, dtype=torch.bool)
            m[:p + r, :p + r] = sequence_mask(p, r, layout.prefix_mask, layout.suffix_mask)
            masks.append(m)
    return torch.stack(masks)


@pytest.mark.parametrize("seed", range(4))
def test_packed_block_equals_replicated_block_fp64(seed):
    rng = random.Random(seed)
    layout = random_layout(rng, SharedPrefixLayout, max_groups=2, max_n=3, max_p=10, max_r=6)
    torch.manual_seed(seed)
    block = SharedPrefixBlock(BlockConfig(dim=32, heads=4, kv_heads=2 if seed % 2 else 4)).double()
    x = torch.randn(layout.num_tokens, 32, dtype=torch.float64, requires_grad=True)
    w = torch.randn(layout.num_tokens, 32, dtype=torch.float64)

    y = block(x, layout, backend="reference")  # (T, C)
    (y * w).sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    x.grad = None

    # Oracle: the same block on the replicated sequences through torch SDPA with the dense mask.
    y_rep = block.forward_replicated(layout.unpack(x), layout.replicated_position_ids(), replicated_mask(layout))
    y_oracle = layout.pack(y_rep)  # (T, C): prefix outputs from each group's first copy
    (y_oracle * w).sum().backward()
    want = [x.grad] + [p.grad for p in block.parameters()]

    torch.testing.assert_close(y, y_oracle, rtol=0, atol=1e-12)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    # Every copy of a prefix in the replicated batch gives the same outputs.
    first = y_rep.flatten(0, 1)[layout._pack_index_cpu]
    torch.testing.assert_close(first, y_oracle, rtol=0, atol=0)


def test_causal_uniform_matches_is_causal_sdpa():
    layout = SharedPrefixLayout.uniform(2, 3, 7, 4)
    block = SharedPrefixBlock(BlockConfig(dim=16, heads=2)).double()
    x = torch.randn(layout.num_tokens, 16, dtype=torch.float64)
    y = block(x, layout, backend="reference")
    y_rep = block.forward_replicated(layout.unpack(x), layout.replicated_position_ids(), is_causal=True)
    torch.testing.assert_close(y, layout.pack(y_rep), rtol=0, atol=1e-12)


def test_flops_formula_matches_flop_counter():
    """BlockConfig.flops counts what torch's FlopCounterMode counts for full attention."""
    cfg = BlockConfig(dim=48, heads=6, kv_heads=2, mlp_ratio=3.0)
    block = SharedPrefixBlock(cfg)
    s, L = 3, 10
    x = torch.randn(s, L, cfg.dim)
    # The math backend spells attention as matmuls the counter sees; full attention: S * L^2 pairs.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        block.forward_replicated(x, torch.arange(L).expand(s, L))
    assert counter.get_total_flops() == cfg.flops(s * L, s * L * L)
    per_pair = 4 * cfg.heads * cfg.head_dim
    assert cfg.flops(s * L, s * L * L) - cfg.flops(s * L, 0) == s * L * L * per_pair


def test_config_validation_names_values():
    with pytest.raises(ValueError, match="even integer"):
        BlockConfig(dim=30, heads=4)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        BlockConfig(dim=32, heads=4, kv_heads=3)
    with pytest.raises(ValueError, match="mlp_ratio must be > 0, got 0"):
        BlockConfig(mlp_ratio=0)
    block = SharedPrefixBlock(BlockConfig(dim=16, heads=2))
    with pytest.raises(ValueError, match="expected packed tokens"):
        block(torch.zeros(3, 16), SharedPrefixLayout.uniform(1, 2, 2, 2))
