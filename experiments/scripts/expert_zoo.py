"""Policy zoos with splits (#28, #29): scripted experts at graded skill, experts behind action noise,
offsets and scaling, and shipped learned policies, each run in the real simulator, written as a zoo
manifest.

    MUJOCO_GL=egl python experiments/scripts/expert_zoo.py --task pushtwocubes   # assets/zoo/pushtwocubes.json
    MUJOCO_GL=egl python experiments/scripts/expert_zoo.py --task lift           # assets/zoo/lift.json (sim extra)
    MUJOCO_GL=egl python experiments/scripts/expert_zoo.py --task pickplace      # assets/zoo/pickplace.json
    MUJOCO_GL=egl python experiments/scripts/expert_zoo.py --task pushcubeego    # assets/zoo/pushcubeego.json

Every policy acts in chunks of 4 actions (the protocol of a world model that steps 4-action chunks,
as `wmsuite eval` runs it) for 50 episodes from its split's seed: validation policies from seed
100,000, test policies from seed 0, as in the PushCube families zoo. Nothing here is trained: the
learned family is the task's shipped policies (assets/policies), alone or behind a wrapper.

The manifest is rewritten after each policy, and a rerun keeps the rows of --out whose policy,
spec and episode count are this run's: an interrupted campaign goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmsuite.cli.common import resolve_policy
from wmsuite.cli.eval_policy import evaluate

CHUNK = 4
SPLITS = {"validation": {"seed": 100000, "purpose": "choose checkpoints, recipes and judges here"},
          "test": {"seed": 0, "purpose": "report here; never tune on it"}}
FAMILIES = {"expert": "scripted experts at graded skill (envs/experts.py)",
            "wrapper": "experts behind action offsets, noise and scaling (policies/wrappers.py)",
            "learned": "policies trained with `wmsuite train-policy` (assets/policies), some behind a wrapper"}


def _expert(env: str, skill: float, seed: int) -> str:
    return (f'wmsuite.envs.experts:make_expert{{"env_id": "{env}", "skill": {skill}, "horizon": {CHUNK}, '
            f'"seed": {seed}}}')


def _wrap(kind: str, inner: str, **kwargs) -> str:
    args = json.dumps({"inner": inner, **kwargs})
    return f"wmsuite.policies.wrappers:{kind}{args}"


def _policies(env: str, skills: tuple[tuple[float, str], ...], wrappers: tuple[tuple[str, str, str, float, dict], ...],
              learned: tuple[tuple[str, str, str], ...] = ()):
    """(name, family, split, spec) rows: `expert@skill` per (skill, split), then each (name, split,
    wrapper kind, inner expert skill, wrapper kwargs), the inner expert seeded by its row, then each
    learned (name, split, spec)."""
    rows = [(f"expert-skill{s:g}", "expert", split, f"expert@{s:g}") for s, split in skills]
    for i, (name, split, kind, skill, kwargs) in enumerate(wrappers):
        rows.append((name, "wrapper", split, _wrap(kind, _expert(env, skill, 11 + i), **kwargs)))
    return rows + [(name, "learned", split, spec) for name, split, spec in learned]


TASKS = {  # task -> (env id, policies)
    "pushtwocubes": ("wmsuite/PushTwoCubes-v0", _policies(
        "wmsuite/PushTwoCubes-v0",
        ((0.0, "test"), (0.2, "validation"), (0.35, "test"), (0.5, "test"), (0.6, "validation"), (0.75, "test"),
         (0.9, "test"), (1.0, "validation")),
        (("expert1-noise0.6", "validation", "ActionNoise", 1.0, {"std": 0.6}),
         ("expert1-noise1.0", "test", "ActionNoise", 1.0, {"std": 1.0}),
         ("expert1-offset+x0.3", "validation", "ActionOffset", 1.0, {"offset": [0.3, 0.0]}),
         ("expert1-offset-y0.5", "test", "ActionOffset", 1.0, {"offset": [0.0, -0.5]}),
         ("expert1-scale0.4", "test", "ActionScale", 1.0, {"scale": 0.4}),
         ("expert0.75-scale0.25", "test", "ActionScale", 0.75, {"scale": 0.25})))),
    # Lift's OSC_POSE actions: position (3), axis-angle (3), gripper; an offset on x misplaces the grasp
    "lift": ("wmsuite/robosuite-Lift-v0", _policies(
        "wmsuite/robosuite-Lift-v0",
        ((0.0, "test"), (0.25, "validation"), (0.4, "test"), (0.6, "test"), (0.75, "validation"), (0.9, "test"),
         (1.0, "test")),
        (("expert1-noise0.3", "validation", "ActionNoise", 1.0, {"std": 0.3}),
         ("expert1-noise0.6", "test", "ActionNoise", 1.0, {"std": 0.6}),
         ("expert1-offset+x0.3", "test", "ActionOffset", 1.0, {"offset": [0.3, 0, 0, 0, 0, 0, 0]}),
         ("expert1-scale0.3", "validation", "ActionScale", 1.0, {"scale": 0.3}),
         ("expert0.75-noise0.4", "test", "ActionNoise", 0.75, {"std": 0.4})),
        (("flow-state-lift-s500", "validation", "assets:policies/flow-state-lift-s500"),
         ("flow-state-lift-s1500", "test", "assets:policies/flow-state-lift-s1500"),
         ("flow-state-lift-s4000", "test", "assets:policies/flow-state-lift-s4000"),
         ("flow-state-lift-s4000-noise0.6", "test",
          _wrap("ActionNoise", "assets:policies/flow-state-lift-s4000", std=0.6)),
         ("flow-state-lift-s4000-offset+x0.3", "validation",
          _wrap("ActionOffset", "assets:policies/flow-state-lift-s4000", offset=[0.3, 0, 0, 0, 0, 0, 0]))))),
    # PickPlace's actions: hand motion (3), gripper; the learned policies are the shipped state policies
    "pickplace": ("wmsuite/PickPlace-v0", _policies(
        "wmsuite/PickPlace-v0",
        ((0.0, "test"), (0.25, "validation"), (0.4, "test"), (0.6, "test"), (0.75, "validation"), (0.9, "test"),
         (1.0, "test")),
        (("expert1-noise0.5", "validation", "ActionNoise", 1.0, {"std": 0.5}),
         ("expert1-noise1.0", "test", "ActionNoise", 1.0, {"std": 1.0}),
         ("expert1-offset+x0.3", "test", "ActionOffset", 1.0, {"offset": [0.3, 0.0, 0.0, 0.0]}),
         ("expert1-scale0.3", "validation", "ActionScale", 1.0, {"scale": 0.3}),
         ("expert0.75-noise0.4", "test", "ActionNoise", 0.75, {"std": 0.4})),
        (("flow-state-pickplace-s500", "test", "assets:policies/flow-state-pickplace-s500"),
         ("diffusion-state-pickplace-s6000", "validation", "assets:policies/diffusion-state-pickplace-s6000"),
         ("flow-state-pickplace-s2000", "test", "assets:policies/flow-state-pickplace-s2000"),
         ("flow-state-pickplace-s6000", "test", "assets:policies/flow-state-pickplace-s6000"),
         ("flow-state-pickplace-s6000-offset0.5", "test",
          _wrap("ActionOffset", "assets:policies/flow-state-pickplace-s6000", offset=[0.5, 0.0, 0.0, 0.0]))))),
    # PushCubeEgo: the experts look at the goal first; the wrappers make them lose their way on the big table
    "pushcubeego": ("wmsuite/PushCubeEgo-v0", _policies(
        "wmsuite/PushCubeEgo-v0",
        ((0.0, "test"), (0.2, "validation"), (0.35, "test"), (0.5, "test"), (0.6, "validation"), (0.75, "test"),
         (0.9, "test"), (1.0, "validation")),
        (("expert1-noise0.6", "validation", "ActionNoise", 1.0, {"std": 0.6}),
         ("expert1-noise1.2", "test", "ActionNoise", 1.0, {"std": 1.2}),
         ("expert1-offset+x0.3", "validation", "ActionOffset", 1.0, {"offset": [0.3, 0.0]}),
         ("expert1-offset-y0.5", "test", "ActionOffset", 1.0, {"offset": [0.0, -0.5]}),
         ("expert1-scale0.4", "test", "ActionScale", 1.0, {"scale": 0.4}),
         ("expert0.75-scale0.25", "test", "ActionScale", 0.75, {"scale": 0.25})))),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=sorted(TASKS), default="pushtwocubes")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--out", default="", help="default: assets/zoo/<task>.json")
    args = ap.parse_args()
    env, policies = TASKS[args.task]
    out = Path(args.out or f"assets/zoo/{args.task}.json")
    done = {}
    if out.is_file():  # what an interrupted run of the same campaign measured
        old = json.loads(out.read_text())
        if old.get("env_id") == env and old.get("episodes") == args.episodes:
            done = {(r["name"], r["spec"]): r for r in old.get("policies", [])}
    rows = []
    for name, family, split, spec in policies:
        if (name, spec) in done:
            rows.append(done[(name, spec)])
            print(f"{name:<24} {split:<10} real success {done[(name, spec)]['real_success']:.2f} (from {out})")
            continue
        t0 = time.perf_counter()
        policy = resolve_policy(spec, env_id=env, seed=0, horizon=CHUNK)
        m = evaluate(policy, env, args.episodes, SPLITS[split]["seed"], out=None, n_action_steps=CHUNK,
                     progress=False)
        rows.append({"name": name, "family": family, "split": split, "spec": spec, "real_success": m["success_rate"],
                     "episodes": m["episodes"], "ci_low": m["ci_low"], "ci_high": m["ci_high"],
                     "mean_length": m["mean_length"]})
        print(f"{name:<24} {split:<10} real success {m['success_rate']:.2f} [{m['ci_low']:.2f}, {m['ci_high']:.2f}]  "
              f"mean length {m['mean_length']:.0f}  ({time.perf_counter() - t0:.0f} s)")
        _write(out, args, env, rows)
    _write(out, args, env, rows)


def _write(out: Path, args: argparse.Namespace, env: str, rows: list[dict]) -> None:
    manifest = {
        "task": args.task, "env_id": env, "episodes": args.episodes, "splits": SPLITS, "families": FAMILIES,
        "policies": rows,
        "real_success_from": f"python experiments/scripts/expert_zoo.py --task {args.task} (real simulator, "
                             f"{args.episodes} episodes from the split's seed, chunks of 4 actions)",
    }
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(out)  # never a half-written manifest
    print(f"wrote {out}: {len(rows)} policies")


if __name__ == "__main__":
    main()
