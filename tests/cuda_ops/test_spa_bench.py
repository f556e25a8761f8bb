"""Smoke run of `wmsuite bench attention --quick`: the figures it writes are the ones it claims."""

from __future__ import annotations

import json
import math

import pytest

from wmsuite.cli import main
from wmsuite.cli.bench_attention import BenchAttentionConfig


def causal(length: int) -> int:
    return length * (length + 1) // 2


def test_quick_bench_writes_consistent_rows(tmp_path, capsys):
    assert main(["bench", "attention", "--quick", "--out", str(tmp_path), "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    data = json.loads((tmp_path / "metrics.json").read_text())
    rows = data["rows"]
    assert {(r["N"], r["P"], r["R"], r["what"]) for r in rows} == {
        (4, 96, 16, "op"), (4, 96, 16, "block"), (2, 32, 32, "op"), (2, 32, 32, "block")}
    c = data["heads"] * data["head_dim"]
    for row in rows:
        n, p, r = row["N"], row["P"], row["R"]
        assert {"N", "P", "R", "rho", "what", "backend", "ideal", "speedup"} <= set(row)
        assert row["rho"] == pytest.approx(n * (p + r) / (p + n * r))
        pairs_rep, pairs = n * causal(p + r), causal(p) + n * (p * r + causal(r))
        if row["what"] == "op":
            assert row["ideal"] == pytest.approx(pairs_rep / pairs)
        else:  # qkv 6C^2 + proj 2C^2 + MLP(4x) 16C^2 per token, 4C per attended pair (2 per MAC)
            flops = lambda tokens, pairs_: tokens * 24 * c * c + pairs_ * 4 * c  # noqa: E731
            assert row["ideal"] == pytest.approx(flops(n * (p + r), pairs_rep) / flops(p + n * r, pairs))
        assert row["backend"] == "dense vs sdpa"  # CPU tensors, uniform layouts: the dense path
        assert math.isfinite(row["speedup"]) and row["speedup"] > 0
        assert row["speedup"] == pytest.approx(row["ms_replicated"] / row["ms_packed"])
        assert f"{row['speedup']:.2f}" in printed
    assert data["clock"] in ("thread CPU time", "wall time")


def test_config_validation():
    with pytest.raises(ValueError, match="N,P,R"):
        BenchAttentionConfig(shapes=["16,1024"])
    with pytest.raises(ValueError, match="dtype must be one of"):
        BenchAttentionConfig(dtype="fp8")
    assert BenchAttentionConfig(shapes=["3,5,7"]).grid() == [(3, 5, 7)]
