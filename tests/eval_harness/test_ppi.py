"""Prediction-powered estimates against cases worked by hand, and their coverage by simulation."""

import math

import numpy as np
import pytest

from wmsuite.eval_harness.ppi import (
    Z95,
    coverage_study,
    mean_over_draws,
    paired_outcomes,
    ppi_mean,
    real_only,
)

Y, YHAT, YU = [1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0, 1, 0]


def test_classic_ppi_by_hand():
    # lam = 1: mean(YU) + mean(Y - YHAT) = 0.5 + 0.25; var(YU) = 1.5 / 5, var(Y - YHAT) = 0.75 / 3
    est = ppi_mean(Y, YHAT, YU, lam=1.0, pseudo=0.0)
    assert est.value == pytest.approx(0.75)
    se = math.sqrt(0.3 / 6 + 0.25 / 4)
    assert est.low == pytest.approx(0.75 - Z95 * se) and est.high == 1.0  # clipped from 1.41


def test_power_tuned_weight_by_hand():
    # var of all 10 imagined outcomes (5 ones) = 2.5 / 9; cov(Y, YHAT) = 0.5 / 3; lam = cov / ((1 + 4/6) var)
    est = ppi_mean(Y, YHAT, YU, pseudo=0.0)
    lam = (0.5 / 3) / ((1 + 4 / 6) * 2.5 / 9)
    assert est.lam == pytest.approx(lam)
    assert est.value == pytest.approx(lam * 0.5 + (0.75 - lam * 0.5))
    rect = np.array(Y) - lam * np.array(YHAT)
    se = math.sqrt(lam**2 * 0.3 / 6 + rect.var(ddof=1) / 4)
    assert est.low == pytest.approx(est.value - Z95 * se)


def test_pseudo_observations_of_unit_weight_are_plain_extra_samples():
    # weight 1: the variance of the paired sample with (1, 0) and (0, 1) appended, lam held at 1
    est = ppi_mean(Y, YHAT, YU, lam=1.0, pseudo=1.0, z=0.5)  # a narrow interval, so that nothing is clipped
    rect = np.array([0, 0, 1, 0, 1, -1.0])
    se = math.sqrt(np.var(YU + [0, 1], ddof=1) / 6 + rect.var(ddof=1) / 4)
    assert est.value == pytest.approx(0.75) and est.low == pytest.approx(0.75 - 0.5 * se)


def test_agreeing_pairs_do_not_collapse_the_interval():
    """Ten pairs that all agree: the plain interval has no room for the simulator's bias, the
    pseudo-observations give it some; a simulator uncorrelated with the truth gets lam = 0."""
    y = np.ones(10)
    plain, kept = ppi_mean(y, y, np.ones(40), lam=1.0, pseudo=0.0), ppi_mean(y, y, np.ones(40), lam=1.0)
    assert plain.width == 0.0 and kept.width > 0.1
    noise = np.random.default_rng(0).integers(0, 2, 200).astype(float)
    assert ppi_mean(noise[:100], noise[100:], np.ones(5) * 0.5 + noise[:5] * 0.0).lam < 0.2


def test_wilson_by_hand_and_bad_input():
    assert real_only(np.zeros(10)).high == pytest.approx(Z95**2 / (10 + Z95**2))
    with pytest.raises(ValueError, match="outcomes in"):
        ppi_mean([1, 2], [1, 0], [1])
    with pytest.raises(ValueError, match="same number"):
        ppi_mean([1, 0], [1], [1])


@pytest.mark.parametrize("interval", ["normal", "score"])
def test_coverage_study_on_a_biased_simulator(interval):
    """A simulator that adds successes (20% of real failures imagined as successes): the imagined-only
    rate is biased, the prediction-powered interval still covers near nominal and is narrower than
    the real-only one, in either shape."""
    rng = np.random.default_rng(1)
    pairs = {}
    for k, p in enumerate((0.1, 0.3, 0.5, 0.7, 0.9)):
        real = (rng.random(200) < p).astype(float)
        wm = np.where(real == 1, 1.0, (rng.random(200) < 0.2).astype(float))
        pairs[f"p{k}"] = (real, wm)
    out = coverage_study(pairs, n=10, resamples=400, seed=0, interval=interval)
    assert 0.93 <= out["ppi_coverage"] <= 1.0
    assert out["width_ratio_median"] < 1.0
    records = [{"policy": "a", "sim": s, "episode": i, "success": v} for s, vals in (("real", [1, 0]), ("wm", [0, 0]))
               for i, v in enumerate(vals)] + [{"policy": "a", "sim": "real", "episode": 2, "success": 1}]
    real, wm = paired_outcomes(records)["a"]
    assert real.tolist() == [1, 0] and wm.tolist() == [0, 0]  # episode 2 ran in one simulator only


def test_width_ratio_bound_follows_the_per_episode_agreement():
    """sqrt(1 - rho^2): 0 for a simulator that agrees on every episode, ~1 for one that agrees by chance,
    and the measured width ratio is not below it (beyond resampling noise)."""
    rng = np.random.default_rng(2)
    real = (rng.random(300) < 0.5).astype(float)
    chance = (rng.random(300) < 0.5).astype(float)
    noisy = np.where(rng.random(300) < 0.85, real, 1 - real)  # agrees on 85% of episodes
    out = coverage_study({"same": (real, real.copy()), "chance": (real, chance), "noisy": (real, noisy)},
                         n=20, resamples=300, seed=0)
    rows = {r["name"]: r for r in out["policies"]}
    assert rows["same"]["width_ratio_bound"] == pytest.approx(0.0, abs=1e-6)
    assert rows["chance"]["width_ratio_bound"] > 0.99
    rho = np.corrcoef(real, noisy)[0, 1]
    assert rows["noisy"]["pair_correlation"] == pytest.approx(rho)
    assert rows["noisy"]["width_ratio_bound"] == pytest.approx(np.sqrt(1 - rho**2))
    ratio = rows["noisy"]["ppi_width_median"] / rows["noisy"]["real_only_width_median"]
    assert ratio > rows["noisy"]["width_ratio_bound"] - 0.05


def test_mean_over_draws_by_hand_and_refuses_other_real_runs():
    """Two draws of the same starts: each start's prediction is its mean imagined outcome; policies in
    one draw only are left out; draws with other real outcomes are refused."""
    real = np.array([1.0, 0.0, 1.0])
    a = {"p": (real, np.array([1.0, 1.0, 0.0])), "only_a": (real, real)}
    b = {"p": (real.copy(), np.array([1.0, 0.0, 0.0]))}
    out = mean_over_draws([a, b])
    assert list(out) == ["p"]
    assert out["p"][0].tolist() == [1, 0, 1] and out["p"][1].tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="--real-from"):
        mean_over_draws([a, {"p": (np.array([0.0, 0.0, 1.0]), real)}])
    # a model that knows each start's success probability, drawn twice: the mean of the draws
    # correlates with the real outcome at least as well as one draw
    rng = np.random.default_rng(3)
    prob = rng.random(2000)
    real = (rng.random(2000) < prob).astype(float)
    draws = [{"q": (real, (rng.random(2000) < prob).astype(float))} for _ in range(4)]
    one = np.corrcoef(real, draws[0]["q"][1])[0, 1]
    four = np.corrcoef(real, mean_over_draws(draws)["q"][1])[0, 1]
    assert four > one + 0.05


def test_own_width_ratio_separates_the_imagined_episodes_from_the_interval_shape():
    """A policy that always succeeds: the estimator's interval is narrower than Wilson's whatever the
    simulator says (the shape, not the imagined episodes), and equal to itself without imagined
    episodes. A simulator that agrees on every episode of a mid-rate policy narrows it against itself."""
    rng = np.random.default_rng(4)
    always = np.ones(200)
    mid = (rng.random(200) < 0.5).astype(float)
    chance = (rng.random(200) < 0.5).astype(float)
    sure = coverage_study({"always": (always, chance)}, n=10, resamples=200, seed=0)
    assert sure["width_ratio_median"] < 0.8
    assert sure["width_ratio_own_median"] == pytest.approx(1.0)
    agree = coverage_study({"mid": (mid, mid.copy())}, n=10, resamples=200, seed=0)
    by_chance = coverage_study({"mid": (mid, chance)}, n=10, resamples=200, seed=0)
    assert agree["width_ratio_own_median"] < 0.9
    assert by_chance["width_ratio_own_median"] > agree["width_ratio_own_median"] + 0.1


def test_score_interval_is_wilson_without_imagined_episodes_and_narrows_with_agreeing_ones():
    """At lam = 0 the score interval is Wilson's (to its grid); with a simulator that agrees on every
    episode it is narrower than Wilson's, and it still holds the estimate; a bad shape name is refused."""
    from wmsuite.stats import wilson_interval

    y = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 0], float)
    est = ppi_mean(y, y, np.tile([0.0, 1.0], 20), lam=0.0, interval="score")
    low, high = wilson_interval(6, 10)
    assert est.low == pytest.approx(low, abs=3e-4) and est.high == pytest.approx(high, abs=3e-4)
    agree = ppi_mean(y, y, np.tile([0.0, 1.0, 1.0, 0.0, 1.0], 20), interval="score")
    assert agree.lam > 0.5 and agree.low <= agree.value <= agree.high
    assert agree.width < 0.8 * (high - low)
    with pytest.raises(ValueError, match="interval must be one of"):
        ppi_mean(y, y, y, interval="wald")
