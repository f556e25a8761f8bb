"""Does the learned simulator's tracked judge find the push a real PushCubeEgo episode makes? (#33)

Runs the scripted expert in the real simulator (env seeds from --seed, the zoo's validation seeds by
default), replays each episode's actions in the world model's learned simulator (the pusher
dead-reckoned, the judge `tracked` with the probe's settings and --reacquire), and prints the real
success rate beside the judged one and their per-episode agreement, per skill; --trace prints, for
the first episode, every chunk's true and believed cube and the heads' reading of the cube relative to
the pusher on the generated frame. Writes the rates to --out DIR/metrics.json.

    python experiments/scripts/ego_replay_judge.py --wm runs/wm-ego0-long-export --skills 1 0.2 --reacquire 0 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch

import wmsuite.envs  # noqa: F401  (registers the id)
from wmsuite.cli.common import memory_geometry
from wmsuite.envs.experts import make_expert
from wmsuite.envs.probes import get_probe
from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

ENV_ID = "wmsuite/PushCubeEgo-v0"


class Real(NamedTuple):
    """One real episode of the expert."""

    actions: np.ndarray  # (T, 2)
    cubes: np.ndarray  # (T+1, 2) the cube's (x, y)
    agents: np.ndarray  # (T+1, 2) the pusher's (x, y)
    success: bool
    frames: np.ndarray | None  # (T+1, S, S, 3) uint8 of `camera`, None without one


def real_episodes(seeds: range, skill: float, horizon: int, camera: str | None = None) -> list[Real]:
    """The expert in the real env, one episode per seed (run once per skill, replayed at every k); with
    `camera`, its frames too."""
    env, out = gym.make(ENV_ID, cameras=(camera,) if camera else ()), []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        expert = make_expert(ENV_ID, skill=skill, seed=seed, horizon=horizon)
        expert.reset()
        steps, actions, done, info = [obs], [], False, {}
        while not done:
            actions.append(expert.select_action({k: v[None] for k, v in obs.items() if k != "pixels"})[0])
            obs, _, terminated, truncated, info = env.step(actions[-1])
            steps.append(obs)
            done = terminated or truncated
        out.append(Real(np.asarray(actions, np.float32), np.asarray([o["environment_state"][:2] for o in steps]),
                        np.asarray([o["agent_pos"][:2] for o in steps]), bool(info["is_success"]),
                        np.asarray([o["pixels"][camera] for o in steps]) if camera else None))
    env.close()
    return out


def learned_simulator(model, num_envs: int, probe=None):
    """The world model's learned simulator of PushCubeEgo as `wmsuite eval` builds it for a model of the
    ego camera: judge tracked with `probe`'s settings (default the task's), the pusher dead-reckoned, the
    memory on where the model has one."""
    probe = probe or get_probe(ENV_ID)
    return make_world_model_env(model, ENV_ID, num_envs, seed=0, judge="tracked",
                                success_fn=probe.success_from_env_state, tracking=ObjectTracking.from_probe(probe),
                                static_state=probe.static_state, agent_advance=probe.moving_camera_advance,
                                memory_geometry=memory_geometry(ENV_ID, model.cfg.camera)
                                if model.cfg.memory_frames else None)


def replay(args: argparse.Namespace, reacquire: int, skill: float, model, episodes: list[Real]) -> dict[str, float]:
    env = learned_simulator(model, 1, dataclasses.replace(get_probe(ENV_ID), reacquire=reacquire))
    h, real, judged = model.cfg.chunk, [], []
    for ep, (actions, cubes, _, success, _) in enumerate(episodes):
        actions = np.concatenate([actions, np.zeros((-len(actions) % h, 2), np.float32)])  # whole chunks
        env.reset(seed=[args.seed + ep])
        hit = False
        for c in range(0, len(actions), h):
            obs, _, terminated, _, _ = env.step(actions[None, c : c + h])
            if args.trace and ep == 0:
                with torch.no_grad():
                    read = model.predict_heads(env.state.context[:, -1:])  # the newest generated frame
                rel = read["environment_state"][0, 0, :2].numpy() - read["agent_pos"][0, 0, :2].numpy()
                t = min(c + h, len(cubes) - 1)
                print(f"  step {t:3d}: cube {cubes[t].round(3)} believed {obs['environment_state'][0, :2].round(3)} "
                      f"pusher {obs['agent_pos'][0].round(3)} read relative {rel.round(3)}")
            if terminated[0]:
                hit = True
                break
        real.append(success)
        judged.append(hit)
    env.close()
    r, j = np.asarray(real), np.asarray(judged)
    return {"reacquire": reacquire, "skill": skill, "real_success": float(r.mean()),
            "judged_success": float(j.mean()), "agreement": float((r == j).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm", default="assets/wm/pushcubeego-nomem")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=100_000)
    parser.add_argument("--skills", type=float, nargs="+", default=[1.0, 0.2])
    parser.add_argument("--reacquire", type=int, nargs="+", default=[0, 1, 4])
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    model = load_world_model(args.wm)
    seeds = range(args.seed, args.seed + args.episodes)
    real = {skill: real_episodes(seeds, skill, model.cfg.chunk) for skill in args.skills}
    rows = []
    for k in args.reacquire:
        for skill in args.skills:
            rows.append(replay(args, k, skill, model, real[skill]))
            r = rows[-1]
            print(f"reacquire {k} skill {skill}: real {r['real_success']:.2f} judged {r['judged_success']:.2f} "
                  f"agreement {r['agreement']:.2f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps({"wm": args.wm, "episodes": args.episodes,
                                                                  "seed": args.seed, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
