"""Does the world model know which outcomes it is unsure of? Two evaluations that differ only in the
sampling noise (#26).

    wmsuite eval ... --out runs/A
    wmsuite eval ... --noise-seed 1 --out runs/B      # the same starts, each episode imagined again
    python experiments/scripts/sampling_disagreement.py runs/A runs/B --out runs/disagreement

An imagined outcome that flips when the same start is imagined with other noise was a coin toss
for the model. Per policy: the share of its episodes whose imagined outcome differs between the two
runs (`disagreement`), against |predicted - real| of run A, as a Spearman correlation across policies
(the issue's policy-level trust figure); per episode, how well a flip flags an episode whose imagined
outcome (run A) differs from the real one (share of misjudged episodes among flipped and kept ones).
Both runs must hold the same policies, seeds and real episodes. Writes OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr


def outcomes(run: Path) -> dict[tuple[str, str, int], dict]:
    recs = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return {(r["policy"], r["sim"], r["episode"]): r for r in recs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path, help="the same evaluation with another --noise-seed")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    a, b = outcomes(args.run_a), outcomes(args.run_b)
    policies = sorted({k[0] for k in a})
    if policies != sorted({k[0] for k in b}):
        raise SystemExit("the two runs evaluate different policies")
    rows, flips, wrong = [], [], []
    for p in policies:
        eps = sorted(k[2] for k in a if k[0] == p and k[1] == "wm")
        real = np.array([a[(p, "real", e)]["success"] for e in eps], bool)
        if any(a[(p, "real", e)]["seed"] != b[(p, "real", e)]["seed"] for e in eps):
            raise SystemExit(f"{p}: the runs' episodes start from different seeds")
        wa = np.array([a[(p, "wm", e)]["success"] for e in eps], bool)
        wb = np.array([b[(p, "wm", e)]["success"] for e in eps], bool)
        rows.append({"policy": p, "real": float(real.mean()), "predicted": float(wa.mean()),
                     "predicted_b": float(wb.mean()), "abs_error": float(abs(wa.mean() - real.mean())),
                     "disagreement": float((wa != wb).mean())})
        flips += list(wa != wb)
        wrong += list(wa != real)
    flips, wrong = np.array(flips), np.array(wrong)
    rho = float(spearmanr([r["abs_error"] for r in rows], [r["disagreement"] for r in rows]).statistic)
    metrics = {"run_a": str(args.run_a), "run_b": str(args.run_b), "policies": rows,
               "disagreement_error_spearman": rho, "episodes": int(len(flips)), "flipped": float(flips.mean()),
               "misjudged_all": float(wrong.mean()),
               "misjudged_among_flipped": float(wrong[flips].mean()) if flips.any() else float("nan"),
               "misjudged_among_kept": float(wrong[~flips].mean()) if (~flips).any() else float("nan")}
    w = max(len(p) for p in policies)
    print(f"{'policy':<{w}} {'real':>5} {'pred A':>7} {'pred B':>7} {'|error|':>8} {'flipped':>8}")
    for r in rows:
        print(f"{r['policy']:<{w}} {r['real']:>5.2f} {r['predicted']:>7.2f} {r['predicted_b']:>7.2f} "
              f"{r['abs_error']:>8.2f} {r['disagreement']:>8.2f}")
    print(f"Spearman(|error|, flipped share) across {len(rows)} policies: {rho:.3f}")
    print(f"episodes flipped {metrics['flipped']:.3f}; misjudged: all {metrics['misjudged_all']:.3f}, flipped "
          f"{metrics['misjudged_among_flipped']:.3f}, kept {metrics['misjudged_among_kept']:.3f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
