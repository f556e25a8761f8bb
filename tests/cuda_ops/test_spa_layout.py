"""SharedPrefixLayout: packing, positions and counted work, against explicit constructions."""

from __future__ import annotations

import random

import pytest
import torch

from tests.cuda_ops.spa_oracle import random_layout, sequence_mask
from wmsuite.cuda_ops import SharedPrefixLayout, mask_block, visible_pairs


def explicit_sequences(x: torch.Tensor, layout: SharedPrefixLayout) -> list[torch.Tensor]:
    """cat(prefix_g, suffix_gi) for every suffix, by slicing the packed tensor."""
    out, start = [], 0
    for p, rs in zip(layout.prefix_lens, layout.suffix_lens):
        off = start + p
        for r in rs:
            out.append(torch.cat([x[start:start + p], x[off:off + r]]))
            off += r
        start = off
    return out


@pytest.mark.parametrize("seed", range(5))
def test_unpack_pack_and_positions_match_explicit_replication(seed):
    layout = random_layout(random.Random(seed), SharedPrefixLayout, max_groups=3, max_n=4)
    x = torch.randn(layout.num_tokens, 3)
    rep = layout.unpack(x)  # (S, L_max, 3)
    seqs = explicit_sequences(x, layout)
    assert rep.shape == (len(seqs), max(len(s) for s in seqs), 3)
    valid = layout.replicated_valid()
    for s, seq in enumerate(seqs):
        torch.testing.assert_close(rep[s, :len(seq)], seq, rtol=0, atol=0)
        assert bool((rep[s, len(seq):] == 0).all()) and int(valid[s].sum()) == len(seq)
    torch.testing.assert_close(layout.pack(rep), x, rtol=0, atol=0)
    # Position ids of the packed tokens are their indices in the replicated sequences.
    pos = layout.position_ids().float()[:, None]
    for s, seq in enumerate(explicit_sequences(pos, layout)):
        torch.testing.assert_close(seq[:, 0], torch.arange(len(seq), dtype=torch.float32))
        torch.testing.assert_close(layout.replicated_position_ids()[s, :len(seq)].float(), seq[:, 0])
    assert layout.num_tokens == sum(layout.prefix_lens) + sum(map(sum, layout.suffix_lens))
    assert layout.replicated_tokens == sum(len(s) for s in seqs)


def test_unpack_gradient_sums_prefix_copies():
    layout = SharedPrefixLayout.from_lists([4, 2], [[3, 0, 2], [5]])
    x = torch.randn(layout.num_tokens, 2, requires_grad=True)
    w = torch.randn(layout.num_sequences, layout.max_len, 2)
    (layout.unpack(x) * w).sum().backward()
    # Expected: every packed token collects w at each replicated slot that holds it.
    expected = torch.zeros_like(x)
    idx = torch.arange(layout.num_tokens, dtype=torch.float32)[:, None]
    for s, seq in enumerate(explicit_sequences(idx, layout)):
        for t, token in enumerate(seq[:, 0].long()):
            expected[token] += w[s, t]
    torch.testing.assert_close(x.grad, expected)
    # Prefix tokens of group 0 appear in its 3 suffixes; group 1's in 1.
    torch.testing.assert_close(x.grad[0], w[0, 0] + w[1, 0] + w[2, 0])


@pytest.mark.parametrize("n,p,r", [(16, 1024, 128), (8, 4096, 1024), (28, 4096, 2048), (1, 7, 0), (3, 0, 5)])
def test_token_ratio_and_causal_pairs(n, p, r):
    layout = SharedPrefixLayout.uniform(1, n, p, r)
    assert layout.token_ratio == pytest.approx(n * (p + r) / (p + n * r))
    # Exact causal counts: a causal square of L tokens has L(L+1)/2 pairs.
    packed = p * (p + 1) // 2 + n * (p * r + r * (r + 1) // 2)
    assert layout.attended_pairs() == packed
    assert layout.attended_pairs(replicated=True) == n * (p + r) * (p + r + 1) // 2
    if p + r > 1000:  # the continuum formula of the issue
        ratio = n * (p + r) ** 2 / (p * p + 2 * n * p * r + n * r * r)
        assert layout.attended_pairs(replicated=True) / packed == pytest.approx(ratio, rel=2e-3)


@pytest.mark.parametrize("seed", range(4))
def test_attended_pairs_equal_mask_counts(seed):
    layout = random_layout(random.Random(100 + seed), SharedPrefixLayout, max_groups=3, max_n=4, max_p=12, max_r=9)
    rep = packed = 0
    for p, rs in zip(layout.prefix_lens, layout.suffix_lens):
        for i, r in enumerate(rs):
            m = sequence_mask(p, r, layout.prefix_mask, layout.suffix_mask)
            rep += int(m.sum())
            packed += int(m[p:].sum()) + (int(m[:p].sum()) if i == 0 else 0)
    assert layout.attended_pairs(replicated=True) == rep
    assert layout.attended_pairs() == packed


def test_mask_specs_and_visible_pairs():
    assert mask_block("full") == 0 and mask_block("causal") == 1 and mask_block("block:16") == 16
    for bad in ("Causal", "block:0", "block:x", "block", ""):
        with pytest.raises(ValueError, match="mask must be"):
            mask_block(bad)
    assert visible_pairs(5, 0) == 25 and visible_pairs(5, 1) == 15
    assert visible_pairs(5, 2) == 2 + 2 + 4 + 4 + 5  # frames {0,1}, {2,3}, {4}


def test_validation_names_the_problem():
    with pytest.raises(ValueError, match="group 1 has no suffix"):
        SharedPrefixLayout.from_lists([3, 3], [[1], []])
    with pytest.raises(ValueError, match="prefix lengths must be >= 0"):
        SharedPrefixLayout.from_lists([-1], [[1]])
    with pytest.raises(ValueError, match="2 groups"):
        SharedPrefixLayout.from_lists([1, 2], [[1]])
    with pytest.raises(ValueError, match="mask must be"):
        SharedPrefixLayout.from_lists([1], [[1]], suffix_mask="blocky")
    layout = SharedPrefixLayout.uniform(2, 3, 4, 5)
    with pytest.raises(ValueError, match="expected 38 packed tokens"):
        layout.unpack(torch.zeros(5, 2))
