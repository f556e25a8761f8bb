"""Where a learned simulator's episodes start: context sources, callables `seed -> observation`
(one real observation in the env convention, or a list of them, oldest first) that
`WorldModelEnv.reset` encodes as the first context. A source may also hold `task`, the instruction
of the episode it last served, which a model trained with instructions reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from wmsuite.types import Episode

Observation = dict[str, Any]
ContextSource = Callable[[int], "Observation | Sequence[Observation]"]


class GymResetContext:
    """seed -> the first observation of a real env reset with that seed; `task` holds that reset's
    instruction (info["task"], '' where the env gives none), which a model with instructions reads."""

    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        self.env, self.task = make_env(), ""

    def __call__(self, seed: int) -> Observation:
        obs, info = self.env.reset(seed=int(seed))
        self.task = str(info.get("task", ""))
        return obs

    def close(self) -> None:
        self.env.close()


class EpisodeContext:
    """seed -> the first `frames` observations of recorded episode `seed % len(episodes)`; `task` holds
    that episode's instruction."""

    def __init__(self, episodes: Sequence[Episode], frames: int = 1) -> None:
        if not episodes:
            raise ValueError("EpisodeContext needs at least one episode")
        if frames < 1:
            raise ValueError(f"frames must be >= 1, got {frames}")
        self.episodes, self.frames, self.task = list(episodes), frames, ""

    def __call__(self, seed: int) -> list[Observation]:
        ep = self.episodes[int(seed) % len(self.episodes)]
        self.task = ep.task
        return [ep.observation(t) for t in range(min(self.frames, ep.length + 1))]
