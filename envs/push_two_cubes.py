"""`wmsuite/PushTwoCubes-v0`: push a red and a green cube, each into the goal disk of its colour.

A long-horizon PushCube: the same table, walls, pusher, physics, action and camera
(assets/scenes/push_two_cubes.xml), with two 5 cm cubes (red, green) and two visual-only goal disks
of radius 5 cm (pale red, pale green). Success needs both pushes, one after the other, with the
first cube left where it was put while the second is pushed: several times as many chunks as
PushCube, which is what a world model's long-horizon stability is measured on.

Layout from the seed: each cube's centre uniform in [-0.15, 0.15]^2 with a random yaw, the cubes 10
cm or more apart; each goal uniform in [-0.17, 0.17]^2 (farther from the walls than PushCube's: a
cube pushed against a wall cannot be pushed off it again), 12 cm or more from both cubes and from
the other goal; the pusher uniform in [-0.22, 0.22]^2, 8 cm or more from both cubes.

Action (2,) float32 in [-1, 1]: as PushCube's, (dx, dy) moves the pusher's servo target by 4 cm times
the action.

Observation:
    pixels["top"]      (S, S, 3) uint8, S = image_size (64 by default)
    agent_pos          (2,) float32   pusher (x, y) in metres
    environment_state  (12,) float32  red cube (x, y, cos 4*yaw, sin 4*yaw), green cube (the same),
                                      red goal (x, y), green goal (x, y)

Success: each cube's centre lies inside the goal disk of its colour. The reward is 1.0 on a
successful step and 0.0 otherwise; the episode terminates on success unless
`terminate_on_success=False`. Time limit: 200 steps (20 s).
"""

from __future__ import annotations

import numpy as np

from wmsuite.envs.base import detect_blob_xy, green_mask, red_mask, sample_away
from wmsuite.envs.push_cube import CUBE_HALF, GOAL_RADIUS, PusherEnv

MAX_EPISODE_STEPS = 200
CUBES = ("red", "green")
"""The cubes, in the order environment_state lists them (and their goals)."""


def is_success_from_env_state(env_state: np.ndarray) -> np.ndarray:
    """(..., 12) environment_state -> (...) bool: is each cube's centre inside the goal of its colour?"""
    env_state = np.asarray(env_state)
    if env_state.shape[-1:] != (12,):
        raise ValueError(f"PushTwoCubes environment_state has 12 entries, got shape {env_state.shape}")
    red = np.linalg.norm(env_state[..., 0:2] - env_state[..., 8:10], axis=-1) < GOAL_RADIUS
    green = np.linalg.norm(env_state[..., 4:6] - env_state[..., 10:12], axis=-1) < GOAL_RADIUS
    return red & green


def detect_red_cube_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """World (x, y) of the red cube from "top" camera frames by red-blob detection, NaN where not seen
    (as PushCube's detector: the pale red goal is not red enough to count). (H, W, 3) or (N, H, W, 3)
    uint8 -> (2,) or (N, 2)."""
    if camera != "top":
        raise ValueError(f"PushTwoCubes' cube detector works on the 'top' camera, got {camera!r}")
    return detect_blob_xy(frames, "push_two_cubes.xml", "top", 1.4 * CUBE_HALF, red_mask)


def detect_green_cube_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """World (x, y) of the green cube from "top" camera frames by green-blob detection, NaN where not
    seen (the pale green goal is not green enough to count). (N, H, W, 3) uint8 -> (N, 1, 2): the
    probe's other objects (envs/probes.py)."""
    if camera != "top":
        raise ValueError(f"PushTwoCubes' cube detector works on the 'top' camera, got {camera!r}")
    xy = detect_blob_xy(frames, "push_two_cubes.xml", "top", 1.4 * CUBE_HALF, green_mask)
    return xy[..., None, :]


class PushTwoCubesEnv(PusherEnv):
    """See the module docstring. kwargs: image_size, cameras, render_mode, render_size, terminate_on_success."""

    SCENE = "push_two_cubes.xml"
    TASK = "push the red cube into the red goal and the green cube into the green goal"
    ENV_STATE_BOUNDS = ([-0.35, -0.35, -1, -1] * 2 + [-0.35] * 4, [0.35, 0.35, 1, 1] * 2 + [0.35] * 4)
    is_success_from_env_state = staticmethod(is_success_from_env_state)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._init_pusher()
        self._cubes = [self._joint_qpos(f"cube_{c}") for c in CUBES]  # 3 position + 4 quaternion each
        self._cube = self._cubes[0]  # the object `nudge_cube` (the start perturbation) moves: the red cube
        self._goals = [int(self.model.body(f"goal_{c}").mocapid[0]) for c in CUBES]

    def _randomize(self, rng: np.random.Generator) -> None:
        red = rng.uniform(-0.15, 0.15, size=2)
        green = sample_away(rng, 0.15, red, 0.10)
        goals: list[np.ndarray] = []
        while len(goals) < 2:
            goal = rng.uniform(-0.17, 0.17, size=2)
            if min(np.linalg.norm(goal - p) for p in (red, green, *goals)) >= 0.12:
                goals.append(goal)
        while True:
            pusher = rng.uniform(-0.22, 0.22, size=2)
            if min(np.linalg.norm(pusher - red), np.linalg.norm(pusher - green)) >= 0.08:
                break
        qpos = self.data.qpos
        qpos[self._pusher : self._pusher + 2] = pusher
        for index, xy in zip(self._cubes, (red, green)):
            yaw = rng.uniform(-np.pi, np.pi)
            qpos[index : index + 7] = [*xy, CUBE_HALF, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.ctrl[:] = pusher  # servos hold the pusher where it starts
        for mocap, goal in zip(self._goals, goals):
            self.data.mocap_pos[mocap] = [*goal, 0.0]

    def _env_state(self) -> np.ndarray:
        return np.array(self._cubes_and_goals())
