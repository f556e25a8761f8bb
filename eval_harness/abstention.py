"""Abstention on imagined episodes: what a per-episode trust score buys.

Each imagined episode carries one trust score in [0, 1] (higher: more trusted) and was run from the
same start as a real one, so its *incurred error* is known after the fact: 1 where the imagined and
real outcomes disagree, else 0. Three views, all on the episodes of one `wmsuite eval`:

- **Selective-evaluation curve**: keep the most trusted fraction c of all imagined episodes (pooled
  over policies) and measure the mean incurred error of those kept, for c from 1 down. A trust score
  that knows when the model is wrong makes the curve fall; a score unrelated to error keeps it flat.
  The same curve with the imagined depth as the score (shorter episodes trusted more) is the
  baseline that any trust signal must beat: errors grow with depth whatever the model.
- **Abstained predictions**: each policy's predicted success over its episodes that survive the
  pooled cut at coverage c, beside the one over all.
- **Policy-level agreement**: Spearman, across policies, between |predicted - real| and mean
  distrust (1 - mean trust): whether the policies the model misjudges are the ones it flags.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

COVERAGES = (1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)
"""Fractions of imagined episodes kept, most trusted first."""


@dataclass
class CalibratedTrust:
    """A trust score for `EvalSetup.trust_score`: imagined-episode records -> (M,) trust in [0, 1] from a
    calibrator (world_models/calibrator.py) fed each record's round-trip error, IDM error, depth in
    world-model steps (as the calibrator was fitted), start-reading error and start-frame novelty
    (which also feed its gates)."""

    calibrator: Any
    """A `wmsuite.world_models.calibrator.Calibrator` with a tolerance set."""
    chunk: int
    """Actions per world-model step (records count their length in actions)."""
    path: Path
    """Where the calibrator was read from (reported beside the figures)."""
    novelty: Any = None
    """The bank its novelty gate scores start frames with (world_models/novelty.py), read from
    novelty.safetensors beside the calibrator; None for a calibrator without that gate."""

    @property
    def novelty_path(self) -> Path:
        """Where a calibrator's novelty bank lies: beside it."""
        from wmsuite.specs import NOVELTY

        return self.path.parent / NOVELTY

    @classmethod
    def load(cls, path: Path, chunk: int, simulator: str | None = None) -> CalibratedTrust:
        """Read and check a calibrator file; a missing tolerance, or one fitted on the rollouts of
        another simulator than the one whose digest `simulator` is, fails here, not after the rollouts."""
        from wmsuite.world_models.calibrator import Calibrator

        try:
            cal = Calibrator.from_json(json.loads(Path(path).read_text()))
            cal.trust({f: [1.0] for f in (*cal.features, "start", "novelty")})
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            raise ValueError(f"--calibration {path} is not a usable calibrator: {e}") from None
        if simulator is not None and cal.simulator is not None and cal.simulator != simulator:
            raise ValueError(f"--calibration {path} was fitted on the rollouts of another world model (sha256 "
                             f"{cal.simulator[:12]}..) than --wm (sha256 {simulator[:12]}..): its trust would not "
                             "describe this simulator's errors; fit one for it (experiments/scripts/trust_study.py "
                             "--wm ...) or pass the --wm it was fitted for")
        scorer = cls(cal, chunk, Path(path))
        if cal.novelty_limit is not None:
            from wmsuite.world_models.novelty import PatchNovelty

            if not scorer.novelty_path.exists():
                raise FileNotFoundError(f"--calibration {path} gates on start-frame novelty, but {scorer.novelty_path} "
                                        "(the bank it was fitted with) is missing; put it beside the calibrator")
            scorer.novelty = PatchNovelty.load(scorer.novelty_path)
        return scorer

    def __call__(self, records: list[dict[str, Any]]) -> np.ndarray:
        feats = {"round_trip": [r["trust_round_trip_mean"] for r in records],
                 "idm": [r["trust_idm_error_mean"] for r in records],
                 "depth": [math.ceil(r["length"] / self.chunk) for r in records],
                 "start": [r.get("trust_start_error_mean", math.nan) for r in records],
                 "novelty": [r.get("trust_novelty_mean", math.nan) for r in records]}
        return self.calibrator.trust(feats)  # features it does not use are ignored


def keep_mask(trust: np.ndarray, coverage: float) -> np.ndarray:
    """(M,) trust -> (M,) bool: the ceil(coverage * M) most trusted episodes (ties broken by order, so
    exactly that many are kept)."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    m = len(trust)
    kept = np.zeros(m, bool)
    kept[np.argsort(-np.asarray(trust, float), kind="stable")[: math.ceil(coverage * m)]] = True
    return kept


def selective_curve(trust, incurred, coverages=COVERAGES) -> list[dict[str, float]]:
    """Mean incurred error of the most trusted `coverage` share of episodes, per coverage.

    trust, incurred: (M,) per imagined episode. Returns [{coverage, kept, error}, ...]."""
    trust, incurred = np.asarray(trust, float), np.asarray(incurred, float)
    if trust.shape != incurred.shape or trust.ndim != 1 or not len(trust):
        raise ValueError(f"trust and incurred must be (M,) with M >= 1, got {trust.shape} and {incurred.shape}")
    if not np.all(np.isfinite(trust)):
        raise ValueError("every imagined episode needs a finite trust score")
    out = []
    for c in coverages:
        kept = keep_mask(trust, c)
        out.append({"coverage": float(c), "kept": int(kept.sum()), "error": float(incurred[kept].mean())})
    return out


def error_at(curve: list[dict[str, float]], coverage: float) -> float:
    """The curve's error at `coverage` (which must be one of its points)."""
    for point in curve:
        if math.isclose(point["coverage"], coverage):
            return point["error"]
    raise ValueError(f"the curve has no point at coverage {coverage}")


def abstention_figures(episodes: list[dict[str, Any]], rows: list[dict[str, Any]], trust_key: str,
                       coverage: float = 0.8) -> dict[str, Any]:
    """Abstention figures of an evaluation, from its episodes.jsonl records and metrics rows.

    episodes: records with `policy`, `sim`, `episode`, `success`, `length` and, on imagined ones, the
    trust score under `trust_key`; rows: metrics.json policy rows (name, predicted/real success).
    Returns {curve, depth_curve, error_all, error_at_coverage, depth_error_at_coverage, coverage,
    trust_error_spearman, policies: {name: {mean_trust, predicted_success_kept, kept}}}."""
    real = {(e["policy"], e["episode"]): float(e["success"]) for e in episodes if e["sim"] == "real"}
    wm = [e for e in episodes if e["sim"] == "wm" and (e["policy"], e["episode"]) in real]
    if not wm:
        raise ValueError("no imagined episode has a real counterpart from the same start")
    missing = [e for e in wm if trust_key not in e or e[trust_key] is None]
    if missing:
        raise ValueError(f"{len(missing)} imagined episodes lack {trust_key!r} (first: {missing[0]['policy']} "
                         f"episode {missing[0]['episode']}); rerun the evaluation with that trust signal on")
    trust = np.array([e[trust_key] for e in wm], float)
    incurred = np.array([abs(float(e["success"]) - real[(e["policy"], e["episode"])]) for e in wm])
    depth = -np.array([e["length"] for e in wm], float)  # the baseline: shorter imagined episodes trusted more
    curve, depth_curve = selective_curve(trust, incurred), selective_curve(depth, incurred)
    kept = keep_mask(trust, coverage)
    per: dict[str, dict[str, float]] = {}
    for name in sorted({e["policy"] for e in wm}):
        mine = np.array([e["policy"] == name for e in wm])
        outcome = np.array([float(e["success"]) for e in wm])[mine]
        per[name] = {"mean_trust": float(trust[mine].mean()), "kept": int(kept[mine].sum()),
                     "predicted_success_kept": float(outcome[kept[mine]].mean()) if kept[mine].any() else math.nan}
    err = [abs(r["predicted_success"] - r["real_success"]) for r in rows if r["name"] in per]
    distrust = [1 - per[r["name"]]["mean_trust"] for r in rows if r["name"] in per]
    rho = float(spearmanr(err, distrust).statistic) if len(err) >= 3 and np.ptp(distrust) > 0 else math.nan
    return {"coverage": coverage, "curve": curve, "depth_curve": depth_curve, "error_all": error_at(curve, 1.0),
            "error_at_coverage": float(incurred[kept].mean()),
            "depth_error_at_coverage": float(incurred[keep_mask(depth, coverage)].mean()),
            "trust_error_spearman": rho, "policies": per}


def plot_curves(figures: dict[str, Any], path) -> None:
    """The selective-evaluation curve and its depth baseline as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4), dpi=120)
    for key, label in (("curve", "trust score"), ("depth_curve", "depth only (baseline)")):
        pts = figures[key]
        ax.plot([p["coverage"] for p in pts], [p["error"] for p in pts], "o-", label=label)
    ax.set_xlabel("coverage (share of imagined episodes kept, most trusted first)")
    ax.set_ylabel("incurred error (imagined != real outcome)")
    ax.invert_xaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
