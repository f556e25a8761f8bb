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

import gymnasium as gym
import numpy as np

import wmsuite.envs  # noqa: F401  (registers the id)
from wmsuite.cli.common import memory_geometry
from wmsuite.envs.base import red_mask
from wmsuite.envs.experts import make_expert
from wmsuite.envs.probes import get_probe
from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

ENV_ID = "wmsuite/PushCubeEgo-v0"
IN_VIEW, OUT_OF_VIEW = 0.12, 0.20  # m, the cube's centre from the view's centre (largest axis)


def real_episode(seed: int, skill: float, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The expert in the real env -> actions (T, 2), ego frames (T+1, S, S, 3), cube less pusher (T+1, 2)."""
    env = gym.make(ENV_ID, cameras=("ego",))
    obs, _ = env.reset(seed=seed)
    expert = make_expert(ENV_ID, skill=skill, seed=seed, horizon=h)
    expert.reset()
    actions, frames, rel, done = [], [obs["pixels"]["ego"]], [obs["environment_state"][:2] - obs["agent_pos"][:2]], False
    while not done:
        actions.append(expert.select_action({k: v[None] for k, v in obs.items() if k != "pixels"})[0])
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        frames.append(obs["pixels"]["ego"])
        rel.append(obs["environment_state"][:2] - obs["agent_pos"][:2])
        done = terminated or truncated
    env.close()
    return np.asarray(actions, np.float32), np.asarray(frames), np.asarray(rel)


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
    model, probe = load_world_model(args.wm), get_probe(ENV_ID)
    h = model.cfg.chunk
    env = make_world_model_env(model, ENV_ID, 1, seed=0, judge="tracked", success_fn=probe.success_from_env_state,
                               tracking=ObjectTracking.from_probe(probe), static_state=probe.static_state,
                               memory_geometry=memory_geometry(ENV_ID, model.cfg.camera) if model.cfg.memory_frames
                               else None, agent_advance=probe.moving_camera_advance)
    env.terminate_on_success = False  # the replay runs the whole real episode
    drawn = {"real": [], "generated": []}  # per compared frame: draws a cube
    where = []  # per compared frame: 1 clearly in view, 0 clearly out, -1 neither
    for ep in range(args.episodes):
        actions, frames, rel = real_episode(args.seed + ep, args.skill, h)
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
