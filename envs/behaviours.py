"""Scripted PushCube non-experts for policy zoos: simple behaviours a user might bring, not the task.

    sitter = make_behaviour("goal_sitter", speed=0.6)
    # on the command line: wmsuite.envs.behaviours:make_behaviour{"kind": "orbit_cube", "radius": 0.07}

Kinds (all stateless: the action follows from the observation alone):
    goal_sitter  drives straight to the goal's centre at `speed` and stays there; the cube moves
                 only where it lies in the way
    chaser       drives straight at the cube's centre at `speed`: it pushes the cube along its line of
                 approach, wherever that points
    orbit_cube   circles the cube counter-clockwise at `radius` (metres, centre to centre), correcting
                 its distance as it goes; at radii near contact it brushes the cube
    orbit_goal   the same round the goal's centre

These are the zoo's "scripted non-expert" family. They are written independently of the play data
generators (envs/play.py), which cover similar behaviour classes for world-model training; a zoo
judges a learned simulator on them, so none of them is used to make training data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmsuite.envs.push_cube import ACTION_SCALE

KINDS = ("goal_sitter", "chaser", "orbit_cube", "orbit_goal")


class ScriptedBehaviour:
    """See the module docstring. Plans each chunk open-loop on the agent position its own actions imply."""

    def __init__(self, kind: str, speed: float = 0.6, radius: float = 0.08, horizon: int = 1) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if not 0.0 < speed <= 1.0 or radius <= 0.0 or horizon < 1:
            raise ValueError(f"need 0 < speed <= 1, radius > 0 and horizon >= 1, got {speed}, {radius}, {horizon}")
        self.kind, self.speed, self.radius, self.horizon = kind, float(speed), float(radius), int(horizon)

    def reset(self) -> None:
        """Nothing to forget: the behaviours are stateless."""

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        return self.predict_action_chunk(obs)[:, 0]

    def predict_action_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        """obs {"agent_pos": (B, 2), "environment_state": (B, 6)} -> (B, horizon, 2) float32 in [-1, 1]."""
        pos = np.asarray(obs["agent_pos"], np.float64).reshape(-1, 2).copy()  # (B, 2)
        state = np.asarray(obs["environment_state"], np.float64).reshape(len(pos), 6)  # (B, 6)
        cube, goal = state[:, 0:2], state[:, 4:6]
        out = np.empty((len(pos), self.horizon, 2), np.float32)
        for h in range(self.horizon):
            out[:, h] = self._action(pos, cube, goal)
            pos += ACTION_SCALE * out[:, h]
        return out

    def _action(self, pos: np.ndarray, cube: np.ndarray, goal: np.ndarray) -> np.ndarray:
        if self.kind in ("goal_sitter", "chaser"):
            target = goal if self.kind == "goal_sitter" else cube
            return _capped((target - pos) / ACTION_SCALE, self.speed)
        centre = cube if self.kind == "orbit_cube" else goal
        rel = pos - centre  # (B, 2)
        dist = np.maximum(np.linalg.norm(rel, axis=1, keepdims=True), 1e-6)
        radial, tangent = rel / dist, np.stack([-rel[:, 1], rel[:, 0]], 1) / dist
        velocity = self.speed * tangent + (self.radius - dist) / ACTION_SCALE * radial
        return _capped(velocity, 1.0)


def _capped(v: np.ndarray, speed: float) -> np.ndarray:
    """(B, 2) actions scaled down to at most `speed` in norm."""
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(norm > speed, v * speed / np.maximum(norm, 1e-9), v)


def make_behaviour(kind: str, speed: float = 0.6, radius: float = 0.08, horizon: int = 1) -> ScriptedBehaviour:
    """A scripted non-expert (a CLI policy spec: `wmsuite.envs.behaviours:make_behaviour{...}`)."""
    return ScriptedBehaviour(kind, speed=speed, radius=radius, horizon=horizon)
