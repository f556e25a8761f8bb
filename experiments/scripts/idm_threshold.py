"""The `wmsuite eval --idm-stop` threshold, chosen on training rollouts (#26).

    OMP_NUM_THREADS=2 python experiments/scripts/idm_threshold.py --wm assets:wm/pushcube \
        --data data/pushcube_mixed_bias.hdf5 --out runs/idm-threshold

Imagines a sample of the world model's own training episodes open loop from their first frame with
their own actions and records every chunk's inverse-dynamics error, as the learned simulator reports
it per step (`wmsuite.eval_harness.trust_study.chunk_idm_errors`). On training data the frames show
the actions given as well as this model ever does, so a step beyond a high quantile of these errors
is one the model has left its data on. Prints the quantiles; the `--quantile` one is the threshold.
Writes OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from wmsuite.data import load_episodes
from wmsuite.eval_harness.trust_study import chunk_idm_errors
from wmsuite.specs import resolve_asset
from wmsuite.world_models import load_world_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wm", default="assets:wm/pushcube")
    ap.add_argument("--data", default="data/pushcube_mixed_bias.hdf5", help="the world model's training file")
    ap.add_argument("--episodes", type=int, default=200, help="episodes sampled from the file")
    ap.add_argument("--quantile", type=float, default=0.99)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = load_world_model(resolve_asset(args.wm))
    episodes = load_episodes(args.data)
    pick = np.random.default_rng(args.seed).choice(len(episodes), min(args.episodes, len(episodes)), replace=False)
    errors = chunk_idm_errors(model, [episodes[i] for i in sorted(pick)], seed=args.seed)
    qs = sorted({0.5, 0.9, 0.95, 0.99, 0.999, args.quantile})
    metrics = {"wm": args.wm, "data": args.data, "episodes": len(pick), "chunks": len(errors),
               "quantiles": {str(q): float(np.quantile(errors, q)) for q in qs}, "quantile": args.quantile,
               "threshold": float(np.quantile(errors, args.quantile))}
    for q, v in metrics["quantiles"].items():
        print(f"IDM error quantile {q}: {v:.4f}")
    print(f"threshold (quantile {args.quantile}, {len(errors)} chunks of {len(pick)} episodes): {metrics['threshold']:.4f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
