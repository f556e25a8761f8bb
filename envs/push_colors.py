"""`wmsuite/PushColors-v0`: push the cube the instruction names into the goal it names.

Where language matters: one scene holds six tasks. Three 5 cm cubes (red, yellow, purple) and two goal
disks of radius 5 cm (pale green, white) on PushCube's table, with its walls, pusher, physics and
camera (assets/scenes/push_colors.xml). The instruction ("push the yellow cube into the white goal")
is drawn with the layout from the seed, or fixed: `instruction=` at construction (every episode) or
`options={"instruction": ...}` at reset (that episode). A policy that ignores it can succeed only
where the task it happens to do is the one asked for.

Layout from the seed: each cube's centre uniform in [-0.15, 0.15]^2 with a random yaw, the cubes 10
cm or more apart; each goal uniform in [-0.17, 0.17]^2, 12 cm or more from every cube and from the
other goal; the pusher uniform in [-0.22, 0.22]^2, 8 cm or more from every cube.

Action (2,) float32 in [-1, 1]: PushCube's.

Observation:
    pixels["top"]      (S, S, 3) uint8
    agent_pos          (2,) float32   pusher (x, y) in metres
    environment_state  (21,) float32  per cube in CUBES order (x, y, cos 4*yaw, sin 4*yaw) (12), per goal
                                      in GOALS order (x, y) (4), then the instruction: a one-hot of
                                      the named cube (3) and of the named goal (2)

Success: the named cube's centre inside the named goal disk (whatever the other cubes do). Reward 1.0
on a successful step; terminates on success unless `terminate_on_success=False`. Time limit: 100 steps.
`info["task"]` (and `env.task`) is the episode's instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmsuite.envs.base import detect_blob_xy, red_mask
from wmsuite.envs.push_cube import CUBE_HALF, GOAL_RADIUS, PusherEnv

MAX_EPISODE_STEPS = 100
CUBES = ("red", "yellow", "purple")
GOALS = ("green", "white")
INSTRUCTIONS = tuple(f"push the {c} cube into the {g} goal" for c in CUBES for g in GOALS)
"""Every task the scene holds, in (cube, goal) order."""
ENV_STATE_DIM = 4 * len(CUBES) + 2 * len(GOALS) + len(CUBES) + len(GOALS)
NAMED = slice(4 * len(CUBES) + 2 * len(GOALS), ENV_STATE_DIM)
"""environment_state's instruction one-hots."""


def parse_instruction(text: str) -> tuple[int, int]:
    """An instruction of INSTRUCTIONS -> (cube index, goal index); anything else is a ValueError."""
    if text not in INSTRUCTIONS:
        raise ValueError(f"PushColors does not know the instruction {text!r}; it knows: {', '.join(INSTRUCTIONS)}")
    i = INSTRUCTIONS.index(text)
    return i // len(GOALS), i % len(GOALS)


def is_success_from_env_state(env_state: np.ndarray) -> np.ndarray:
    """(..., 21) environment_state -> (...) bool: is the named cube's centre inside the named goal?"""
    env_state = np.asarray(env_state)
    if env_state.shape[-1:] != (ENV_STATE_DIM,):
        raise ValueError(f"PushColors environment_state has {ENV_STATE_DIM} entries, got shape {env_state.shape}")
    cube = np.argmax(env_state[..., NAMED][..., : len(CUBES)], axis=-1)  # (...)
    goal = np.argmax(env_state[..., NAMED][..., len(CUBES) :], axis=-1)
    cubes = env_state[..., : 4 * len(CUBES)].reshape(*env_state.shape[:-1], len(CUBES), 4)[..., :2]
    goals = env_state[..., 4 * len(CUBES) : 4 * len(CUBES) + 2 * len(GOALS)].reshape(*env_state.shape[:-1],
                                                                                     len(GOALS), 2)
    cube_xy = np.take_along_axis(cubes, cube[..., None, None], axis=-2)[..., 0, :]
    goal_xy = np.take_along_axis(goals, goal[..., None, None], axis=-2)[..., 0, :]
    return np.linalg.norm(cube_xy - goal_xy, axis=-1) < GOAL_RADIUS


def yellow_mask(pixels: np.ndarray) -> np.ndarray:
    """Pixels of the yellow cube: red and green high, blue low. (..., 3) int -> (...) bool."""
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return (r > 120) & (g > 100) & (b < 0.45 * g) & (np.abs(r - g) < 80)


def purple_mask(pixels: np.ndarray) -> np.ndarray:
    """Pixels of the purple cube: blue and red above green. (..., 3) int -> (...) bool."""
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return (b > 70) & (b > 1.6 * g) & (r > 1.6 * g)


def detect_red_cube_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """World (x, y) of the red cube from "top" frames, NaN where not seen: (N, S, S, 3) -> (N, 2)."""
    if camera != "top":
        raise ValueError(f"PushColors' cube detectors work on the 'top' camera, got {camera!r}")
    return detect_blob_xy(frames, "push_colors.xml", "top", 1.4 * CUBE_HALF, red_mask)


def detect_other_cubes_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """The yellow and purple cubes' (x, y) from "top" frames: (N, S, S, 3) -> (N, 2, 2), NaN where not seen."""
    if camera != "top":
        raise ValueError(f"PushColors' cube detectors work on the 'top' camera, got {camera!r}")
    return np.stack([detect_blob_xy(frames, "push_colors.xml", "top", 1.4 * CUBE_HALF, mask)
                     for mask in (yellow_mask, purple_mask)], axis=-2)


class PushColorsEnv(PusherEnv):
    """See the module docstring. `instruction`: fix every episode's instruction (one of INSTRUCTIONS);
    other kwargs: image_size, cameras, render_mode, render_size, terminate_on_success."""

    SCENE = "push_colors.xml"
    TASK = INSTRUCTIONS[0]
    ENV_STATE_BOUNDS = ([-0.35, -0.35, -1, -1] * 3 + [-0.35] * 4 + [0] * 5, [0.35, 0.35, 1, 1] * 3 + [0.35] * 4 + [1] * 5)
    is_success_from_env_state = staticmethod(is_success_from_env_state)

    def __init__(self, instruction: str | None = None, **kwargs: Any) -> None:
        if instruction is not None:
            parse_instruction(instruction)
        self.fixed_instruction = instruction
        self._asked: str | None = None  # the instruction the current reset's options name
        super().__init__(**kwargs)
        self._init_pusher()
        self._cubes = [self._joint_qpos(f"cube_{c}") for c in CUBES]  # 3 position + 4 quaternion each
        self._cube = self._cubes[0]  # the object `nudge_cube` (the start perturbation) moves: the red cube
        self._goals = [int(self.model.body(f"goal_{g}").mocapid[0]) for g in GOALS]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        asked = (options or {}).get("instruction")
        if asked is not None:
            parse_instruction(asked)  # before anything changes
        self._asked = asked
        return super().reset(seed=seed, options=options)

    def set_sim_state(self, state: np.ndarray) -> None:
        """As the base class's; the instruction comes back with the state (it lives in MuJoCo's userdata)."""
        super().set_sim_state(state)
        cube, goal = (int(v) for v in self.data.userdata[:2])
        self.task = INSTRUCTIONS[cube * len(GOALS) + goal]

    def _randomize(self, rng: np.random.Generator) -> None:
        cubes: list[np.ndarray] = [rng.uniform(-0.15, 0.15, size=2)]
        while len(cubes) < len(CUBES):
            xy = rng.uniform(-0.15, 0.15, size=2)
            if all(np.linalg.norm(xy - c) >= 0.10 for c in cubes):
                cubes.append(xy)
        goals: list[np.ndarray] = []
        while len(goals) < len(GOALS):
            goal = rng.uniform(-0.17, 0.17, size=2)
            if min(np.linalg.norm(goal - p) for p in (*cubes, *goals)) >= 0.12:
                goals.append(goal)
        while True:
            pusher = rng.uniform(-0.22, 0.22, size=2)
            if min(np.linalg.norm(pusher - c) for c in cubes) >= 0.08:
                break
        drawn = INSTRUCTIONS[int(rng.integers(len(INSTRUCTIONS)))]  # drawn always, so layouts follow the seed alone
        self.task = self._asked or self.fixed_instruction or drawn
        self.data.userdata[:2] = parse_instruction(self.task)  # simulator state: replays carry it
        qpos = self.data.qpos
        qpos[self._pusher : self._pusher + 2] = pusher
        for index, xy in zip(self._cubes, cubes):
            yaw = rng.uniform(-np.pi, np.pi)
            qpos[index : index + 7] = [*xy, CUBE_HALF, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.ctrl[:] = pusher
        for mocap, goal in zip(self._goals, goals):
            self.data.mocap_pos[mocap] = [*goal, 0.0]

    def _env_state(self) -> np.ndarray:
        out = self._cubes_and_goals()
        cube, goal = (int(v) for v in self.data.userdata[:2])
        named = np.zeros(len(CUBES) + len(GOALS))
        named[cube], named[len(CUBES) + goal] = 1.0, 1.0
        return np.array([*out, *named])
