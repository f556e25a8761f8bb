"""Trust signals against the truth on recorded PushCube episodes (#26), open loop.

    OMP_NUM_THREADS=2 python experiments/scripts/trust_study.py --wm runs/wm-bwd-export \
        --fit-data data/pushcube_val.hdf5 --test-data data/pushcube_heldout.hdf5 --out runs/trust-study

Imagines every episode of both files from its first frame with its own actions, and at each depth
records the true error (latent, object) beside the round-trip and inverse-dynamics signals
(`wmsuite.eval_harness.trust_study`). Reports, on the test file: Spearman of each signal with each
true error across episodes per depth and within episodes; a calibrator of the object error fitted
on the fit file (normal, Student-t or empirical residuals, chosen by cross-validation on the fit file), its
68%/95% coverage and selective-evaluation figures on the test file; its start and novelty gates at a
high quantile of 1,000 fresh resets of the real env (--gate-resets). Writes
OUT/metrics.json, OUT/rows_{fit,test}.npz and OUT/calibration.json (the fitted calibrator; with
--novelty, the bank its novelty gate reads beside it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from wmsuite.data import load_episodes
from wmsuite.envs import get_probe
from wmsuite.eval_harness.trust_study import (
    calibration_figures,
    cross_validated_coverage,
    gate_settings,
    reset_scores,
    signal_figures,
    trust_rows,
)
from wmsuite.specs import NOVELTY, file_digest, resolve_asset
from wmsuite.world_models import load_world_model, resolve_checkpoint
from wmsuite.world_models.calibrator import RESIDUALS
from wmsuite.world_models.novelty import PatchNovelty
from wmsuite.world_models.trust import check_backward_model


def write_calibrator(cal, gate_rows: dict, args: argparse.Namespace, bank, out: Path) -> None:
    """OUT/calibration.json: `cal` with tau, its gates (and ramps, with --ramp-quantile) at
    --gate-quantile of `gate_rows`' start errors and novelty (the bank copied beside it), and the
    digest of the simulator whose rollouts it was fitted on."""
    cal = dataclasses.replace(cal, tau=args.tau, **gate_settings(gate_rows, args.gate_quantile, args.ramp_quantile),
                              simulator=file_digest(resolve_checkpoint(resolve_asset(args.wm))))
    if bank is not None:
        shutil.copyfile(args.novelty, out / NOVELTY)
    (out / "calibration.json").write_text(json.dumps(cal.to_json(), indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wm", required=True, help="the simulator: the world model whose rollouts are judged")
    ap.add_argument("--round-trip-wm", default="",
                    help="a backward copy of --wm that plays its rollouts back (default: --wm itself, which must then "
                         "have been trained with backward windows)")
    ap.add_argument("--fit-data", required=True)
    ap.add_argument("--test-data", required=True)
    ap.add_argument("--env", default="wmsuite/PushCube-v0")
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 6, 8, 12, 16])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gate-quantile", type=float, default=0.99,
                    help="the gates: this quantile of the in-distribution start errors and novelty (fresh resets, or "
                         "the fit episodes with --gate-resets 0; fixed, not tuned)")
    ap.add_argument("--samples", type=int, default=1, help="backward passes per round trip (their mean f_0 is compared)")
    ap.add_argument("--tau", type=float, default=0.025,
                    help="the tolerated object error (m) that trust scores refer to: half PushCube's goal radius, "
                         "set from the task's geometry, not from any figure")
    ap.add_argument("--ramp-quantile", type=float, default=None,
                    help="let both gates close gradually from this quantile of the in-distribution scores up to "
                         "--gate-quantile (Calibrator.start_ramp / novelty_ramp; default: hard gates). Choose it on "
                         "the validation scene variants (ood_study.py --split validation --ramp-quantiles ...)")
    ap.add_argument("--novelty", default="",
                    help="a scene-novelty bank of the simulator's training frames (world_models/novelty.py): adds the "
                         "novelty signal and a gate on it at --gate-quantile of the fit episodes' novelty, and is "
                         "copied beside calibration.json")
    ap.add_argument("--gate-resets", type=int, default=1000,
                    help="set the gates from this many fresh resets of the real env (0: from the fit file's starts)")
    ap.add_argument("--gate-seed", type=int, default=700000,
                    help="first reset seed for the gates (apart from every data file's and zoo's seeds)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    bank = PatchNovelty.load(args.novelty) if args.novelty else None
    model = load_world_model(args.wm)
    back = load_world_model(args.round_trip_wm) if args.round_trip_wm else None
    try:
        check_backward_model(model, back)
    except ValueError as err:
        raise SystemExit(f"{args.wm}: {err} (pass it as --round-trip-wm)") from None
    probe = get_probe(args.env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    rows = {}
    for name, path in (("fit", args.fit_data), ("test", args.test_data)):
        t0 = time.perf_counter()
        rows[name] = trust_rows(model, load_episodes(path), probe, args.depths, seed=args.seed,
                                samples=args.samples, backward=back, novelty=bank)
        np.savez(out / f"rows_{name}.npz", **rows[name])
        print(f"{name}: {len(rows[name]['depth'])} rows from {path} in {time.perf_counter() - t0:.0f} s")
    metrics = {"wm": args.wm, "round_trip_wm": args.round_trip_wm, "samples": args.samples,
               "fit_data": args.fit_data, "test_data": args.test_data, "depths": args.depths,
               "signals_test": signal_figures(rows["test"]), "signals_fit": signal_figures(rows["fit"]),
               "calibration": {}}
    if args.gate_resets:
        gate_rows = reset_scores(model, bank, args.env, probe, args.gate_resets, args.gate_seed)
    else:
        first = rows["fit"]["depth"] == rows["fit"]["depth"].min()  # one row per fit episode
        gate_rows = {k: rows["fit"][k][first] for k in ("start", "novelty") if k in rows["fit"]}
    metrics["gates"] = {"resets": args.gate_resets, "seed": args.gate_seed, "quantile": args.gate_quantile,
                        "ramp_quantile": args.ramp_quantile,
                        **gate_settings(gate_rows, args.gate_quantile, args.ramp_quantile)}
    print("gates: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics["gates"].items()
                                if k.endswith(("_limit", "_ramp")))
          + (f" (from {args.gate_resets} fresh resets)" if args.gate_resets else " (from the fit episodes' starts)"))
    # the residual model of the calibrator eval reads: chosen by cross-validation on the fit file alone
    shipped = ("round_trip", "idm", "depth")
    cv = {r: cross_validated_coverage(rows["fit"], "object", shipped, r) for r in RESIDUALS}
    metrics["residuals_cv_gap"], metrics["residuals"] = cv, min(cv, key=cv.get)
    print(f"residual model: {metrics['residuals']} (coverage gap, 10-fold cross-validation on the fit file: "
          + ", ".join(f"{r} {g:.3f}" for r, g in cv.items()) + ")")
    for truth in ("object", "latent"):
        for feats in (("round_trip", "idm", "depth", "start"), shipped, ("idm", "depth"), ("depth",)):
            for residuals in RESIDUALS:
                cal, fig = calibration_figures(rows["fit"], rows["test"], truth=truth, features=feats,
                                               residuals=residuals)
                metrics["calibration"][f"{truth}:{'+'.join(feats)}" + (f":{residuals}" if residuals != "normal" else "")] = fig
                if (truth, feats, residuals) == ("object", shipped, metrics["residuals"]):
                    write_calibrator(cal, gate_rows, args, bank, out)  # fixed in advance; eval reads it
    for key, fig in metrics["signals_test"].items():
        print(f"{key:<34} Spearman across episodes (median over depths) {fig['across_episodes_median']:+.3f}  "
              f"within episodes {fig['within_episodes_median']:+.3f}")
    for key, fig in metrics["calibration"].items():
        print(f"calibrator {key:<34} coverage 68% {fig['coverage_68']:.3f}  95% {fig['coverage_95']:.3f}  "
              f"error at 80%: {fig['error_kept']:.4f} (all {fig['error_all']:.4f}, depth only "
              f"{fig['error_kept_depth_only']:.4f})")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
