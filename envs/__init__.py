"""wmsuite.envs: the built-in MuJoCo tasks, registered with Gymnasium on import, and their scripted experts.

    import wmsuite.envs
    env = wmsuite.envs.make_env("wmsuite/PushCube-v0", image_size=64)

Ids (see each module's docstring for scene, spaces and success):
    wmsuite/PushCube-v0   envs/push_cube.py   push a cube into a goal disk, top camera, 2-D actions
    wmsuite/PickPlace-v0  envs/pick_place.py  pick a cube and place it on a target, front + wrist cameras
    wmsuite/PushTwoCubes-v0  envs/push_two_cubes.py  push two cubes, each into the goal of its colour (long horizon)
    wmsuite/PushCubeEgo-v0  envs/push_cube_ego.py  PushCube on a large table seen by a camera riding on the pusher
    wmsuite/PushColors-v0  envs/push_colors.py  push the cube the instruction names into the goal it names (6 tasks)

Task probes (what generic code may know about a task: object and agent slices, success from
environment_state, an object detector, a start perturbation): `wmsuite.envs.get_probe(env_id)`.

Scripted experts with a skill knob: `wmsuite.envs.experts:make_expert{"env_id": ..., "skill": 0.5}`.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco

from typing import Any

import gymnasium as gym

# id -> (entry point, max_episode_steps). The one registry of built-in tasks; tests sweep it.
_REGISTRY: dict[str, tuple[str, int]] = {
    "wmsuite/PushCube-v0": ("wmsuite.envs.push_cube:PushCubeEnv", 80),
    "wmsuite/PickPlace-v0": ("wmsuite.envs.pick_place:PickPlaceEnv", 120),
    "wmsuite/PushTwoCubes-v0": ("wmsuite.envs.push_two_cubes:PushTwoCubesEnv", 200),
    "wmsuite/PushCubeEgo-v0": ("wmsuite.envs.push_cube_ego:PushCubeEgoEnv", 160),
    "wmsuite/PushColors-v0": ("wmsuite.envs.push_colors:PushColorsEnv", 100),
}
ENV_IDS: tuple[str, ...] = tuple(_REGISTRY)  # the built-in MuJoCo tasks (no extras needed)


def _register() -> None:
    """Register every id with Gymnasium; importing this package twice registers nothing new."""
    for env_id, (entry_point, max_steps) in _REGISTRY.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps)


_register()

# robosuite (extra `sim`) and LIBERO (extra `libero`) ids: registered here, imported only on gym.make.
from wmsuite.envs.libero_env import register_libero_envs  # noqa: E402
from wmsuite.envs.robosuite_env import register_robosuite_envs  # noqa: E402

ROBOSUITE_IDS: tuple[str, ...] = tuple(register_robosuite_envs())
LIBERO_IDS: tuple[str, ...] = tuple(register_libero_envs())

DEFAULT_ENV_ID: str = ENV_IDS[0]
"""The task commands use when given none."""

# What generic code may know about each task (envs/probes.py); imports the task modules.
from wmsuite.envs.probes import PROBES, TaskProbe, get_probe  # noqa: E402


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """`gymnasium.make` for a wmsuite id, with an error that lists the known ids.

    Built-in tasks take: image_size (int, 64), cameras (names; () drops the "pixels" entry),
    render_mode ("rgb_array" or None), render_size (int), terminate_on_success (bool, True).
    Other `wmsuite/` ids registered with Gymnasium (the robosuite and LIBERO wrappers) work too.
    """
    known = wmsuite_ids()
    if env_id not in known:
        raise ValueError(f"unknown wmsuite env id {env_id!r}; known ids: {', '.join(known)}")
    return gym.make(env_id, **kwargs)


def wmsuite_ids() -> tuple[str, ...]:
    """Every `wmsuite/` id registered with Gymnasium now: the built-in ones first, then any others."""
    others = sorted(i for i in gym.registry if i.startswith("wmsuite/") and i not in _REGISTRY)
    return (*ENV_IDS, *others)


__all__ = ["DEFAULT_ENV_ID", "ENV_IDS", "LIBERO_IDS", "PROBES", "ROBOSUITE_IDS", "TaskProbe", "get_probe", "make_env",
           "wmsuite_ids"]
