"""A calibrator: from a rollout's trust signals (world_models/trust.py) to an interval on its true
error and one trust score.

On rollouts whose true error is known (imagined beside real from the same start), a
Gaussian model in log space: log(true error) ~ N(w . phi, sigma^2), phi = [1, log(round_trip + eps),
log(idm + eps), depth, log(start + eps), log(novelty + eps)], fitted by least squares (`start`: how
far the heads' reading of the real start frame is from the real start state,
`WorldModelEnv(start_reading=...)`; `novelty`: world_models/novelty.py), or with Student-t residuals
for heavy tails, or with the fit's own residuals (their quantiles, as split-conformal prediction
uses them) where neither shape fits. It gives an interval on the true error of a new rollout from
its trust features alone, and its coverage on held-out rollouts says whether to believe the
interval. With a tolerated error tau it also gives one trust score per rollout in [0, 1]: the
predicted probability that the true error is at most tau (higher: more trusted), set to 0 by its
gates (start reading, novelty) for starts unlike those it was fitted on, or lowered as they near a
gate with a ramp. Plain JSON in and out.

Shapes: M calibration rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from scipy.special import ndtr
from scipy.stats import t as student_t

FEATURES = {"round_trip": "log", "idm": "log", "depth": "linear", "start": "log", "novelty": "log"}
"""The features a `Calibrator` knows, in the order their weights are stored, and how each enters phi:
"log" ones as log(x + eps) (they must be >= 0), "linear" ones as they are."""
RESIDUALS = ("normal", "t", "empirical")
"""The residual models `Calibrator.fit` knows."""
GATES = {"start": "start_limit", "novelty": "novelty_limit"}
"""Features that may also gate a `Calibrator`'s trust (trust 0 above the limit), by its field."""
RAMPS = {"start": "start_ramp", "novelty": "novelty_ramp"}
"""Where each gate may begin to close (trust scaled down linearly to 0 at the limit), by its field."""


@dataclass
class Calibrator:
    """log(true error) ~ w . phi(features) + r, r normal with scale sigma, Student-t with `dof` degrees
    of freedom and scale sigma (heavy tails), or drawn from the fit's own residuals
    (`residual_quantiles`); build one with `Calibrator.fit`."""

    features: tuple[str, ...]
    """The features used, a subset of FEATURES in its order (e.g. ("round_trip", "depth") when the
    rollouts have no inverse-dynamics error)."""
    weights: tuple[float, ...]
    """w: the intercept, then one weight per feature."""
    sigma: float
    """Scale of the residuals of log(true error): their standard deviation (ddof = the number of
    weights) for normal residuals, the maximum-likelihood scale for Student-t ones."""
    eps: float = 1e-6
    """Added to "log" features before the log, so that an exact zero (a round trip from N < K) stays
    finite; small against the errors that matter."""
    tau: float | None = None
    """The tolerated true error that `trust` scores refer to, in the truth's units (None: none set;
    `trust` then needs one passed)."""
    start_limit: float | None = None
    """An out-of-distribution gate: rollouts whose start-reading error (feature `start`) exceeds it get
    trust 0, whatever the fit says. A regression fitted on in-distribution rollouts cannot learn what
    an unseen scene does; a scene the heads cannot read at its real start is outside what the fit
    covers. Set from in-distribution starts (a high quantile of their start errors; trust_study.py
    takes fresh resets of the real env); None: no gate."""
    dof: float | None = None
    """Degrees of freedom of Student-t residuals (None: normal). A few rollouts that go badly wrong
    (the object lost) inflate a normal fit's sigma, which then over-covers the rest; a t model keeps
    a narrow core and wide tails."""
    residual_quantiles: tuple[float, ...] | None = None
    """The empirical residual model (None: normal or t): the fit's residuals r = log(true error) -
    w . phi at probabilities 0, 1/(Q-1), .., 1 (Q values, non-decreasing), read with linear
    interpolation. No shape is assumed: residuals peaked at 0 with long tails, which a normal fit
    over-covers at 68% and a t fit under-covers, keep their own shape. Beyond the fitted range the
    probability is 0 or 1."""
    novelty_limit: float | None = None
    """A second out-of-distribution gate, on the start frame's novelty (feature `novelty`,
    world_models/novelty.py: how unlike every training frame some patch of it looks): above it, trust
    0. It catches what the heads still read correctly (a bigger object, a distractor beside it). Set
    like `start_limit`; None: no gate."""
    start_ramp: float | None = None
    """Where the start gate begins to close (None: a hard gate): between it and `start_limit` the
    trust is scaled by (start_limit - start) / (start_limit - start_ramp). A hard limit passes an
    unseen scene just under it at full trust; a ramp lowers the trust of every start in the top of
    the in-distribution range, so such scenes rank below most in-distribution ones."""
    novelty_ramp: float | None = None
    """The same for the novelty gate (`novelty_limit`)."""
    simulator: str | None = None
    """sha256 (`wmsuite.specs.file_digest`) of the world model whose rollouts it was fitted on: a fit
    says how *that* model's errors follow its signals, so `wmsuite eval` refuses it beside another
    simulator. None: not recorded."""

    def __post_init__(self) -> None:
        self.features, self.weights = tuple(self.features), tuple(float(w) for w in self.weights)
        if not self.features or list(self.features) != [f for f in FEATURES if f in self.features]:
            raise ValueError(f"features must be one or more distinct names from {list(FEATURES)} in that order, "
                             f"got {list(self.features)}")
        if len(self.weights) != len(self.features) + 1 or not all(map(math.isfinite, self.weights)):
            raise ValueError(f"weights must be {len(self.features) + 1} finite numbers (intercept, then one per "
                             f"feature), got {self.weights}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be finite and >= 0, got {self.sigma}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"eps must be finite and > 0, got {self.eps}")
        if self.residual_quantiles is not None:
            q = np.asarray(self.residual_quantiles, dtype=np.float64)
            if q.ndim != 1 or len(q) < 2 or not np.all(np.isfinite(q)) or np.any(np.diff(q) < 0):
                raise ValueError("residual_quantiles must be two or more finite, non-decreasing numbers")
            if self.dof is not None:
                raise ValueError("a calibrator has Student-t (dof) or empirical (residual_quantiles) residuals, not both")
            self.residual_quantiles = tuple(float(v) for v in q)
        for name in ("tau", "dof", *GATES.values(), *RAMPS.values()):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be finite and > 0 (or None), got {v}")
        for feature, ramp in RAMPS.items():
            limit = getattr(self, GATES[feature])
            if getattr(self, ramp) is not None and (limit is None or getattr(self, ramp) >= limit):
                raise ValueError(f"{ramp} ({getattr(self, ramp)}) needs {GATES[feature]} set above it ({limit})")

    @classmethod
    def fit(cls, features: dict[str, Any], true_error: Any, eps: float = 1e-6, tau: float | None = None,
            residuals: str = "normal", quantiles: int = 101) -> Calibrator:
        """features {name: (M,)} for one or more names of FEATURES, true_error (M,) > 0 -> the least
        squares fit of log(true_error) on phi; `residuals` "normal", "t" (the residuals' degrees of
        freedom and scale by maximum likelihood) or "empirical" (their `quantiles` quantiles). Needs
        M >= number of weights + 1 rows, and features that vary independently of each other (a
        single depth, for instance, leaves depth's weight undetermined: drop the feature)."""
        if residuals not in RESIDUALS:
            raise ValueError(f"residuals must be one of {RESIDUALS}, got {residuals!r}")
        unknown = sorted(set(features) - set(FEATURES))
        if unknown:
            raise ValueError(f"unknown features {unknown}; a Calibrator knows {list(FEATURES)}")
        names = tuple(f for f in FEATURES if f in features)
        if not names:
            raise ValueError(f"a Calibrator needs at least one of the features {list(FEATURES)}")
        phi = _design(features, names, eps)  # (M, P)
        y = _log_error(true_error, len(phi))  # (M,)
        m, p = phi.shape
        if m < p + 1:
            raise ValueError(f"fitting {p} weights ({['intercept', *names]}) needs at least {p + 1} rows, got {m}")
        w, _, rank, _ = np.linalg.lstsq(phi, y, rcond=None)
        if rank < p:
            raise ValueError(f"the features {list(names)} are collinear with each other or constant over the "
                             "rows; drop one (e.g. depth when all rollouts have the same depth)")
        resid = y - phi @ w
        if residuals == "t":
            dof, _, scale = student_t.fit(resid, floc=0.0)
            return cls(names, tuple(w.tolist()), float(scale), eps, tau, dof=float(min(dof, 1e3)))
        sigma = float(np.sqrt(resid @ resid / (m - p)))
        if residuals == "empirical":
            if quantiles < 2:
                raise ValueError(f"quantiles must be >= 2, got {quantiles}")
            grid = np.quantile(resid, np.linspace(0.0, 1.0, quantiles))
            return cls(names, tuple(w.tolist()), sigma, eps, tau, residual_quantiles=tuple(grid.tolist()))
        return cls(names, tuple(w.tolist()), sigma, eps, tau)

    def predict(self, features: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """features {name: (M,)} holding at least this calibrator's features (others of FEATURES are
        ignored, so one dict serves calibrators fitted on different subsets) -> mu_log (M,), the
        predicted mean of log(true error) (for empirical residuals: the fit's, whose residuals average
        0), and sigma (M,), the residuals' scale."""
        unknown = sorted(set(features) - set(FEATURES))
        missing = [f for f in self.features if f not in features]
        if unknown or missing:
            raise ValueError(f"this calibrator needs features {list(self.features)}; missing {missing}, "
                             f"unknown {unknown}")
        phi = _design(features, self.features, self.eps)  # (M, P)
        mu = phi @ np.asarray(self.weights)
        return mu, np.full_like(mu, self.sigma)

    def interval(self, features: dict[str, Any], level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """The central `level` interval of the true error, (low (M,), high (M,)) in error units:
        exp(mu + r_lo), exp(mu + r_hi) with r_lo, r_hi the residual model's (1 -/+ level) / 2 quantiles
        (-/+ z sigma for normal and t residuals)."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        mu, _ = self.predict(features)
        return np.exp(mu + self._residual_quantile(0.5 - level / 2)), np.exp(mu + self._residual_quantile(0.5 + level / 2))

    def _residual_quantile(self, prob: float) -> float:
        """The residual model's quantile at `prob` in (0, 1), in log-error units."""
        if self.residual_quantiles is not None:
            q = np.asarray(self.residual_quantiles)
            return float(np.interp(prob, np.linspace(0.0, 1.0, len(q)), q))
        z = NormalDist().inv_cdf(prob) if self.dof is None else float(student_t.ppf(prob, self.dof))
        return z * self.sigma

    def _residual_cdf(self, r: np.ndarray) -> np.ndarray:
        """P(residual <= r) under the residual model, r (M,) in log-error units."""
        if self.residual_quantiles is not None:
            q = np.asarray(self.residual_quantiles)
            return np.interp(r, q, np.linspace(0.0, 1.0, len(q)), left=0.0, right=1.0)
        if self.sigma == 0:
            return (r >= 0).astype(float)
        return ndtr(r / self.sigma) if self.dof is None else student_t.cdf(r / self.sigma, self.dof)

    def coverage(self, features: dict[str, Any], true_error: Any, level: float = 0.9) -> float:
        """The share of rows whose true error (M,) lies inside their `level` interval: close to `level`
        on held-out rollouts when the calibrator can be believed."""
        low, high = self.interval(features, level)
        err = np.exp(_log_error(true_error, len(low)))
        return float(np.mean((low <= err) & (err <= high)))

    def trust(self, features: dict[str, Any], tau: float | None = None) -> np.ndarray:
        """(M,) trust scores in [0, 1]: P(true error <= tau) under the model, tau = `self.tau` unless
        given. 1 for a rollout sure to be within tolerance, 0 for one sure to be outside it. Then the
        gates: 0 above a limit, scaled down linearly from a ramp's start to the limit where one is set."""
        tau = self.tau if tau is None else float(tau)
        if tau is None or not (math.isfinite(tau) and tau > 0):
            raise ValueError(f"trust needs a tolerated error tau > 0; this calibrator has none set ({self.tau})"
                             " and none was passed")
        mu, _ = self.predict(features)
        trust = np.asarray(self._residual_cdf(math.log(tau) - mu), dtype=np.float64)
        for feature, field in GATES.items():
            limit, ramp = getattr(self, field), getattr(self, RAMPS[feature])
            if limit is None:
                continue
            if feature not in features:
                raise ValueError(f"this calibrator gates on feature {feature!r} ({field} {limit}); pass it")
            x = np.asarray(features[feature], np.float64)
            shut = (x > limit).astype(float) if ramp is None else np.clip((x - ramp) / (limit - ramp), 0.0, 1.0)
            trust = trust * (1.0 - np.nan_to_num(shut))  # a missing reading (nan) leaves the gate open, as before
        return trust

    def to_json(self) -> dict[str, Any]:
        """A plain JSON-serialisable dict (no pickle); `from_json` reads it back."""
        return {"kind": "log_normal_calibrator", "version": 1, "features": list(self.features),
                "weights": list(self.weights), "sigma": self.sigma, "eps": self.eps,
                **({"tau": self.tau} if self.tau is not None else {}),
                **({"dof": self.dof} if self.dof is not None else {}),
                **({"residual_quantiles": list(self.residual_quantiles)} if self.residual_quantiles else {}),
                **{f: getattr(self, f) for f in (*GATES.values(), *RAMPS.values(), "simulator")
                   if getattr(self, f) is not None}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibrator:
        if data.get("kind") != "log_normal_calibrator" or data.get("version") != 1:
            raise ValueError(f"not a version-1 log_normal_calibrator: kind={data.get('kind')!r}, "
                             f"version={data.get('version')!r}")
        return cls(tuple(data["features"]), tuple(data["weights"]), float(data["sigma"]), float(data["eps"]),
                   data.get("tau"), dof=data.get("dof"), residual_quantiles=data.get("residual_quantiles"),
                   **{f: data.get(f) for f in (*GATES.values(), *RAMPS.values(), "simulator")})


def _design(features: dict[str, Any], names: tuple[str, ...], eps: float) -> np.ndarray:
    """phi (M, 1 + len(names)): a column of ones, then each named feature transformed as FEATURES says."""
    cols = []
    for name in names:
        x = np.asarray(features[name], dtype=np.float64)
        if x.ndim != 1 or not len(x):
            raise ValueError(f"feature {name!r} must be a non-empty 1-D array (M,), got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"feature {name!r} has non-finite values")
        if FEATURES[name] == "log":
            if np.any(x < 0):
                raise ValueError(f"feature {name!r} is an error and must be >= 0; min is {x.min()}")
            x = np.log(x + eps)
        cols.append(x)
    lengths = {len(c) for c in cols}
    if len(lengths) > 1:
        raise ValueError(f"features {list(names)} have different lengths {[len(c) for c in cols]}")
    return np.stack([np.ones(len(cols[0])), *cols], axis=1)


def _log_error(true_error: Any, m: int) -> np.ndarray:
    """log of true_error (M,), which must be finite and > 0 and have `m` rows."""
    err = np.asarray(true_error, dtype=np.float64)
    if err.shape != (m,):
        raise ValueError(f"true_error must be (M={m},) like the features, got shape {err.shape}")
    if not np.all(np.isfinite(err)) or np.any(err <= 0):
        raise ValueError("true_error must be finite and > 0 (the calibrator models its log)")
    return np.log(err)
