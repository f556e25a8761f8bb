"""Does the world model know which outcomes it is unsure of? Evaluations that differ only in the
sampling noise (#26).

    wmsuite eval ... --out runs/A
    wmsuite eval ... --noise-seed 1 --out runs/B      # the same starts, each episode imagined again
    python experiments/scripts/sampling_disagreement.py runs/A runs/B --out runs/disagreement

An imagined outcome that flips when the same start is imagined with other noise was a coin toss
for the model (with more than two runs: when any other draw disagrees with run A's). Per policy: the share of its episodes whose imagined outcome differs between the two
runs (`disagreement`), against |predicted - real| of run A, as a Spearman correlation across policies
(the issue's policy-level trust figure); per episode, how well a flip flags an episode whose imagined
outcome (run A) differs from the real one (share of misjudged episodes among flipped and kept ones),
and the misjudged share among the 80% of episodes kept when the flipped ones go first (then, with
--calibration and run A made with --round-trip, the least trusted), beside keeping the 80% shortest.
Both runs must hold the same policies, seeds and real episodes. Writes OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from wmsuite.eval_harness.abstention import CalibratedTrust, keep_mask


def outcomes(run: Path) -> dict[tuple[str, str, int], dict]:
    recs = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return {(r["policy"], r["sim"], r["episode"]): r for r in recs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("others", type=Path, nargs="+", help="the same evaluation with other --noise-seed values")
    ap.add_argument("--calibration", type=Path, default=None,
                    help="a calibrator (calibration.json) that breaks ties among the unflipped episodes")
    ap.add_argument("--chunk", type=int, default=4, help="actions per world-model step (the simulator's chunk)")
    ap.add_argument("--coverage", type=float, default=0.8)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    a, others = outcomes(args.run_a), [outcomes(run) for run in args.others]
    policies = sorted({k[0] for k in a})
    if any(policies != sorted({k[0] for k in b}) for b in others):
        raise SystemExit("the runs evaluate different policies")
    rows, flips, wrong, recs_a = [], [], [], []
    for p in policies:
        eps = sorted(k[2] for k in a if k[0] == p and k[1] == "wm")
        real = np.array([a[(p, "real", e)]["success"] for e in eps], bool)
        if any(a[(p, "wm", e)]["seed"] != b[(p, "wm", e)]["seed"] for e in eps for b in others):
            raise SystemExit(f"{p}: the runs' episodes start from different seeds")
        wa = np.array([a[(p, "wm", e)]["success"] for e in eps], bool)
        wb = np.array([[b[(p, "wm", e)]["success"] for e in eps] for b in others], bool)  # (runs, E)
        flipped = (wb != wa).any(0)  # (E,): some other draw disagrees with run A
        rows.append({"policy": p, "real": float(real.mean()), "predicted": float(wa.mean()),
                     "predicted_others": wb.mean(1).tolist(), "abs_error": float(abs(wa.mean() - real.mean())),
                     "disagreement": float(flipped.mean())})
        flips += list(flipped)
        wrong += list(wa != real)
        recs_a += [a[(p, "wm", e)] for e in eps]
    flips, wrong = np.array(flips), np.array(wrong)
    trust = np.zeros(len(flips))
    if args.calibration:
        trust = CalibratedTrust.load(args.calibration, chunk=args.chunk)(recs_a)
    score = np.where(flips, -1.0, trust)  # (M,): flipped episodes least trusted, then by calibrated trust
    kept = keep_mask(score, args.coverage)
    shortest = keep_mask(-np.array([r["length"] for r in recs_a], float), args.coverage)
    rho = float(spearmanr([r["abs_error"] for r in rows], [r["disagreement"] for r in rows]).statistic)
    metrics = {"run_a": str(args.run_a), "others": [str(r) for r in args.others], "policies": rows,
               "disagreement_error_spearman": rho, "episodes": int(len(flips)), "flipped": float(flips.mean()),
               "misjudged_all": float(wrong.mean()),
               "misjudged_among_flipped": float(wrong[flips].mean()) if flips.any() else float("nan"),
               "misjudged_among_kept": float(wrong[~flips].mean()) if (~flips).any() else float("nan"),
               "coverage": args.coverage, "misjudged_kept": float(wrong[kept].mean()),
               "misjudged_kept_shortest": float(wrong[shortest].mean())}
    w = max(len(p) for p in policies)
    print(f"{'policy':<{w}} {'real':>5} {'pred A':>7} {'others':>12} {'|error|':>8} {'flipped':>8}")
    for r in rows:
        print(f"{r['policy']:<{w}} {r['real']:>5.2f} {r['predicted']:>7.2f} "
              f"{' '.join(f'{x:.2f}' for x in r['predicted_others']):>12} {r['abs_error']:>8.2f} {r['disagreement']:>8.2f}")
    print(f"Spearman(|error|, flipped share) across {len(rows)} policies: {rho:.3f}")
    print(f"episodes flipped {metrics['flipped']:.3f}; misjudged: all {metrics['misjudged_all']:.3f}, flipped "
          f"{metrics['misjudged_among_flipped']:.3f}, kept {metrics['misjudged_among_kept']:.3f}")
    print(f"misjudged among the {args.coverage:.0%} kept: {metrics['misjudged_kept']:.3f} (flipped first"
          f"{', then the calibrator' if args.calibration else ''}); the {args.coverage:.0%} shortest "
          f"{metrics['misjudged_kept_shortest']:.3f}; all {metrics['misjudged_all']:.3f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
