"""Interventions: an expert that takes over from the policy where the policy drifts, then hands back.

    from wmsuite.rollout import Intervention, rollout
    guard = Intervention(make_expert("wmsuite/PushCube-v0", horizon=4), threshold=0.5, steps=8)
    for ep in rollout(policy, env, cfg, intervene=guard):
        ep.intervention  # (T,) bool: True on the actions the expert executed

The expert is asked for a chunk wherever the policy is (same observation, same length), as a human
supervisor watching a robot would judge it (HG-DAgger). The policy is *drifting* in a sub-env when its
chunk differs from the expert's by more than `threshold` (mean absolute difference per action
entry, actions in [-1, 1]); the expert then executes its own chunk and keeps control for `steps`
actions, rounded up to whole chunks, after which the policy plans again from where the expert left it. An episode so recorded carries both: the policy's own actions (False in its
intervention mask) and the expert's corrections (True), which is what intervention-aware credit
assignment needs (policies/weighting.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from wmsuite.policy import query_chunk, takes_env_indices


class Intervention:
    """See the module docstring. expert: a Policy (with per-env memory or without); threshold: the
    mean absolute action difference above which the policy is drifting; steps: actions the expert
    keeps control for once it has taken over."""

    def __init__(self, expert: Any, threshold: float = 0.5, steps: int = 8) -> None:
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {threshold!r}")
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.expert, self.threshold, self.steps = expert, float(threshold), int(steps)
        self._stateful = hasattr(expert, "reset_envs")
        if self._stateful and not takes_env_indices(expert):
            raise ValueError("an intervening expert with per-env memory must take env_indices= in "
                             "predict_action_chunk (the scripted experts do)")
        self._left = np.zeros(0, int)  # per sub-env: actions the expert still controls

    def reset(self, num_envs: int) -> None:
        """A new rollout over `num_envs` sub-envs: no expert in control anywhere."""
        self.expert.reset()
        self._left = np.zeros(num_envs, int)

    def reset_envs(self, rows: Sequence[int], episodes: Iterable[int] | None = None) -> None:
        """Sub-envs `rows` start new episodes: the policy is in control again, the expert's memory of
        them is dropped (episode indices passed on where its `reset_envs` takes them)."""
        rows = [int(i) for i in rows]
        self._left[rows] = 0
        if self._stateful:
            if episodes is not None and "episodes" in inspect.signature(self.expert.reset_envs).parameters:
                self.expert.reset_envs(rows, episodes=list(episodes))
            else:
                self.expert.reset_envs(rows)

    def __call__(self, obs: dict[str, Any], rows: np.ndarray, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """obs: the observations of sub-envs `rows` (R,), chunk: the policy's (R, H, A) for them ->
        (the chunks to execute (R, H, A), whether the expert's (R,) bool)."""
        kwargs = {"env_indices": rows.tolist()} if self._stateful else {}
        expert = query_chunk(self.expert, obs, len(rows), chunk.shape[1], chunk.shape[-1], **kwargs)  # (R, H, A)
        drifting = np.abs(chunk - expert).mean(axis=(1, 2)) > self.threshold  # (R,)
        takes = (self._left[rows] > 0) | drifting
        start = drifting & (self._left[rows] <= 0)
        self._left[rows[start]] = self.steps
        self._left[rows[takes]] -= chunk.shape[1]
        return np.where(takes[:, None, None], expert, chunk), takes
