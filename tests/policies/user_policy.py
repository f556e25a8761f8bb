"""A policy as a user would write it, outside wmsuite, named on the command line as
`tests.policies.user_policy:GoToOrigin{"horizon": 4}`: it only has reset() and predict_action_chunk()."""

from __future__ import annotations

import numpy as np


class GoToOrigin:
    """Moves agent_pos towards the origin: every action of the chunk is -gain * agent_pos, clipped."""

    def __init__(self, horizon: int = 4, gain: float = 5.0) -> None:
        self.horizon, self.gain = horizon, gain

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs):
        pos = np.asarray(obs["agent_pos"], np.float32)[:, :2]  # (B, 2)
        act = np.clip(-self.gain * pos, -1.0, 1.0)
        return np.repeat(act[:, None], self.horizon, axis=1)  # (B, H, 2)
