"""Copies of recorded PushCube episodes with the goal disk moved: the same motion, another goal.

    python experiments/scripts/relabel_goals.py --data data/pushcube_wm2.hdf5 --out data/pushcube_wm_goals.hdf5 \
        --copies 2 --keep-original

Every copy of an episode gets its own goal, drawn as the env draws one (uniform in [-0.2, 0.2]^2, 12 cm
or more from the cube's first position), and is re-rendered from the episode's simulator states by
`wmsuite.envs.push_cube.relabel_goal` (which also recomputes environment_state, rewards and the
outcome). The experts push every cube towards its goal; in the copies the goal says nothing about where
the cube goes, so a world model trained on them has to read the push from the contact. The output is
written in one atomic step and an existing file is never replaced.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
from _episode_files import parse_args  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from wmsuite.data import load_episodes  # noqa: E402
from wmsuite.data.hdf5 import write_episodes  # noqa: E402
from wmsuite.envs.push_cube import PushCubeEnv, random_goal, relabel_goal  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, "relabelled copies of every episode", 1, [
        ("--keep-original", {"action": "store_true", "help": "write the original episodes first"}),
        ("--seed", {"type": int, "default": 0, "help": "seed of the goal draws"})])
    episodes = load_episodes(args.data)
    env, rng = PushCubeEnv(), np.random.default_rng(args.seed)
    out = list(episodes) if args.keep_original else []
    for ep in tqdm(episodes, desc="relabel", unit="episode"):
        out.extend(relabel_goal(env, ep, random_goal(rng, ep.env_state[0, :2])) for _ in range(args.copies))
    env.close()
    write_episodes(args.out, out)
    moved = out[len(episodes) if args.keep_original else 0 :]
    print(f"wrote {args.out}: {len(out)} episodes ({len(moved)} relabelled, of which "
          f"{sum(ep.success for ep in moved)} reach their new goal)")


if __name__ == "__main__":
    main()
