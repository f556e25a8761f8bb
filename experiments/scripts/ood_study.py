"""Does the trust score flag scenes the world model never saw? PushCube's scene variants (#26).

    OMP_NUM_THREADS=2 python experiments/scripts/ood_study.py --wm runs/wm-bwd-export \
        --calibration runs/trust-study/calibration.json --out runs/ood-study

For every scene variant of `wmsuite.envs.push_cube.VARIANTS` and for the training scene, the same
expert episodes (same seeds, so the same layouts and, except for the bigger cube, the same motion) are
rolled out in the real simulator and imagined open loop from their first frame (eval_harness/
trust_study.py: `trust_rows`). Each (episode, depth) row gets the calibrator's trust score; a variant's
AUROC is how well distrust (1 - trust) separates its rows from the training scene's rows at the same
depths (1: perfectly, 0.5: not at all), per depth and over all depths. Also the true object error of
each scene, so that a variant the model happens to imagine well is seen as such. Writes OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from wmsuite.cli.common import resolve_policy
from wmsuite.envs import get_probe
from wmsuite.envs.push_cube import VARIANTS
from wmsuite.eval_harness.abstention import CalibratedTrust
from wmsuite.eval_harness.trust_study import auroc, trust_rows
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout
from wmsuite.world_models import load_world_model
from wmsuite.world_models.trust import check_backward_model

ENV = "wmsuite/PushCube-v0"


def episodes(variant: str, n: int, seed: int, chunk: int) -> list:
    """n expert episodes (skills 1.0 / 0.6 / 0.2 in turn) in `variant`, frames kept."""
    out = []
    for k, skill in enumerate((1.0, 0.6, 0.2)):
        count = n // 3 + (k < n % 3)
        env = make_vector_env(ENV, min(count, 8), asynchronous=False, env_kwargs={"variant": variant})
        policy = resolve_policy(f"expert@{skill}", env_id=ENV, seed=seed + k, horizon=chunk)
        cfg = RolloutConfig(episodes=count, seed=seed + 1000 * k, progress=False, act_every=chunk)
        out += list(rollout(policy, env, cfg))
        env.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wm", required=True, help="the simulator: the world model whose rollouts are judged")
    ap.add_argument("--round-trip-wm", default="",
                    help="a backward copy of --wm that plays its rollouts back (default: --wm itself, which must then "
                         "have been trained with backward windows)")
    ap.add_argument("--calibration", required=True, help="the calibrator (trust_study.py's calibration.json)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per scene")
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--seed", type=int, default=300000, help="first episode seed (unseen by training and tuning)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = load_world_model(args.wm)
    back = load_world_model(args.round_trip_wm) if args.round_trip_wm else None
    try:
        check_backward_model(model, back)
    except ValueError as err:
        raise SystemExit(f"{args.wm}: {err} (pass it as --round-trip-wm)") from None
    scorer = CalibratedTrust.load(Path(args.calibration), model.cfg.chunk)  # the calibrator and its novelty bank
    cal, bank = scorer.calibrator, scorer.novelty
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    rows, distrust = {}, {}
    for variant in VARIANTS:
        t0 = time.perf_counter()
        eps = episodes(variant, args.episodes, args.seed, model.cfg.chunk)
        rows[variant] = trust_rows(model, eps, get_probe(ENV), args.depths, seed=0, backward=back, novelty=bank)
        r = rows[variant]
        feats = {"round_trip": r["round_trip"], "idm": r["idm"], "depth": r["depth"].astype(float), "start": r["start"],
                 **({"novelty": r["novelty"]} if bank is not None else {})}
        distrust[variant] = 1.0 - cal.trust(feats)
        print(f"{variant or 'training scene':<16} {len(r['depth'])} rows, object error {r['object'].mean():.4f} m, "
              f"mean trust {1 - distrust[variant].mean():.3f} ({time.perf_counter() - t0:.0f} s)")
    base = rows[""]
    metrics = {"wm": args.wm, "round_trip_wm": args.round_trip_wm, "calibration": args.calibration, "episodes": args.episodes, "seed": args.seed,
               "depths": args.depths, "variants": {}}
    for variant, r in rows.items():
        fig = {"description": VARIANTS[variant], "rows": int(len(r["depth"])), "mean_trust": float(1 - distrust[variant].mean()),
               "object_error": float(r["object"].mean()), "round_trip": float(r["round_trip"].mean())}
        if variant:
            fig["auroc"] = auroc(distrust[""], distrust[variant])
            fig["auroc_round_trip"] = auroc(base["round_trip"], r["round_trip"])
            if bank is not None:
                fig["auroc_novelty"] = auroc(base["novelty"], r["novelty"])
            fig["auroc_by_depth"] = {int(d): auroc(distrust[""][base["depth"] == d], distrust[variant][r["depth"] == d])
                                     for d in np.unique(r["depth"]) if (base["depth"] == d).any()}
        metrics["variants"][variant or "training"] = fig
    aucs = [f["auroc"] for f in metrics["variants"].values() if "auroc" in f]
    metrics["auroc_mean"], metrics["auroc_min"] = float(np.mean(aucs)), float(np.min(aucs))
    print(f"\n{'variant':<14} {'AUROC':>6} {'(raw round trip)':>16} {'(raw novelty)':>13} {'mean trust':>10} "
          f"{'object err m':>12}")
    for name, f in metrics["variants"].items():
        print(f"{name:<14} {f.get('auroc', float('nan')):>6.3f} {f.get('auroc_round_trip', float('nan')):>16.3f} "
              f"{f.get('auroc_novelty', float('nan')):>13.3f} {f['mean_trust']:>10.3f} {f['object_error']:>12.4f}")
    print(f"AUROC mean {metrics['auroc_mean']:.3f}, min {metrics['auroc_min']:.3f}")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
