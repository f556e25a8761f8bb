"""Coverage and width of the prediction-powered success interval, by simulation over finished evals.

    python experiments/scripts/ppi_study.py runs/select/v1-head-validation --n 10 --out runs/ppi-study/val

Each policy's recorded (real, imagined) episode pairs in the eval's episodes.jsonl stand for its
population; every resample gives the estimator n pairs and the other imagined episodes, and asks
whether its 95% interval holds the population's real rate (`wmsuite.eval_harness.ppi.coverage_study`).
Run once per pseudo-observation weight. Choose the weight on validation-split evals and report the
chosen one on test-split evals. Writes OUT/metrics.json: per weight, pooled coverage, the worst
policy's coverage, the median width ratio to the real-only interval, the median of the best ratio
each policy's per-episode real/imagined correlation allows (sqrt(1 - rho^2)), and per policy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from wmsuite.eval_harness.ppi import PSEUDO, coverage_study, paired_outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="eval output directories (their episodes.jsonl are pooled)")
    ap.add_argument("--n", type=int, default=10, help="real episodes per policy given to the estimator")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--pseudo", type=float, nargs="*", default=[PSEUDO], help="pseudo-observation weights")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    pairs = {}
    for run in args.runs:
        path = Path(run) / "episodes.jsonl"
        if not path.is_file():
            raise SystemExit(f"no episodes.jsonl in {run}: give finished `wmsuite eval` output directories")
        found = paired_outcomes([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
        pairs.update({f"{Path(run).name}/{k}": v for k, v in found.items()})
    rows = []
    for w in args.pseudo:
        r = coverage_study(pairs, args.n, args.resamples, pseudo=w)
        r["worst_policy_coverage"] = min(p["ppi_coverage"] for p in r["policies"])
        rows.append(r)
        print(f"pseudo {w:.2f}: coverage {r['ppi_coverage']:.3f} (worst policy {r['worst_policy_coverage']:.3f}; "
              f"real-only {r['real_only_coverage']:.3f}), median width ratio {r['width_ratio_median']:.3f} "
              f"(the per-episode agreement allows {r['width_ratio_bound_median']:.3f} at best)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({"runs": args.runs, "studies": rows}, indent=2))


if __name__ == "__main__":
    main()
