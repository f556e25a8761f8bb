"""Two learned simulators, one set of real episodes: is B's agreement with the real simulator better
than A's, or within what resampling the episodes would move?

    python experiments/scripts/compare_sims.py runs/a-eval runs/b-eval --out runs/a-vs-b

Both directories are `wmsuite eval --out` results of the same zoo split with the same --seed and
episode count (so episode i of a policy is one start in both). Their real outcomes must agree start
by start (both evaluations ran the same real episodes), or the script stops. Prints each metric for
A and B, the difference B - A with its paired 95% bootstrap interval and the share of resamples in
which B is better, and writes them to --out/metrics.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from wmsuite.eval_harness.metrics import bootstrap_difference
from wmsuite.eval_harness.ppi import paired_outcomes


def _load(directory: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    path = directory / "episodes.jsonl"
    if not path.exists():
        raise SystemExit(f"{path} not found: pass a `wmsuite eval --out` directory")
    return paired_outcomes([json.loads(line) for line in path.read_text().splitlines() if line.strip()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="eval directory of simulator A (the reference)")
    ap.add_argument("b", type=Path, help="eval directory of simulator B")
    ap.add_argument("--samples", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    ap.add_argument("--out", type=Path, required=True, help="directory for metrics.json")
    args = ap.parse_args()
    a, b = _load(args.a), _load(args.b)
    if set(a) != set(b):
        raise SystemExit(f"the evaluations hold other policies: only in A {sorted(set(a) - set(b))}, "
                         f"only in B {sorted(set(b) - set(a))}")
    names = sorted(a)
    for name in names:
        if not np.array_equal(a[name][0], b[name][0]):
            raise SystemExit(f"{name}: the real outcomes differ between the evaluations; run both with the same "
                             "--seed and episode count (or --real-from the first)")
    out = bootstrap_difference([a[n][1] for n in names], [b[n][1] for n in names], [a[n][0] for n in names],
                               samples=args.samples, seed=args.seed)
    print(f"A = {args.a}\nB = {args.b}\n{len(names)} policies, paired bootstrap over episodes ({args.samples} resamples)")
    print(f"{'metric':16s} {'A':>7s} {'B':>7s} {'B - A':>7s}  {'95% interval':>17s}  B better")
    for name, row in out.items():
        print(f"{name:16s} {row['a']:7.3f} {row['b']:7.3f} {row['difference']:+7.3f}  "
              f"[{row['low']:+.3f}, {row['high']:+.3f}]  {row['b_better_share']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metrics.json").write_text(json.dumps(
        {"a": str(args.a), "b": str(args.b), "policies": names, "samples": args.samples, "metrics": out}, indent=2))
    print(f"-> {args.out / 'metrics.json'}")


if __name__ == "__main__":
    main()
