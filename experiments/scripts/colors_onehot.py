"""#32's diagnosis, next step: can a pixel policy find the named cube when it is told the task as
one-hots instead of words? PushColors with `environment_state` cut to its instruction one-hots
(cube (3), goal (2)): no positions, so everything about where things are comes from pixels.

    python experiments/scripts/colors_onehot.py --src data/colors_train.hdf5 --dst data/colors_onehot.hdf5
    wmsuite train-policy --data data/colors_onehot.hdf5 --policy.use-env-state ...      # the MLP backbone
    wmsuite eval-policy --env experiments.scripts.colors_onehot:diag/PushColorsOneHot-v0 ...

Importing this module registers `diag/PushColorsOneHot-v0` (PushColors behind an observation wrapper
that keeps only the one-hots), which Gymnasium's `module:Ns/Name-v0` form finds. The same cut rewrites
a recorded file's `obs/` and `next_obs/environment_state` (the copy; the source is left as it is).
"""

from __future__ import annotations

import argparse
import shutil

import gymnasium as gym
import numpy as np

ENV_ID = "diag/PushColorsOneHot-v0"


def _named() -> slice:
    from wmsuite.envs.push_colors import NAMED

    return NAMED


class OneHotsOnly(gym.ObservationWrapper):
    """environment_state (21,) -> its instruction one-hots (5,)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.named = named = _named()
        space = env.observation_space["environment_state"]
        spaces = dict(env.observation_space.spaces)
        spaces["environment_state"] = gym.spaces.Box(space.low[named], space.high[named], dtype=space.dtype)
        self.observation_space = gym.spaces.Dict(spaces)

    def observation(self, obs: dict) -> dict:
        return {**obs, "environment_state": obs["environment_state"][self.named].copy()}


def make(**kwargs) -> gym.Env:
    from wmsuite.envs.push_colors import PushColorsEnv

    return OneHotsOnly(PushColorsEnv(**kwargs))


def rewrite(src: str, dst: str) -> int:
    """Copy `src` to `dst` with every episode's environment_state cut to the one-hots; -> episodes."""
    import h5py

    shutil.copyfile(src, dst)
    named = _named()
    with h5py.File(dst, "r+") as f:
        for demo in f["data"].values():
            for group in ("obs", "next_obs"):
                full = np.asarray(demo[f"{group}/environment_state"])  # (T, 21)
                del demo[f"{group}/environment_state"]
                demo[f"{group}/environment_state"] = full[:, named]
        return len(f["data"])


if ENV_ID not in gym.registry:
    from wmsuite.envs.push_colors import MAX_EPISODE_STEPS

    gym.register(ENV_ID, entry_point=make, max_episode_steps=MAX_EPISODE_STEPS)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="data/colors_train.hdf5")
    ap.add_argument("--dst", default="data/colors_onehot.hdf5")
    args = ap.parse_args()
    print(f"wrote {rewrite(args.src, args.dst)} episodes to {args.dst}")
