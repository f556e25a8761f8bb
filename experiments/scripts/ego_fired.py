"""Where the PushCubeEgo learned simulator's imagined successes come from (#33, session 33).

Runs the scripted expert in the learned simulator (16 sub-envs, env seeds from --seed, the judge
`tracked` with the probe's settings, the pusher dead-reckoned) and records the believed cube chunk by
chunk. A pushed cube moves at most as far as the pusher (4 cm an action, 16 cm a chunk), so a belief
that jumps farther within one chunk was taken from a drawn cube, not pushed there. Prints, per skill,
how many episodes the judge ended as successes, how many of those followed such a jump, and the
chunks at which it fired; --trace prints each success's believed cube, goal and pusher and the red
pixels of the frame it fired on.

    python experiments/scripts/ego_fired.py --wm runs/wm-ego2-long2-export --skills 1 0.2
"""

from __future__ import annotations

import argparse

import numpy as np
from ego_replay_judge import ENV_ID, learned_simulator  # this folder's script: the same learned simulator

from wmsuite.envs.base import red_mask
from wmsuite.envs.experts import make_expert
from wmsuite.world_models import load_world_model

JUMP = 0.16  # m: the farthest the pusher, and so a pushed cube, moves in one 4-action chunk


def run(model, skill: float, n: int, seed: int, trace: bool) -> None:
    env = learned_simulator(model, n)
    h = model.cfg.chunk
    experts = [make_expert(ENV_ID, skill=skill, seed=seed + i, horizon=h) for i in range(n)]
    for e in experts:
        e.reset()
    obs, _ = env.reset(seed=list(range(seed, seed + n)))
    prev = obs["environment_state"][:, :2].copy()  # (n, 2) the believed cube
    done, jumped, fired, when = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool), np.full(n, -1)
    for t in range(-(-160 // h)):
        state = [{k: v[i : i + 1] for k, v in obs.items() if k != "pixels"} for i in range(n)]
        act = np.stack([np.stack([experts[i].select_action(state[i])[0] for _ in range(h)]) for i in range(n)])
        obs, _, term, trunc, _ = env.step(act)  # act (n, H, 2)
        cube = obs["environment_state"][:, :2]
        jumped |= ~done & (np.linalg.norm(cube - prev, axis=1) > JUMP)
        prev = cube.copy()
        new = term & ~done
        fired |= new
        when[new] = t
        if trace:
            pixels = obs["pixels"][model.cfg.camera] if isinstance(obs["pixels"], dict) else obs["pixels"]
            for i in np.flatnonzero(new):
                es = obs["environment_state"][i]
                print(f"  env {i} fired at chunk {t}: believed cube {es[:2].round(2)} goal {es[4:6].round(2)} pusher "
                      f"{obs['agent_pos'][i].round(2)}, red pixels in the frame {int(red_mask(pixels[i].astype(int)).sum())}")
        done |= term | trunc
        if done.all():
            break
    env.close()
    print(f"skill {skill}: fired {fired.sum()}/{n}, of which after a belief jump > {JUMP:.2f} m in one chunk "
          f"{(fired & jumped).sum()}; episodes with a jump {jumped.sum()}; chunks at firing {sorted(when[fired].tolist())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm", default="assets/wm/pushcubeego")
    parser.add_argument("--skills", type=float, nargs="+", default=[1.0, 0.2])
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=100_000)
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    model = load_world_model(args.wm)
    for skill in args.skills:
        run(model, skill, args.envs, args.seed, args.trace)


if __name__ == "__main__":
    main()
