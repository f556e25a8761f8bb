"""The core data contract: one `Episode` of robot interaction, as numpy arrays.

Observations follow the LeRobot convention that every environment returns:

    {"pixels": {camera: (H, W, 3) uint8}, "agent_pos": (D,) float32, "environment_state": (E,) float32}

`agent_pos` is proprioception (what a real robot knows about itself); `environment_state` is
privileged low-dimensional scene state (object and goal positions) that scripted experts use and
that world models learn to predict. An `Episode` stacks them over time, plus the actions between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Episode:
    """One episode of T steps (T actions, T+1 observations).

    Shapes:
        obs[camera]      uint8   (T+1, H, W, 3)
        state            float32 (T+1, D)   proprioception (`agent_pos`)
        env_state        float32 (T+1, E)   privileged scene state (`environment_state`), E may be 0
        actions          float32 (T, A)
        rewards          float32 (T,)
        intervention     bool    (T,)       True where a human/other controller overrode the policy
        sim_states       float64 (T+1, S)   simulator state for exact replay, S may be 0
    """

    obs: dict[str, np.ndarray]
    state: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    success: bool
    terminated: bool = False
    truncated: bool = False
    env_state: np.ndarray | None = None
    intervention: np.ndarray | None = None
    sim_states: np.ndarray | None = None
    task: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        actions = np.asarray(self.actions)
        if actions.ndim != 2:
            raise ValueError(f"actions must be (T, A), got shape {actions.shape}")
        t = actions.shape[0]
        self.actions = _check(actions, np.float32, (t,), "actions", ndim=2)
        self.state = _check(self.state, np.float32, (t + 1,), "state", ndim=2)
        self.rewards = _check(self.rewards, np.float32, (t,), "rewards", ndim=1)
        if self.env_state is None:
            self.env_state = np.zeros((t + 1, 0), np.float32)
        self.env_state = _check(self.env_state, np.float32, (t + 1,), "env_state", ndim=2)
        if self.intervention is None:
            self.intervention = np.zeros(t, bool)
        self.intervention = _check(self.intervention, bool, (t,), "intervention", ndim=1)
        if self.sim_states is None:
            self.sim_states = np.zeros((t + 1, 0), np.float64)
        self.sim_states = _check(self.sim_states, np.float64, (t + 1,), "sim_states", ndim=2)
        for cam, frames in self.obs.items():
            frames = np.asarray(frames)
            if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[0] != t + 1 or frames.shape[-1] != 3:
                raise ValueError(
                    f"obs[{cam!r}] must be uint8 (T+1={t + 1}, H, W, 3), got {frames.dtype} {frames.shape}"
                )
            self.obs[cam] = frames
        if not isinstance(self.task, str):
            raise ValueError(f"task must be a string, got {type(self.task).__name__}")
        if not isinstance(self.meta, dict):
            raise ValueError(f"meta must be a dict, got {type(self.meta).__name__}")
        self.success = bool(self.success)
        self.terminated = bool(self.terminated)
        self.truncated = bool(self.truncated)

    @property
    def length(self) -> int:
        """Number of actions T."""
        return int(self.actions.shape[0])

    @property
    def cameras(self) -> list[str]:
        return sorted(self.obs)

    @property
    def success_from(self) -> int | None:
        """Index of the first observation (of T+1) that shows the task done, or None if none does: the
        last one of a successful episode, earlier for one recorded past its success (`wmsuite collect
        --after-success`, which stores the index as meta["success_step"])."""
        if "success_step" in self.meta:
            return int(self.meta["success_step"])
        return self.length if self.success else None

    def observation(self, t: int) -> dict[str, Any]:
        """The observation at time t in the environment convention (unbatched)."""
        return {
            "pixels": {cam: frames[t] for cam, frames in self.obs.items()},
            "agent_pos": self.state[t],
            "environment_state": self.env_state[t],
        }


def validate_finite(ep: Episode) -> str | None:
    """Why `ep` is not finite any more (its arrays were changed after it was made), or None.

    `Episode` refuses NaN and inf when it is built; arrays stay mutable, so writers check again.
    """
    for name in ("state", "env_state", "actions", "rewards", "sim_states"):
        step = first_non_finite(getattr(ep, name))
        if step is not None:
            return f"{name} contains NaN or inf at step {step}"
    return None


def first_non_finite(arr: np.ndarray) -> int | None:
    """Index along the first axis of the first row holding NaN or inf, or None when all are finite."""
    bad = ~np.isfinite(arr)
    if not bad.any():
        return None
    return int(np.argmax(bad.reshape(len(arr), -1).any(axis=1))) if arr.ndim else 0


def _check(x: Any, dtype: Any, lead: tuple[int, ...], name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != ndim or arr.shape[: len(lead)] != lead:
        want = ", ".join(str(d) for d in lead) + (", ..." if ndim > len(lead) else "")
        raise ValueError(f"{name} must have shape ({want}), got {arr.shape}")
    if arr.dtype.kind not in "biuf":  # strings, objects, complex numbers: no silent cast to float
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if dtype is bool:
        return arr.astype(bool)
    step = first_non_finite(arr)
    if step is not None:
        raise ValueError(f"{name} contains NaN or inf at step {step}")
    with np.errstate(over="ignore"):
        out = arr.astype(dtype, copy=False)
    step = first_non_finite(out)  # a float64 beyond float32's range has become inf
    if step is not None:
        raise ValueError(f"{name} holds a value beyond {np.dtype(dtype).name}'s range at step {step}")
    return out
