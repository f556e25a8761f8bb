"""How far a policy moves the cube in the real PushCube env and in a world model, episode by episode.

    python experiments/scripts/cube_travel.py --wm assets/wm/pushcube --episodes 16

Runs the policy from seeds 0..N-1 in both simulators under `wmsuite eval`'s protocol (the policy is
queried every world-model chunk) and prints, per episode, the outcome in each and the path length of
the cube and of the pusher: the real ones from the simulator's state every chunk, the imagined cube
from the task's red-blob detector on every generated frame that ends a chunk, the imagined pusher from
the agent_pos head. The figures in experiments/world_models_journal.md ("Why the offset policy is imagined to
succeed") come from this script with its defaults; it runs torch on one thread, as they were
measured (another thread count may change the sampled frames in the last digits).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from wmsuite.cli.eval import EvalConfig
from wmsuite.cli.eval_setup import load_model, make_env_factory, make_policy_factory
from wmsuite.envs.push_cube import detect_cube_xy
from wmsuite.rollout import RolloutConfig, rollout

OFFSET_POLICY = ('wmsuite.policies.wrappers:ActionOffset{"inner": "assets:policies/flow-state-noisy-s4000", '
                 '"offset": [0.5, 0.0]}')


def path_length(xy: np.ndarray) -> float:
    """(T, 2) positions -> summed length of the steps between them, skipping undetected (NaN) rows."""
    xy = xy[~np.isnan(xy).any(axis=1)]
    return float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wm", default="assets/wm/pushcube", help="world-model checkpoint directory")
    parser.add_argument("--policy", default=OFFSET_POLICY, help="policy spec (default: the zoo's offset0.5 policy)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes, from seeds 0..N-1")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # the environments and the policy exactly as `wmsuite eval` builds them, one batch of N episodes
    cfg = EvalConfig(wm=args.wm, num_envs=args.episodes, episodes=args.episodes)
    model = load_model(cfg)
    chunk = model.cfg.chunk
    make_env, make_policy = make_env_factory(cfg, model), make_policy_factory(cfg, chunk)
    episodes = {}
    for sim in ("real", "wm"):
        env = make_env(sim)
        torch.manual_seed(0)
        np.random.seed(0)  # noqa: NPY002  (policies may draw from the legacy global RNG)
        run = RolloutConfig(episodes=args.episodes, seed=0, progress=False, act_every=chunk)
        episodes[sim] = sorted(rollout(make_policy(args.policy, 0), env, run), key=lambda e: e.meta["episode_index"])
        env.close()
    rows = []
    for real, imagined in zip(episodes["real"], episodes["wm"]):
        camera = sorted(imagined.obs)[0]
        row = (real.success, imagined.success, path_length(real.env_state[::chunk, :2]),
               path_length(detect_cube_xy(imagined.obs[camera][::chunk])),
               path_length(real.state[::chunk]), path_length(imagined.state[::chunk]))
        rows.append(row)
        print(f"episode {real.meta['episode_index']:2d}  success real {int(row[0])} imagined {int(row[1])}  "
              f"cube path real {row[2]:.3f} m imagined {row[3]:.3f} m  pusher path real {row[4]:.3f} m imagined {row[5]:.3f} m")
    mean = np.mean(np.asarray(rows, float), axis=0)
    print(f"mean over {len(rows)} episodes: success real {mean[0]:.2f} imagined {mean[1]:.2f}; cube path real "
          f"{mean[2]:.3f} m imagined {mean[3]:.3f} m; pusher path real {mean[4]:.3f} m imagined {mean[5]:.3f} m")


if __name__ == "__main__":
    main()
