"""The PushTwoCubes policy zoo (#28): scripted experts at graded skill and experts behind action
noise, offsets and scaling, each run in the real simulator, written as assets/zoo/pushtwocubes.json.

    MUJOCO_GL=egl python experiments/scripts/pushtwocubes_zoo.py --out assets/zoo/pushtwocubes.json

Every policy acts in chunks of 4 actions (the protocol of a world model that steps 4-action chunks,
as `wmsuite eval` runs it) for 50 episodes from its split's seed: validation policies from seed
100,000, test policies from seed 0, as in the PushCube families zoo. Nothing here is trained; the
learned family joins when policies are trained on this task.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmsuite.cli.common import resolve_policy
from wmsuite.cli.eval_policy import evaluate

ENV = "wmsuite/PushTwoCubes-v0"
CHUNK = 4
SPLITS = {"validation": {"seed": 100000, "purpose": "choose checkpoints, recipes and judges here"},
          "test": {"seed": 0, "purpose": "report here; never tune on it"}}


def _expert(skill: float, seed: int) -> str:
    return (f'wmsuite.envs.experts:make_expert{{"env_id": "{ENV}", "skill": {skill}, "horizon": {CHUNK}, '
            f'"seed": {seed}}}')


def _wrap(kind: str, inner: str, **kwargs) -> str:
    args = json.dumps({"inner": inner, **kwargs})
    return f"wmsuite.policies.wrappers:{kind}{args}"


POLICIES = [  # (name, family, split, spec)
    *[(f"expert-skill{s:g}", "expert", split, f"expert@{s:g}") for s, split in (
        (0.0, "test"), (0.2, "validation"), (0.35, "test"), (0.5, "test"), (0.6, "validation"), (0.75, "test"),
        (0.9, "test"), (1.0, "validation"))],
    ("expert1-noise0.6", "wrapper", "validation", _wrap("ActionNoise", _expert(1.0, 11), std=0.6)),
    ("expert1-noise1.0", "wrapper", "test", _wrap("ActionNoise", _expert(1.0, 12), std=1.0)),
    ("expert1-offset+x0.3", "wrapper", "validation", _wrap("ActionOffset", _expert(1.0, 13), offset=[0.3, 0.0])),
    ("expert1-offset-y0.5", "wrapper", "test", _wrap("ActionOffset", _expert(1.0, 14), offset=[0.0, -0.5])),
    ("expert1-scale0.4", "wrapper", "test", _wrap("ActionScale", _expert(1.0, 15), scale=0.4)),
    ("expert0.75-scale0.25", "wrapper", "test", _wrap("ActionScale", _expert(0.75, 16), scale=0.25)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--out", default="assets/zoo/pushtwocubes.json")
    args = ap.parse_args()
    rows = []
    for name, family, split, spec in POLICIES:
        t0 = time.perf_counter()
        policy = resolve_policy(spec, env_id=ENV, seed=0, horizon=CHUNK)
        m = evaluate(policy, ENV, args.episodes, SPLITS[split]["seed"], out=None, n_action_steps=CHUNK,
                     progress=False)
        rows.append({"name": name, "family": family, "split": split, "spec": spec, "real_success": m["success_rate"],
                     "episodes": m["episodes"], "ci_low": m["ci_low"], "ci_high": m["ci_high"],
                     "mean_length": m["mean_length"]})
        print(f"{name:<24} {split:<10} real success {m['success_rate']:.2f} [{m['ci_low']:.2f}, {m['ci_high']:.2f}]  "
              f"mean length {m['mean_length']:.0f}  ({time.perf_counter() - t0:.0f} s)")
    manifest = {
        "task": "pushtwocubes", "env_id": ENV, "episodes": args.episodes, "splits": SPLITS,
        "families": {"expert": "scripted experts at graded skill (envs/experts.py)",
                     "wrapper": "experts behind action offsets, noise and scaling (policies/wrappers.py)"},
        "policies": rows,
        "real_success_from": "python experiments/scripts/pushtwocubes_zoo.py (real simulator, 50 episodes from the "
                             "split's seed, chunks of 4 actions)",
    }
    Path(args.out).write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {args.out}: {len(rows)} policies")


if __name__ == "__main__":
    main()
