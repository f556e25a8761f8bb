"""A user's own task, registered the way Gymnasium's `module:Ns/Name-v0` form expects: importing this
module registers `user/RoundedPushCube-v0`, PushCube behind an observation wrapper of the user's that
rounds agent_pos to millimetres, and `user/SmallPushCube-v0`, which takes no keywords and renders
32-px frames. `Drift` is the user's policy: a constant push along +x."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

ENV_ID = "user/RoundedPushCube-v0"
SMALL_ID = "user/SmallPushCube-v0"


class RoundedAgentPos(gym.ObservationWrapper):
    def observation(self, obs: dict) -> dict:
        return {**obs, "agent_pos": np.round(obs["agent_pos"], 3).astype(obs["agent_pos"].dtype)}


def make(**kwargs) -> gym.Env:
    from wmsuite.envs.push_cube import PushCubeEnv

    return RoundedAgentPos(PushCubeEnv(**kwargs))


def make_small() -> gym.Env:
    from wmsuite.envs.push_cube import PushCubeEnv

    return PushCubeEnv(image_size=32)


class Drift:
    """Chunks of `horizon` actions (0.5, 0): the agent drifts right whatever it sees."""

    def __init__(self, horizon: int = 4) -> None:
        self.horizon = horizon

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs: dict) -> np.ndarray:
        chunk = np.zeros((len(obs["agent_pos"]), self.horizon, 2), np.float32)  # (B, T, A)
        chunk[..., 0] = 0.5
        return chunk


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=make, max_episode_steps=80)
    gym.register(SMALL_ID, entry_point=make_small, max_episode_steps=80)
