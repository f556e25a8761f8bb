"""Does the trust score flag scenes the world model never saw? PushCube's scene variants (#26).

    OMP_NUM_THREADS=2 python experiments/scripts/ood_study.py --wm runs/wm-bwd-export \
        --calibration runs/trust-study/calibration.json --split test --out runs/ood-study

For every scene variant of one split of `wmsuite.envs.push_cube.OOD_SPLITS` (settings are tuned on
"validation", figures reported on "test") and for the training scene, the same
expert episodes (same seeds, so the same layouts and, except for a resized cube, the same motion) are
rolled out in the real simulator and imagined open loop from their first frame (eval_harness/
trust_study.py: `trust_rows`). Each (episode, depth) row gets the calibrator's trust score; a variant's
AUROC is how well distrust (1 - trust) separates its rows from the training scene's rows at the same
depths (1: perfectly, 0.5: not at all), per depth and over all depths. Also the true object error of
each scene, so that a variant the model happens to imagine well is seen as such.

--ramp-quantiles Q1 Q2 .. also scores every row with the calibrator's gates given ramps at each
quantile of fresh resets' scores (`Calibrator.start_ramp` / `novelty_ramp`, eval_harness/trust_study.py:
`reset_scores`; limits kept), and reports per candidate the AUROCs and how many
training-scene rows the ramps touch. A ramp lowers the trust of in-distribution starts too, which
can cost abstention where the scene is the training one; so a candidate is chosen on the
validation split by two figures: the highest mean AUROC over its variants among the ramps whose
calibrator (trust_study.py --ramp-quantile Q) leaves the validation zoo's misjudged share at 80%
kept (`wmsuite eval --round-trip --calibration ...`) within 0.005 of the hard gates'. Writes
OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from wmsuite.cli.common import resolve_policy
from wmsuite.envs import get_probe
from wmsuite.envs.push_cube import OOD_SPLITS, VARIANTS
from wmsuite.eval_harness.abstention import CalibratedTrust
from wmsuite.eval_harness.trust_study import auroc, gate_settings, reset_scores, trust_rows
from wmsuite.rollout import RolloutConfig, make_vector_env, rollout
from wmsuite.specs import file_digest, resolve_asset
from wmsuite.world_models import load_world_model, resolve_checkpoint
from wmsuite.world_models.calibrator import GATES, RAMPS
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
    ap.add_argument("--seed", type=int, default=None,
                    help="first episode seed (default 300000 for the test split, 310000 for validation: apart from "
                         "every data file's and zoo's seeds, and from each other)")
    ap.add_argument("--split", choices=sorted(OOD_SPLITS), default="test",
                    help="which variants: 'validation' to choose settings on, 'test' to report")
    ap.add_argument("--ramp-quantiles", type=float, nargs="*", default=[],
                    help="candidate ramp starts, as quantiles of --gate-resets fresh resets' scores")
    ap.add_argument("--gate-resets", type=int, default=1000, help="fresh resets for the ramps' quantiles")
    ap.add_argument("--gate-seed", type=int, default=700000, help="their first seed (trust_study.py's default)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = load_world_model(args.wm)
    back = load_world_model(args.round_trip_wm) if args.round_trip_wm else None
    try:
        check_backward_model(model, back)
    except ValueError as err:
        raise SystemExit(f"{args.wm}: {err} (pass it as --round-trip-wm)") from None
    scorer = CalibratedTrust.load(Path(args.calibration), model.cfg.chunk,  # the calibrator and its novelty bank
                                  simulator=file_digest(resolve_checkpoint(resolve_asset(args.wm))))
    cal, bank = scorer.calibrator, scorer.novelty
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seed = args.seed if args.seed is not None else (300000 if args.split == "test" else 310000)
    torch.manual_seed(0)
    rows = {}
    for variant in ("", *OOD_SPLITS[args.split]):
        t0 = time.perf_counter()
        eps = episodes(variant, args.episodes, seed, model.cfg.chunk)
        rows[variant] = r = trust_rows(model, eps, get_probe(ENV), args.depths, seed=0, backward=back, novelty=bank)
        print(f"{variant or 'training scene':<16} {len(r['depth'])} rows, object error {r['object'].mean():.4f} m "
              f"({time.perf_counter() - t0:.0f} s)")
    metrics = {"wm": args.wm, "round_trip_wm": args.round_trip_wm, "calibration": args.calibration,
               "split": args.split, "episodes": args.episodes, "seed": seed, "depths": args.depths,
               **figures(cal, rows, bank is not None)}
    report(metrics)
    if args.ramp_quantiles:
        scores = reset_scores(model, bank, ENV, get_probe(ENV), args.gate_resets, args.gate_seed)
        metrics["ramps"] = {}
        for q in args.ramp_quantiles:
            starts = gate_settings(scores, None, q)  # ramps only: the calibrator's limits are kept
            ramps = {RAMPS[f]: starts[RAMPS[f]] for f in scores
                     if getattr(cal, GATES[f]) is not None and starts[RAMPS[f]] < getattr(cal, GATES[f])}
            fig = figures(dataclasses.replace(cal, **ramps), rows, bank is not None)
            base = fig["variants"]["training"]
            metrics["ramps"][str(q)] = {**ramps, "auroc": {k: v["auroc"] for k, v in fig["variants"].items() if "auroc" in v},
                                        "auroc_mean": fig["auroc_mean"], "auroc_min": fig["auroc_min"],
                                        "training_rows_lowered": base["lowered"]}
            print(f"ramp at the {q:g} quantile: AUROC mean {fig['auroc_mean']:.3f}, min {fig['auroc_min']:.3f}; "
                  f"training-scene rows lowered {base['lowered']:.3f}")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))


def figures(cal, rows: dict, with_novelty: bool) -> dict:
    """Per scene: rows, mean trust, object error, the share of rows whose trust a gate lowered
    (`lowered`) and, for variants, the AUROC of distrust against the training scene's rows (overall,
    by depth, and of the raw round trip and novelty); then the AUROCs' mean and minimum."""
    distrust, lowered = {}, {}
    for variant, r in rows.items():
        feats = {"round_trip": r["round_trip"], "idm": r["idm"], "depth": r["depth"].astype(float), "start": r["start"],
                 **({"novelty": r["novelty"]} if with_novelty else {})}
        trust = cal.trust(feats)
        ungated = dataclasses.replace(cal, **dict.fromkeys((*GATES.values(), *RAMPS.values()))).trust(feats)
        distrust[variant], lowered[variant] = 1.0 - trust, float(np.mean(trust < ungated))
    base = rows[""]
    out = {"variants": {}}
    for variant, r in rows.items():
        fig = {"description": VARIANTS[variant], "rows": int(len(r["depth"])), "mean_trust": float(1 - distrust[variant].mean()),
               "object_error": float(r["object"].mean()), "round_trip": float(r["round_trip"].mean()),
               "lowered": lowered[variant]}
        if variant:
            fig["auroc"] = auroc(distrust[""], distrust[variant])
            fig["auroc_round_trip"] = auroc(base["round_trip"], r["round_trip"])
            if with_novelty:
                fig["auroc_novelty"] = auroc(base["novelty"], r["novelty"])
            fig["auroc_by_depth"] = {int(d): auroc(distrust[""][base["depth"] == d], distrust[variant][r["depth"] == d])
                                     for d in np.unique(r["depth"]) if (base["depth"] == d).any()}
        out["variants"][variant or "training"] = fig
    aucs = [f["auroc"] for f in out["variants"].values() if "auroc" in f]
    out["auroc_mean"], out["auroc_min"] = float(np.mean(aucs)), float(np.min(aucs))
    return out


def report(metrics: dict) -> None:
    print(f"\n{'variant':<14} {'AUROC':>6} {'(raw round trip)':>16} {'(raw novelty)':>13} {'mean trust':>10} "
          f"{'object err m':>12} {'lowered':>8}")
    for name, f in metrics["variants"].items():
        print(f"{name:<14} {f.get('auroc', float('nan')):>6.3f} {f.get('auroc_round_trip', float('nan')):>16.3f} "
              f"{f.get('auroc_novelty', float('nan')):>13.3f} {f['mean_trust']:>10.3f} {f['object_error']:>12.4f} "
              f"{f['lowered']:>8.3f}")
    print(f"AUROC mean {metrics['auroc_mean']:.3f}, min {metrics['auroc_min']:.3f}")


if __name__ == "__main__":
    main()
