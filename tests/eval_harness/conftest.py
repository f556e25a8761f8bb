"""Real PushCube episodes from the expert at skill 1 (the cube is pushed in most chunks), recorded once
for the evaluation tests that need real frames, simulator states and outcomes."""

from __future__ import annotations

import gymnasium as gym
import pytest

from wmsuite.rollout import RolloutConfig, rollout


@pytest.fixture(scope="package")
def pushed_episodes():
    from wmsuite.envs import make_env
    from wmsuite.envs.experts import make_expert

    env = gym.vector.SyncVectorEnv([lambda: make_env("wmsuite/PushCube-v0")],
                                   autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    return list(rollout(make_expert("wmsuite/PushCube-v0", skill=1.0, seed=0), env,
                        RolloutConfig(episodes=4, seed=0, progress=False)))
