"""Prediction-powered estimates of a success rate: a few real episodes plus many imagined ones.

A learned simulator answers cheaply but with a bias; a real simulator (or robot) answers without
bias but expensively. Prediction-powered inference (Angelopoulos et al., Science 2023, "Prediction-
powered inference"; the power-tuned PPI++ of Angelopoulos, Duchi and Zrnic, arXiv 2311.01453) uses
both: with n episodes run in both simulators from the same starts (Y real, Yhat imagined) and N
imagined episodes from other starts (Yhat_u), the estimate of the real success rate is

    theta = lam * mean(Yhat_u) + mean(Y - lam * Yhat)

unbiased for any fixed lam: the imagined episodes carry the mean, the paired ones measure and
remove the simulator's bias. Its variance is lam^2 var(Yhat_u) / N + var(Y - lam Yhat) / n, and lam
is chosen to minimise it (lam = cov(Y, Yhat) / ((1 + n / N) var(Yhat)), clipped to [0, 1]): lam = 0
is the real-only estimate, so a simulator that tells nothing costs no width. This is the estimator
of `ppi-python`'s `ppi_mean_ci` (with `lam=None`), written out here so that wmsuite does not pull
that package's scientific stack; `tests/eval_harness/test_ppi.py` checks it against a by-hand case.

Small samples. With n ~ 10 binary outcomes the sample variance can be 0 (all ten pairs agree)
and the normal interval collapses onto the imagined rate, bias and all. Each variance is therefore
taken with pseudo-observations added, in the spirit of the Agresti-Coull interval: the paired sample
with one disagreement each way (real success imagined failure, and the reverse), the unpaired one
with one success and one failure. The estimate itself is unchanged; the interval is wider by what a
sample this small cannot rule out.

Interval shape. The "normal" interval is the estimate plus or minus z standard errors. At small n it
is wider than Wilson's score interval of the real outcomes alone where the rate is mid-range, and
narrower where all n agree (a policy at 0 or 1). The "score" interval takes, as Wilson's does, every
rate theta whose own variance puts the estimate within z standard errors of it: the rectifier's
variance at theta is theta (1 - theta) + lam^2 var(Yhat) - 2 lam cov(Y, Yhat), with the imagined
variance and the covariance estimated with the pseudo-observations. At lam = 0 it is Wilson's
interval exactly, so the imagined episodes are all that can make it narrower than the real-only one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wmsuite.stats import wilson_interval

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Estimate:
    """A success-rate estimate with a two-sided interval at `level`."""

    value: float
    """The point estimate (may leave [0, 1] by a little for PPI; the interval is clipped, not the value)."""
    low: float
    """Lower end of the interval, clipped to [0, 1]."""
    high: float
    """Upper end of the interval, clipped to [0, 1]."""
    lam: float = 0.0
    """The weight on the imagined episodes (0: real only)."""

    @property
    def width(self) -> float:
        return self.high - self.low

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {prefix: self.value, f"{prefix}_ci": [self.low, self.high]}


def _check(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if not np.all(np.isfinite(a)) or np.any((a < 0) | (a > 1)):
        raise ValueError(f"{name} must hold outcomes in [0, 1] (success 1, failure 0), got {a[:8]}...")
    return a


def _cov(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """Weighted sample covariance (weights as frequencies; the denominator is their sum less one)."""
    if w.sum() <= 1:
        return 0.0
    ma, mb = np.sum(w * a) / w.sum(), np.sum(w * b) / w.sum()
    return float(np.sum(w * (a - ma) * (b - mb)) / (w.sum() - 1))


def _var(x: np.ndarray, pseudo: tuple[float, ...], weight: float) -> float:
    """Sample variance of x with the `pseudo` observations added at `weight` each (module doc);
    weights count as frequencies (the denominator is their sum less one)."""
    v = np.concatenate([x, pseudo]) if weight > 0 else x
    w = np.concatenate([np.ones(len(x)), np.full(len(pseudo), weight)]) if weight > 0 else np.ones(len(x))
    return _cov(v, v, w)


def _interval(value: float, se: float, z: float) -> tuple[float, float]:
    return max(0.0, value - z * se), min(1.0, value + z * se)


def real_only(y, *, z: float = Z95) -> Estimate:
    """The Wilson interval of n real outcomes: what the n real episodes say alone."""
    y = _check("real outcomes", y)
    if len(y) == 0:
        raise ValueError("need at least one real episode")
    low, high = wilson_interval(int(round(y.sum())), len(y), z=z)
    return Estimate(float(y.mean()), low, high, 0.0)


def imagined_only(yhat_all, *, z: float = Z95) -> Estimate:
    """The Wilson interval of the imagined outcomes alone: valid for the learned simulator's own rate,
    not for the real one (it carries the simulator's bias)."""
    est = real_only(yhat_all, z=z)
    return Estimate(est.value, est.low, est.high, 1.0)


PSEUDO = 0.75
"""Default weight of each pseudo-observation (module doc), chosen on the families zoo's validation split
with `coverage_study` at n = 10 (experiments/scripts/ppi_study.py; the rule and its figures, then and
with later simulators, are in experiments/trust_journal.md)."""


INTERVALS = ("normal", "score")
"""The interval shapes `ppi_mean` knows (module doc): "normal", the estimate plus or minus z standard
errors with the variances taken with pseudo-observations; "score", every rate that the estimate is
within z standard errors of, with the real outcomes' variance that rate's, as Wilson's interval."""


def ppi_mean(y, yhat, yhat_unlabeled, *, lam: float | None = None, z: float = Z95,
             pseudo: float = PSEUDO, interval: str = "normal") -> Estimate:
    """The prediction-powered estimate of the real success rate (module doc).

    y, yhat: (n,) real and imagined outcomes of the same n starts; yhat_unlabeled: (N,) imagined
    outcomes of other starts (imagined outcomes may be probabilities in [0, 1]). lam: the weight on the
    imagined episodes (None: the variance-minimising one, clipped to [0, 1]). pseudo: the weight of each
    pseudo-observation in the variances (module doc; 0: the plain estimator). interval: its shape, one of
    INTERVALS; "score" reduces to Wilson's interval of the real outcomes at lam = 0."""
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}, got {interval!r}")
    y, yhat, yu = _check("real outcomes", y), _check("paired imagined outcomes", yhat), \
        _check("unpaired imagined outcomes", yhat_unlabeled)
    n, big_n = len(y), len(yu)
    if n == 0 or len(yhat) != n:
        raise ValueError(f"need n >= 1 paired outcomes, the same number real and imagined; got {n} and {len(yhat)}")
    if big_n == 0:
        raise ValueError("need imagined episodes from starts other than the paired ones")
    if lam is None:
        var_f = float(np.var(np.concatenate([yhat, yu]), ddof=1)) if n + big_n > 1 else 0.0
        cov = float(np.cov(y, yhat, ddof=1)[0, 1]) if n > 1 else 0.0
        lam = 0.0 if var_f <= 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f)))
    value = lam * float(yu.mean()) + float(np.mean(y - lam * yhat))
    var_u = lam * lam * _var(yu, (0.0, 1.0), pseudo) / big_n
    if interval == "normal":
        # the rectifier y - lam*yhat of the two disagreements is 1 (real 1, imagined 0) and -lam (0, 1)
        se = math.sqrt(var_u + _var(y - lam * yhat, (1.0, -lam), pseudo) / n)
        return Estimate(value, *_interval(value, se, z), float(lam))
    # var(y - lam yhat) = theta (1 - theta) + lam^2 var(yhat) - 2 lam cov(y, yhat) at the rate theta
    # tested; var(yhat) and the covariance with a disagreement each way among the pairs
    var_f = _var(np.concatenate([yhat, yu]), (0.0, 1.0), pseudo)
    cov = _cov(np.concatenate([y, [1.0, 0.0]]), np.concatenate([yhat, [0.0, 1.0]]),
               np.concatenate([np.ones(n), np.full(2, pseudo)]))
    theta = np.linspace(0.0, 1.0, 4001)  # (G,) the rates tested
    var_rect = np.maximum(theta * (1 - theta) + lam * lam * var_f - 2 * lam * cov, 0.0)
    inside = theta[np.abs(value - theta) <= z * np.sqrt(var_u + var_rect / n)]
    low, high = (float(inside.min()), float(inside.max())) if len(inside) else (min(max(value, 0.0), 1.0),) * 2
    return Estimate(value, low, high, float(lam))


def paired_outcomes(episodes: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """episodes.jsonl records -> {policy: (real, imagined)}, both (E,) in episode order, for the
    episodes run in both simulators."""
    by: dict[str, dict[str, dict[int, float]]] = {}
    for e in episodes:
        by.setdefault(e["policy"], {}).setdefault(e["sim"], {})[int(e["episode"])] = float(e["success"])
    out = {}
    for name, sims in by.items():
        both = sorted(set(sims.get("real", {})) & set(sims.get("wm", {})))
        if both:
            out[name] = (np.array([sims["real"][i] for i in both]), np.array([sims["wm"][i] for i in both]))
    return out


def mean_over_draws(draws: list[dict[str, tuple[np.ndarray, np.ndarray]]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Several `paired_outcomes` of the same starts, each imagined with another sampling-noise stream
    (`wmsuite eval --noise-seed K --real-from ...`) -> {policy: (real (E,), mean imagined outcome (E,))}.

    An imagined outcome is one draw from what the model believes of a start; their mean over draws is
    the model's success probability for that start, which can track the real outcome better than one
    draw (the estimator takes any prediction in [0, 1]). Policies present in every draw are kept; each
    must hold the same real outcomes in every draw (one real run, reused), or it is refused."""
    if not draws:
        raise ValueError("need at least one draw")
    out = {}
    for name in sorted(set.intersection(*(set(d) for d in draws))):
        real = draws[0][name][0]
        if any(len(d[name][0]) != len(real) or not np.array_equal(d[name][0], real) for d in draws[1:]):
            raise ValueError(f"{name}: the draws hold different real outcomes (an unfinished run, or one made without "
                             "--real-from the first evaluation); finish them, sharing the first run's real episodes")
        out[name] = (real, np.mean([d[name][1] for d in draws], axis=0))
    return out


def coverage_study(pairs: dict[str, tuple[np.ndarray, np.ndarray]], n: int, resamples: int, seed: int = 0,
                   pseudo: float = PSEUDO, interval: str = "normal") -> dict:
    """How often the n-real-episode intervals hold the real rate, by simulation over policies.

    Each policy's E recorded (real, imagined) pairs are taken as its population: a resample draws n
    pairs and E - n unpaired imagined outcomes from it with replacement, and the truth is the
    population's real rate. Returns, over all policies and resamples, the coverage and median width
    of the prediction-powered and real-only intervals and their median width ratio, and per policy.

    The real-only interval is Wilson's; the estimator's "normal" interval is narrower than Wilson's where
    all n real outcomes agree (a policy at 0 or 1) whatever the imagined episodes say, and wider at
    mid-range rates (module doc). `width_ratio_own_median` therefore also compares it with itself at
    lam = 0 (the same n real episodes, no imagined ones): below 1 only by what the imagined episodes add.
    `ppi_width_mean` is the mean width over all policies and resamples."""
    rng = np.random.default_rng(seed)
    rows, hit, real_hit, ratio, own_ratio, widths = [], [], [], [], [], []
    for name, (real, wm) in sorted(pairs.items()):
        e = len(real)
        if e <= n:
            raise ValueError(f"{name}: {e} paired episodes; the study needs more than n = {n}")
        truth = float(real.mean())
        h, rh, w, rw, ow = [], [], [], [], []
        for _ in range(resamples):
            lab, unl = rng.integers(0, e, n), rng.integers(0, e, e - n)
            est = ppi_mean(real[lab], wm[lab], wm[unl], pseudo=pseudo, interval=interval)
            base = real_only(real[lab])
            own = ppi_mean(real[lab], wm[lab], wm[unl], lam=0.0, pseudo=pseudo, interval=interval)
            h.append(est.low <= truth <= est.high)
            rh.append(base.low <= truth <= base.high)
            w.append(est.width)
            rw.append(base.width)
            ow.append(own.width)
        both_vary = real.std() > 0 and wm.std() > 0
        rho = float(np.corrcoef(real, wm)[0, 1]) if both_vary else 0.0
        rows.append({"name": name, "real_success": truth, "ppi_coverage": float(np.mean(h)),
                     # per-episode agreement of the two simulators, and the width ratio it allows at best:
                     # sqrt(1 - rho^2), the best lam's with unlimited imagined episodes (large n)
                     "pair_correlation": rho, "width_ratio_bound": float(np.sqrt(1.0 - rho * rho)),
                     "real_only_coverage": float(np.mean(rh)), "ppi_width_median": float(np.median(w)),
                     "real_only_width_median": float(np.median(rw)), "own_lam0_width_median": float(np.median(ow))})
        hit += h
        real_hit += rh
        ratio += list(np.asarray(w) / np.maximum(np.asarray(rw), 1e-12))
        own_ratio += list(np.asarray(w) / np.maximum(np.asarray(ow), 1e-12))
        widths += w
    return {"n_real": n, "resamples": resamples, "pseudo": pseudo, "interval": interval,
            "ppi_coverage": float(np.mean(hit)), "ppi_width_mean": float(np.mean(widths)),
            "real_only_coverage": float(np.mean(real_hit)), "width_ratio_median": float(np.median(ratio)),
            "width_ratio_own_median": float(np.median(own_ratio)),
            "width_ratio_bound_median": float(np.median([r["width_ratio_bound"] for r in rows])),
            "ppi_width_median": float(np.median([r["ppi_width_median"] for r in rows])),
            "real_only_width_median": float(np.median([r["real_only_width_median"] for r in rows])),
            "policies": rows}
