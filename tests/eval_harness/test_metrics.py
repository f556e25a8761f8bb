"""Sim-vs-real metrics against hand-computed cases (SIMPLER's definitions) and scipy.stats."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from wmsuite.eval_harness.metrics import (
    all_metrics,
    bootstrap,
    bootstrap_difference,
    kendall,
    mean_abs_error,
    mmrv,
    pearson,
    spearman,
)


def test_perfect_ranking():
    real = [0.1, 0.4, 0.8]
    m = all_metrics([0.2, 0.5, 0.9], real)
    assert m["mmrv"] == 0.0 and m["spearman"] == pytest.approx(1.0) and m["kendall"] == pytest.approx(1.0)
    assert m["pearson"] == pytest.approx(1.0) and m["mean_abs_error"] == pytest.approx(0.1)


def test_reversed_ranking_by_hand():
    real, sim = [0.1, 0.4, 0.8], [0.8, 0.4, 0.1]
    # policy 0 violates with 1 (|0.1-0.4|) and 2 (0.7) -> 0.7; policy 1: with 0 (0.3), 2 (0.4) -> 0.4; policy 2: 0.7
    assert mmrv(sim, real) == pytest.approx((0.7 + 0.4 + 0.7) / 3)
    assert spearman(sim, real) == pytest.approx(-1.0) and kendall(sim, real) == pytest.approx(-1.0)


def test_ties_count_as_violations():
    real, sim = [0.2, 0.6, 0.6], [0.3, 0.3, 0.5]
    # policy 0: no pair disagrees -> 0
    # policy 1: vs 0, sim ties (S1 > S0 is False) while R1 > R0 -> violation, gap 0.4
    # policy 2: vs 1, S2 > S1 while real ties -> violation, but its gap |R2 - R1| is 0
    assert mmrv(sim, real) == pytest.approx(0.4 / 3)


def test_constant_vectors():
    assert np.isnan(pearson([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]))
    assert np.isnan(kendall([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]))
    # a constant simulator ranks nothing: every ordered real pair is violated from the larger side
    assert mmrv([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) == pytest.approx((0 + 0.1 + 0.2) / 3)
    assert mmrv([0.5, 0.5], [0.3, 0.3]) == 0.0 and mean_abs_error([0.5, 0.5], [0.3, 0.3]) == pytest.approx(0.2)


def test_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        pearson([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="at least 2 policies"):
        mmrv([0.1], [0.2])


@pytest.mark.parametrize("seed", range(5))
def test_against_scipy(seed):
    rng = np.random.default_rng(seed)
    real = rng.integers(0, 11, 12) / 10  # ties on purpose
    sim = np.clip(real + rng.normal(0, 0.2, 12), 0, 1).round(1)
    assert pearson(sim, real) == pytest.approx(stats.pearsonr(sim, real).statistic, abs=1e-12)
    assert spearman(sim, real) == pytest.approx(stats.spearmanr(sim, real).statistic, abs=1e-12)
    assert kendall(sim, real) == pytest.approx(stats.kendalltau(sim, real).statistic, abs=1e-12)


def test_mmrv_matches_loop_definition():
    rng = np.random.default_rng(0)
    for _ in range(20):
        s, r = rng.integers(0, 5, 8) / 4, rng.integers(0, 5, 8) / 4
        loop = np.mean([max(abs(r[i] - r[j]) * ((s[i] > s[j]) != (r[i] > r[j])) for j in range(8)) for i in range(8)])
        assert mmrv(s, r) == pytest.approx(loop)


def test_bootstrap_intervals_cover_point_estimate():
    rng = np.random.default_rng(1)
    p = np.linspace(0.05, 0.95, 10)
    real = [rng.random(50) < q for q in p]
    sim = [rng.random(50) < q for q in p]
    ci = bootstrap(sim, real, samples=200)
    point = all_metrics([s.mean() for s in sim], [r.mean() for r in real])
    for name, (lo, hi) in ci.items():
        assert lo <= hi
        assert lo - 1e-9 <= point[name] <= hi + 1e-9 or name == "mmrv", (name, lo, point[name], hi)
    assert ci["pearson"][0] > 0.7


def test_bootstrap_difference_of_identical_simulators_is_exactly_zero():
    rng = np.random.default_rng(3)
    real = [rng.random(20) < p for p in (0.1, 0.5, 0.9)]
    sim = [rng.random(20) < p for p in (0.2, 0.4, 0.8)]
    out = bootstrap_difference(sim, sim, real, samples=200)
    for name in ("mmrv", "mean_abs_error", "pearson"):
        assert out[name]["difference"] == out[name]["low"] == out[name]["high"] == 0.0
        assert out[name]["b_better_share"] == 0.5


def test_bootstrap_difference_finds_the_better_simulator():
    rng = np.random.default_rng(4)
    real = [rng.random(30) < p for p in (0.0, 0.3, 0.6, 1.0)]
    exact = [r.copy() for r in real]  # B plays every start as the real simulator did
    flipped = [~r for r in real]  # A gets every start wrong: rates 1 - real
    out = bootstrap_difference(flipped, exact, real, samples=300)
    rates = [r.mean() for r in real]
    assert out["mean_abs_error"]["a"] == pytest.approx(np.mean([abs(1 - 2 * p) for p in rates]))
    assert out["mean_abs_error"]["b"] == 0.0 and out["mmrv"]["b"] == 0.0
    assert out["mean_abs_error"]["high"] < 0 and out["mean_abs_error"]["b_better_share"] == 1.0
    assert out["pearson"]["low"] > 0 and out["mmrv"]["difference"] < 0


def test_bootstrap_difference_refuses_unpaired_evaluations():
    with pytest.raises(ValueError, match="same starts"):
        bootstrap_difference([np.ones(5)], [np.ones(4)], [np.ones(5)])
    with pytest.raises(ValueError, match="same policies"):
        bootstrap_difference([np.ones(5)], [np.ones(5), np.ones(5)], [np.ones(5)])
