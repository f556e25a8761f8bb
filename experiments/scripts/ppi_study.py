"""Coverage and width of the prediction-powered success interval, by simulation over finished evals.

    python experiments/scripts/ppi_study.py runs/select/v1-head-validation --n 10 --out runs/ppi-study/val
    python experiments/scripts/ppi_study.py runs/ppi/validation-n0+runs/ppi/validation-n1 --draws 1 2 --out ...

Each policy's recorded (real, imagined) episode pairs in the eval's episodes.jsonl stand for its
population; every resample gives the estimator n pairs and the other imagined episodes, and asks
whether its 95% interval holds the population's real rate (`wmsuite.eval_harness.ppi.coverage_study`).
Run once per pseudo-observation weight. Choose the weight on validation-split evals and report the
chosen one on test-split evals. A run given as DIR+DIR2+.. is one set of starts imagined several times
(`wmsuite eval --noise-seed K --real-from DIR`); with --draws k each start's prediction is the mean
imagined outcome of its first k draws (`wmsuite.eval_harness.ppi.mean_over_draws`). Writes
OUT/metrics.json: per number of draws, interval shape and weight, pooled coverage, the mean width,
the worst policy's coverage, the median width ratio to the real-only interval and to the estimator's
own interval without imagined episodes (lam = 0; `coverage_study`), the median of the best ratio each
policy's per-episode real/imagined correlation allows (sqrt(1 - rho^2)), and per policy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from wmsuite.eval_harness.ppi import INTERVALS, PSEUDO, coverage_study, mean_over_draws, paired_outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="eval output directories (their episodes.jsonl are pooled); "
                    "DIR+DIR2+..: the same starts imagined again with other --noise-seed")
    ap.add_argument("--n", type=int, default=10, help="real episodes per policy given to the estimator")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--pseudo", type=float, nargs="*", default=[PSEUDO], help="pseudo-observation weights")
    ap.add_argument("--interval", nargs="*", default=["normal"], choices=INTERVALS,
                    help="interval shapes (eval_harness/ppi.py)")
    ap.add_argument("--draws", type=int, nargs="*", default=[1],
                    help="numbers of imagined draws averaged per start (each <= the draws given per run)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    groups = [run.split("+") for run in args.runs]
    if min(args.draws) < 1 or max(args.draws) > min(len(g) for g in groups):
        raise SystemExit(f"--draws must be between 1 and the draws given per run ({min(len(g) for g in groups)})")
    by_draw = {}  # {run label: [pairs of draw 0, draw 1, ..]}
    for group in groups:
        found = []
        for run in group:
            path = Path(run) / "episodes.jsonl"
            if not path.is_file():
                raise SystemExit(f"no episodes.jsonl in {run}: give finished `wmsuite eval` output directories")
            found.append(paired_outcomes([json.loads(line) for line in path.read_text().splitlines() if line.strip()]))
        by_draw[Path(group[0]).name] = found
    rows = []
    for k in args.draws:
        pairs = {f"{label}/{name}": v for label, found in by_draw.items()
                 for name, v in mean_over_draws(found[:k]).items()}
        for shape in args.interval:
            for w in args.pseudo:
                r = coverage_study(pairs, args.n, args.resamples, pseudo=w, interval=shape)
                r["draws"] = k
                r["worst_policy_coverage"] = min(p["ppi_coverage"] for p in r["policies"])
                rows.append(r)
                print(f"draws {k}, {shape} interval, pseudo {w:.2f}: coverage {r['ppi_coverage']:.3f} (worst policy "
                      f"{r['worst_policy_coverage']:.3f}; real-only {r['real_only_coverage']:.3f}), mean width "
                      f"{r['ppi_width_mean']:.3f}, median width ratio {r['width_ratio_median']:.3f}, "
                      f"{r['width_ratio_own_median']:.3f} against itself without imagined episodes (the per-episode "
                      f"agreement allows {r['width_ratio_bound_median']:.3f} at best)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({"runs": args.runs, "studies": rows}, indent=2))


if __name__ == "__main__":
    main()
