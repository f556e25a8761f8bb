"""Does the PushCubeEgo world model draw the cube where it is, and only there? (#33, session 33)

Runs the scripted expert in the real simulator (env seeds from --seed), replays each episode's
actions in the world model's learned simulator chunk by chunk (open loop from the real start, the
pusher dead-reckoned, the memory on), and compares the last frame of every chunk with the real frame
of the same step: a frame *draws* the cube where at least --red red pixels (the cube detector's mask)
show. Counted on frames whose cube is clearly in view (its centre within 12 cm of the view's centre on
both axes) or clearly out of it (more than 20 cm on one axis; the view reaches 17 cm): `invented` is
the share of clearly-out frames that draw a cube anyway, `lost` the share of clearly-in frames that
draw none, each for the generated frames and, as the check on the mask, the real ones. --grid PNG
writes the first episode's real frames (top row) over the generated ones. Writes --out DIR/metrics.json.

    python experiments/scripts/ego_replay_frames.py --wm assets/wm/pushcubeego --episodes 8 --grid runs/ego-grid.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from ego_replay_judge import learned_simulator, real_episodes  # this folder's script: the same episodes

from wmsuite.envs.base import red_mask
from wmsuite.world_models import load_world_model

IN_VIEW, OUT_OF_VIEW = 0.12, 0.20  # m, the cube's centre from the view's centre (largest axis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm", default="assets/wm/pushcubeego")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=100_000)
    parser.add_argument("--skill", type=float, default=1.0)
    parser.add_argument("--red", type=int, default=15)
    parser.add_argument("--grid", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    model = load_world_model(args.wm)
    h = model.cfg.chunk
    env = learned_simulator(model, 1)
    env.terminate_on_success = False  # the replay runs the whole real episode
    drawn = {"real": [], "generated": []}  # per compared frame: draws a cube
    where = []  # per compared frame: 1 clearly in view, 0 clearly out, -1 neither
    episodes = real_episodes(range(args.seed, args.seed + args.episodes), args.skill, h, model.cfg.camera)
    for ep, real in enumerate(episodes):
        actions, frames, rel = real.actions, real.frames, real.cubes - real.agents
        actions = np.concatenate([actions, np.zeros((-len(actions) % h, 2), np.float32)])
        env.reset(seed=[args.seed + ep])
        generated = []
        for c in range(0, len(actions), h):
            obs, *_ = env.step(actions[None, c : c + h])
            pixels = obs["pixels"][model.cfg.camera] if isinstance(obs["pixels"], dict) else obs["pixels"]
            t = c + h
            if t < len(frames):  # a real frame to compare with
                generated.append(pixels[0])
                for name, frame in (("real", frames[t]), ("generated", pixels[0])):
                    drawn[name].append(int(red_mask(frame.astype(int)).sum()) >= args.red)
                far = np.abs(rel[t]).max()
                where.append(1 if far < IN_VIEW else 0 if far > OUT_OF_VIEW else -1)
        if args.grid and ep == 0:
            from PIL import Image

            real_row = np.concatenate([frames[(i + 1) * h] for i in range(len(generated))], 1)
            grid = np.concatenate([real_row, np.concatenate(generated, 1)], 0)
            Path(args.grid).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2), Image.NEAREST).save(args.grid)
    env.close()
    w = np.asarray(where)
    out = {"wm": args.wm, "episodes": args.episodes, "seed": args.seed, "skill": args.skill,
           "frames_in_view": int((w == 1).sum()), "frames_out_of_view": int((w == 0).sum())}
    for name, d in drawn.items():
        d = np.asarray(d)
        out[f"{name}_invented"] = float(d[w == 0].mean()) if (w == 0).any() else float("nan")
        out[f"{name}_lost"] = float((~d[w == 1]).mean()) if (w == 1).any() else float("nan")
        print(f"{name:9s} frames: a cube drawn where none is in view {out[f'{name}_invented']:.2f} "
              f"({out['frames_out_of_view']} frames), none drawn where it is {out[f'{name}_lost']:.2f} "
              f"({out['frames_in_view']} frames)")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
