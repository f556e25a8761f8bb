"""How precise must the cube's reading be for PushCubeEgo's expert to succeed in the learned simulator? (#33)

In `wmsuite eval` the expert acts on the positions the tracked judge believes: the cube stays put until
the pusher is within reach, then takes the heads' reading. This runs the expert in the *real*
simulator with that belief in its observation, the reading being the true cube plus Gaussian noise of
`sigma` metres per axis on every frame (a perfect generator whose heads are that imprecise). For each
sigma it prints the real success rate (does the expert still push the cube home acting on the belief?)
and the judged one (the task's rule fired on the belief on some frame before the real episode ended:
what the learned simulator, which ends an episode at the judge's success, would report), and writes
them to --out DIR/metrics.json. sigma 0 must give the expert's own success rate.

    python experiments/scripts/ego_reading_noise.py --episodes 50 --sigmas 0 0.01 0.02 0.04
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from wmsuite.envs import make_env
from wmsuite.envs.experts import make_expert
from wmsuite.envs.probes import get_probe
from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking

ENV_ID = "wmsuite/PushCubeEgo-v0"


def run(sigma: float, episodes: int, seed: int, skill: float) -> dict[str, float]:
    """Success of the expert acting on a belief read with noise `sigma` (m), real and judged."""
    probe = get_probe(ENV_ID)
    tracking, rng = ObjectTracking.from_probe(probe), np.random.default_rng(seed)
    env, expert = make_env(ENV_ID, cameras=()), make_expert(ENV_ID, skill=skill, seed=seed, horizon=4)
    real, judged = [], []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            expert.reset()
            tracker = ObjectTracker(tracking, 1)
            tracker.reset(np.zeros(1, int), obs["environment_state"][None])
            belief, done, hit = obs["environment_state"].copy(), False, False
            while not done:
                action = expert.select_action({"agent_pos": obs["agent_pos"][None], "environment_state": belief[None]})[0]
                obs, _, terminated, truncated, info = env.step(action)
                read = obs["environment_state"].copy()
                read[probe.object_xy] += rng.normal(0.0, sigma, 2)
                belief = tracker.update(obs["agent_pos"][None, None], read[None, None])[0, 0]
                hit |= bool(probe.success_from_env_state(belief))
                done = terminated or truncated
            real.append(bool(info["is_success"]))
            judged.append(hit)
    finally:
        env.close()
    return {"sigma": sigma, "real_success": float(np.mean(real)), "judged_success": float(np.mean(judged))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=100_000, help="first env seed (the zoo's validation seeds)")
    parser.add_argument("--skill", type=float, default=1.0)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[0.0, 0.01, 0.02, 0.04])
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    rows = [run(s, args.episodes, args.seed, args.skill) for s in args.sigmas]
    for r in rows:
        print(f"sigma {r['sigma']:.3f} m: real success {r['real_success']:.2f}, judged {r['judged_success']:.2f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps({"env": ENV_ID, "skill": args.skill,
                                                                  "episodes": args.episodes, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
