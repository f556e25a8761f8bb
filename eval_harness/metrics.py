"""How well a learned simulator's success rates track a real simulator's, across policies.

Definitions follow SIMPLER (Li et al., 2024) exactly, for vectors R (real) and S (simulated) of
per-policy success rates:

    pearson   Pearson's r between S and R (NaN when either vector is constant: r is undefined)
    mmrv      (1/N) sum_i max_j |R_i - R_j| * 1[(S_i > S_j) != (R_i > R_j)]
              strict comparisons, so a tie on one side and an order on the other is a violation
    spearman, kendall   rank correlations (kendall is tau-b, as scipy computes it)
    mean_abs_error      mean_i |S_i - R_i|

`bootstrap` gives 95% intervals by resampling episodes within each policy (paired: the real and the
imagined episode of one seed are drawn together, since they start from the same state);
`bootstrap_difference` compares two simulators on the same real episodes the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def pearson(sim: Sequence[float], real: Sequence[float]) -> float:
    s, r = _pair(sim, real)
    ds, dr = s - s.mean(), r - r.mean()
    denom = np.sqrt((ds**2).sum() * (dr**2).sum())
    return float((ds * dr).sum() / denom) if denom > 0 else float("nan")


def mmrv(sim: Sequence[float], real: Sequence[float]) -> float:
    s, r = _pair(sim, real)
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])  # (N, N)
    gaps = np.abs(r[:, None] - r[None, :]) * violated
    return float(gaps.max(axis=1).mean())


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(sim: Sequence[float], real: Sequence[float]) -> float:
    s, r = _pair(sim, real)
    return pearson(_ranks(s), _ranks(r))


def kendall(sim: Sequence[float], real: Sequence[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_s) (n0 - ties_r))."""
    s, r = _pair(sim, real)
    iu = np.triu_indices(len(s), k=1)
    ds = np.sign(s[:, None] - s[None, :])[iu]
    dr = np.sign(r[:, None] - r[None, :])[iu]
    n0 = len(ds)
    denom = np.sqrt((n0 - (ds == 0).sum()) * (n0 - (dr == 0).sum()))
    return float((ds * dr).sum() / denom) if denom > 0 else float("nan")


def mean_abs_error(sim: Sequence[float], real: Sequence[float]) -> float:
    s, r = _pair(sim, real)
    return float(np.abs(s - r).mean())


METRICS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "pearson": pearson,
    "mmrv": mmrv,
    "spearman": spearman,
    "kendall": kendall,
    "mean_abs_error": mean_abs_error,
}


def all_metrics(sim: Sequence[float], real: Sequence[float]) -> dict[str, float]:
    return {name: fn(sim, real) for name, fn in METRICS.items()}


def bootstrap(sim_outcomes: Sequence[Sequence[bool]], real_outcomes: Sequence[Sequence[bool]],
              samples: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of every metric, resampling episodes within each policy.

    sim_outcomes[k] / real_outcomes[k]: per-episode success (0/1) of policy k. When both lists of a
    policy have the same length they are taken as paired by seed and resampled together.
    """
    if len(sim_outcomes) != len(real_outcomes):
        raise ValueError(f"{len(sim_outcomes)} simulated vs {len(real_outcomes)} real policies")
    rng = np.random.default_rng(seed)
    sims = [np.asarray(x, float) for x in sim_outcomes]
    reals = [np.asarray(x, float) for x in real_outcomes]
    draws: dict[str, list[float]] = {name: [] for name in METRICS}
    for _ in range(samples):
        s_rates, r_rates = [], []
        for s, r in zip(sims, reals):
            if len(s) == len(r):
                idx = rng.integers(0, len(s), len(s))
                s_rates.append(s[idx].mean())
                r_rates.append(r[idx].mean())
            else:
                s_rates.append(s[rng.integers(0, len(s), len(s))].mean())
                r_rates.append(r[rng.integers(0, len(r), len(r))].mean())
        for name, value in all_metrics(s_rates, r_rates).items():
            draws[name].append(value)
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    out = {}
    for name, values in draws.items():
        v = np.asarray(values)
        v = v[np.isfinite(v)]
        out[name] = (float(np.percentile(v, lo)), float(np.percentile(v, hi))) if len(v) else (float("nan"),) * 2
    return out


def bootstrap_difference(sim_a: Sequence[Sequence[bool]], sim_b: Sequence[Sequence[bool]],
                         real: Sequence[Sequence[bool]], samples: int = 2000, seed: int = 0,
                         level: float = 0.95) -> dict[str, dict[str, float]]:
    """Two simulators judged against the same real episodes: every metric's difference B - A with a
    percentile interval, resampling episodes within each policy with one set of indices for all
    three (episode i of a policy is one start, played in the real simulator and in both learned ones).

    sim_a[k], sim_b[k], real[k]: per-episode success (0/1) of policy k, all of one length. Returns
    {metric: {"a", "b", "difference", "low", "high", "b_better_share"}}: b_better_share is the share of
    resamples where B scores better (lower MMRV or mean |error|, higher correlation), ties counting half.
    """
    if not len(sim_a) == len(sim_b) == len(real):
        raise ValueError(f"need the same policies in all three: {len(sim_a)}, {len(sim_b)}, {len(real)}")
    arrays = [[np.asarray(x, float) for x in group] for group in (sim_a, sim_b, real)]
    for k, (a, b, r) in enumerate(zip(*arrays)):
        if not len(a) == len(b) == len(r) > 0:
            raise ValueError(f"policy {k}: {len(a)}, {len(b)} and {len(r)} episodes; a paired comparison needs the "
                             "same starts in both evaluations (the same --seed and episode count)")
    rng = np.random.default_rng(seed)
    lower_is_better = {"mmrv", "mean_abs_error"}
    diffs: dict[str, list[float]] = {name: [] for name in METRICS}
    wins: dict[str, float] = dict.fromkeys(METRICS, 0.0)
    for _ in range(samples):
        idx = [rng.integers(0, len(r), len(r)) for r in arrays[2]]
        rate_a, rate_b, rate_r = ([x[i].mean() for x, i in zip(group, idx)] for group in arrays)
        for name, fn in METRICS.items():
            va, vb = fn(rate_a, rate_r), fn(rate_b, rate_r)
            if np.isfinite(va) and np.isfinite(vb):
                diffs[name].append(vb - va)
                better = va - vb if name in lower_is_better else vb - va
                wins[name] += 1.0 if better > 0 else 0.5 if better == 0 else 0.0
    full = [[x.mean() for x in group] for group in arrays]
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    out = {}
    for name, fn in METRICS.items():
        d = np.asarray(diffs[name])
        a, b = fn(full[0], full[2]), fn(full[1], full[2])
        out[name] = {"a": a, "b": b, "difference": b - a,
                     "low": float(np.percentile(d, lo)) if len(d) else float("nan"),
                     "high": float(np.percentile(d, hi)) if len(d) else float("nan"),
                     "b_better_share": wins[name] / len(d) if len(d) else float("nan")}
    return out


def _pair(sim: Sequence[float], real: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, r = np.asarray(sim, float), np.asarray(real, float)
    if s.shape != r.shape or s.ndim != 1:
        raise ValueError(f"need two 1-D vectors of equal length, got {s.shape} and {r.shape}")
    if len(s) < 2:
        raise ValueError(f"comparing success rates needs at least 2 policies, got {len(s)}")
    return s, r
