"""Abstention figures against cases whose answer is known: an oracle trust score, a useless one,
Spearman by hand."""

import math

import numpy as np
import pytest

from wmsuite.eval_harness.abstention import abstention_figures, error_at, keep_mask, selective_curve


def test_keep_mask_keeps_exactly_the_most_trusted_share():
    trust = np.array([0.1, 0.9, 0.5, 0.5, 0.3])
    assert keep_mask(trust, 0.4).tolist() == [False, True, True, False, False]  # ceil(2.0): ties by order
    assert keep_mask(trust, 1.0).all()
    with pytest.raises(ValueError, match="coverage"):
        keep_mask(trust, 0.0)


def test_an_oracle_score_removes_the_errors_and_a_constant_one_does_not():
    rng = np.random.default_rng(0)
    incurred = (rng.random(1000) < 0.2).astype(float)
    oracle = selective_curve(1 - incurred + 0.01 * rng.random(1000), incurred)
    assert error_at(oracle, 1.0) == pytest.approx(incurred.mean())
    assert error_at(oracle, 0.8) < 0.01 and error_at(oracle, 0.7) == 0.0  # ~20% errors, all dropped first
    flat = selective_curve(np.zeros(1000), incurred)  # no information: the kept share is the first ones
    assert error_at(flat, 0.5) == pytest.approx(incurred[:500].mean())


def _episodes():
    """Three policies, 10 starts each; the model misjudges policy 'b' on 6 starts, 'c' on 2, 'a' on 0,
    and its trust score is lowest on exactly the misjudged episodes."""
    eps = []
    for name, wrong in (("a", 0), ("b", 6), ("c", 2)):
        for i in range(10):
            miss = i < wrong
            eps.append({"policy": name, "sim": "real", "episode": i, "success": False, "length": 80})
            eps.append({"policy": name, "sim": "wm", "episode": i, "success": miss, "length": 40 if miss else 80,
                        "trust": 0.2 if miss else 0.9})
    rows = [{"name": n, "predicted_success": w / 10, "real_success": 0.0} for n, w in (("a", 0), ("b", 6), ("c", 2))]
    return eps, rows


def test_abstention_figures_of_an_evaluation():
    eps, rows = _episodes()
    f = abstention_figures(eps, rows, "trust", coverage=0.7)
    assert f["error_all"] == pytest.approx(8 / 30)
    assert f["error_at_coverage"] == 0.0  # the 21 most trusted are 21 of the 22 right ones
    assert error_at(f["curve"], 0.8) == pytest.approx(2 / 24)  # 24 kept: the 22 right ones and 2 wrong
    assert f["policies"]["b"]["mean_trust"] == pytest.approx((6 * 0.2 + 4 * 0.9) / 10)
    assert f["policies"]["b"]["predicted_success_kept"] == 0.0
    # |error| 0, 0.6, 0.2 vs distrust 0.1, 0.52, 0.24: the same order, Spearman 1
    assert f["trust_error_spearman"] == pytest.approx(1.0)
    # depth-only baseline: the wrong episodes are the short ones, which it trusts most: all 8 are kept
    assert f["depth_error_at_coverage"] == pytest.approx(8 / 21)


def test_missing_trust_is_named():
    eps, rows = _episodes()
    del eps[1]["trust"]
    with pytest.raises(ValueError, match="lack 'trust'"):
        abstention_figures(eps, rows, "trust")
    eps, rows = _episodes()
    for e in eps:
        e["trust"] = 0.5  # one score for all: no policy-level ranking to report
    assert math.isnan(abstention_figures(eps, rows, "trust")["trust_error_spearman"])
