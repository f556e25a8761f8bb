"""#30: failure guidance's strength chosen on validation seeds, then reported on the evaluation seeds.

The study's recipe fixed the guidance scale at 1 (policies/guidance.py: lambda_k = scale * (1 - cos)
/ 2 per step). The scale acts at sampling time only, so a trained afil policy is scored at several
scales without retraining: each on the validation seeds, the best (the smaller on a tie) then on the
evaluation seeds beside the bc control, both scored by the same function with the same noise seeding.

    python experiments/scripts/guidance_scale.py --afil assets:policies/afil-pushcube \
        --bc assets:policies/bc-pushcube --env wmsuite/PushCube-v0 --out runs/guidance-pushcube

Writes OUT/metrics.json (every scale's validation figure, the chosen scale, both evaluation figures).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def score(policy, env: str, episodes: int, seed: int, scale: float | None) -> dict:
    from wmsuite.cli.common import seed_everything
    from wmsuite.cli.eval_policy import evaluate

    if scale is not None:
        policy.cfg.guidance_scale = scale
    seed_everything(seed)  # the same noise for every policy and scale (as `wmsuite improve` scores)
    m = evaluate(policy, env, episodes, seed, out=None, num_envs=2, cameras=(), progress=False)
    return {"success": m["success_rate"], "ci": [m["ci_low"], m["ci_high"]], "mean_length": m["mean_length"]}


def main() -> None:
    import wmsuite.envs  # noqa: F401  (registers the ids)
    from wmsuite.policies import load_policy

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--afil", required=True)
    ap.add_argument("--bc", required=True)
    ap.add_argument("--env", default="wmsuite/PushCube-v0")
    ap.add_argument("--scales", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--val-seed", type=int, default=950_000)
    ap.add_argument("--val-episodes", type=int, default=100)
    ap.add_argument("--eval-seed", type=int, default=900_000)
    ap.add_argument("--eval-episodes", type=int, default=200)
    ap.add_argument("--out", default="runs/guidance")
    args = ap.parse_args()
    afil, bc = load_policy(args.afil), load_policy(args.bc)
    val = {}
    for s in args.scales:
        val[s] = score(afil, args.env, args.val_episodes, args.val_seed, s)
        print(f"validation, scale {s:g}: {val[s]['success']:.3f} {val[s]['ci']}", flush=True)
    chosen = max(sorted(args.scales), key=lambda s: val[s]["success"])  # the first (smallest) of the best
    report = {"afil": score(afil, args.env, args.eval_episodes, args.eval_seed, chosen),
              "bc": score(bc, args.env, args.eval_episodes, args.eval_seed, None)}
    for name, m in report.items():
        print(f"evaluation seeds, {name}{f' (scale {chosen:g})' if name == 'afil' else ''}: "
              f"{m['success']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({"args": vars(args), "validation": {str(k): v for k, v in val.items()},
                                                  "chosen_scale": chosen, "evaluation": report}, indent=2))


if __name__ == "__main__":
    main()
