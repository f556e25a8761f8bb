"""robosuite manipulation tasks as Gymnasium environments (extra `sim`: robosuite 1.4.0, mujoco < 3.10).

    import gymnasium as gym, wmsuite.envs
    env = gym.make("wmsuite/robosuite-Lift-v0", cameras=("agentview",), image_size=64)

Registered ids: `wmsuite/robosuite-<Task>-v0` for the tasks in `TASKS` (Panda arm, OSC_POSE
controller at 20 Hz). Observations follow the project convention:

    {"pixels": {camera: (H, W, 3) uint8},          # upright (robosuite renders bottom-up; we flip)
     "agent_pos": (9,) float32,                    # eef position (3), eef quaternion xyzw (4), finger qpos (2)
     "environment_state": (E,) float32}            # robosuite's "object-state" (object poses, relative positions)

`agent_pos` uses robomimic's low-dim keys (`PROPRIO_KEYS`), so robomimic datasets read through
`wmsuite.data.readers` land in the same layout. `info` carries `is_success` (robosuite's
`_check_success`), `task` (an instruction) and `sim_state` (the flattened MuJoCo state, for
exact replay) on every reset and step. Resets are soft (robosuite's `hard_reset=False`): the model
and the GL context are built once, a reset only re-samples the object placement (far faster than
a hard reset). robosuite draws its placement noise from numpy's global generator, so
`reset(seed=...)` seeds that generator for the duration of the reset and restores it after.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

TASKS = ("Lift", "Stack", "PickPlaceCan", "NutAssemblySquare")
"""robosuite environments registered as `wmsuite/robosuite-<Task>-v0`."""

MAX_STEPS = {"Lift": 400, "Stack": 400, "PickPlaceCan": 400, "NutAssemblySquare": 400}
"""Episode limits at 20 Hz: robomimic's evaluation horizon (400) for its tasks, the same for Stack."""

INSTRUCTIONS = {
    "Lift": "lift the cube",
    "Stack": "stack the red cube on the green cube",
    "PickPlaceCan": "pick up the can and place it in its bin",
    "NutAssemblySquare": "fit the square nut onto the square peg",
}

# Lift's object-state (robosuite 1.4): cube position (3, world frame, m), cube quaternion xyzw (4),
# gripper-to-cube vector (3). Its table top is at z = LIFT_TABLE_HEIGHT (the arena's table_offset).
LIFT_ENV_STATE_DIM = 10
LIFT_CUBE_XY = slice(0, 2)
LIFT_CUBE_XYZ = slice(0, 3)
LIFT_EEF_XYZ = slice(0, 3)  # of agent_pos: end-effector position (3), quaternion (4), fingers (2)
LIFT_REACH = 0.021 + 0.01
"""m between the end effector and the cube's centre within which the gripper can hold and move the cube:
the cube's half size (robosuite samples 0.020-0.022) and a centimetre of reading error. The "tracked"
judge (world_models/env.py) holds the cube where it was wherever the fingers are farther away, so a
cube drawn rising beside fingers that closed on air is not a lift."""
GRIPPER_ACTION = 6
"""Index of the gripper command in an OSC_POSE action (six arm entries, then -1 open / +1 close)."""
LIFT_FINGERS = (7, 8)
"""agent_pos entries of the Panda's two finger joints (m, the left one positive): their difference is
the fingers' opening, about 8 cm wide open."""
LIFT_HOLD_GAP = 0.02
"""m: fingers closed on the cube stay its width apart (4.0-4.4 cm); closed on nothing they come much
closer. With LIFT_FINGERS, a latched judge that holds a grasp only while the fingers read at least this
far apart carries nothing up after a slip; Lift's probe does not name them (on generated frames the
heads read a real grasp's fingers too close; experiments/world_models_journal.md, session 24)."""
LIFT_TABLE_HEIGHT = 0.8  # m
LIFT_MIN_HEIGHT = 0.04  # m above the table: robosuite's Lift._check_success


def lift_success_from_env_state(env_state: np.ndarray) -> np.ndarray:
    """(..., 10) Lift environment_state -> (...) bool: is the cube's centre more than LIFT_MIN_HEIGHT above
    the table? (robosuite's Lift._check_success, computed without robosuite)."""
    env_state = np.asarray(env_state)
    if env_state.shape[-1:] != (LIFT_ENV_STATE_DIM,):
        raise ValueError(f"Lift environment_state has {LIFT_ENV_STATE_DIM} entries, got shape {env_state.shape}")
    return env_state[..., 2] > LIFT_TABLE_HEIGHT + LIFT_MIN_HEIGHT


PROPRIO_KEYS = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")
"""robosuite observation keys concatenated into `agent_pos` (9 values for the Panda)."""

DEFAULT_CAMERAS = ("agentview", "robot0_eye_in_hand")

INSTALL_HINT = "pip install 'wmsuite[sim]' (robosuite==1.4.0 termcolor 'mujoco>=3.3,<3.10'); see docs/real-benchmarks.md"


def env_id(task: str) -> str:
    return f"wmsuite/robosuite-{task}-v0"


def register_robosuite_envs() -> list[str]:
    """Register every task of `TASKS` with Gymnasium (lazily: robosuite is imported on gym.make)."""
    ids = []
    for task in TASKS:
        eid = env_id(task)
        if eid not in gym.registry:
            gym.register(
                id=eid,
                entry_point="wmsuite.envs.robosuite_env:RobosuiteEnv",
                max_episode_steps=MAX_STEPS[task],
                kwargs={"task": task},
            )
        ids.append(eid)
    return ids


def import_robosuite() -> Any:
    """Import robosuite headless (EGL), or raise an ImportError that names the extra to install."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import robosuite
    except ImportError as err:
        raise ImportError(f"robosuite is not installed ({err}); {INSTALL_HINT}") from err
    import mujoco

    major_minor = tuple(int(p) for p in mujoco.__version__.split(".")[:2])
    if major_minor >= (3, 10):
        raise ImportError(f"robosuite 1.4 breaks with mujoco {mujoco.__version__}; {INSTALL_HINT}")
    if not robosuite.__version__.startswith("1.4"):
        raise ImportError(f"wmsuite's robosuite wrapper targets robosuite 1.4.x, found {robosuite.__version__}; "
                          f"{INSTALL_HINT}")
    return robosuite


@contextlib.contextmanager
def seeded_global_numpy(seed: int | None) -> Iterator[None]:
    """Seed numpy's global generator (which robosuite draws from) and restore it afterwards."""
    if seed is None:
        yield
        return
    saved = np.random.get_state()  # noqa: NPY002 (robosuite 1.4 samples from the legacy global generator)
    np.random.seed(seed)  # noqa: NPY002
    try:
        yield
    finally:
        np.random.set_state(saved)  # noqa: NPY002


def flip_rows(frame: np.ndarray) -> np.ndarray:
    """robosuite (macros.IMAGE_CONVENTION = 'opengl') renders bottom row first; return it upright."""
    return np.ascontiguousarray(frame[::-1])


def fast_render_settings(sim: Any) -> None:
    """No multisampling and no reflections: rendering, which dominates a camera step, gets several times faster.

    `sim` is a robosuite MjSim whose offscreen context already exists; the MjrContext is rebuilt
    so that the new sample count takes effect (robosuite rebuilds it from the same model later).
    """
    import mujoco

    ctx = sim._render_context_offscreen
    sim.model._model.vis.quality.offsamples = 0
    ctx.con.free()
    ctx._set_mujoco_context_and_buffers()
    ctx.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0


class RobosuiteBackedEnv(gym.Env):
    """What every env wrapping a robosuite environment in `self._env` shares (robosuite tasks, LIBERO):
    upright rendering from `self.render_camera` at `self.image_hw`, closing, and the MjSim."""

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        h, w = self.image_hw
        return flip_rows(self._env.sim.render(camera_name=self.render_camera, height=h, width=w))

    def close(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()
            self._env = None

    @property
    def sim(self) -> Any:
        """robosuite's MjSim (`.model`, `.data`, `.get_state()`)."""
        return self._env.sim


class RobosuiteEnv(RobosuiteBackedEnv):
    """One robosuite task (Panda, OSC_POSE) in the project's observation convention."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task: str = "Lift", cameras: Sequence[str] = DEFAULT_CAMERAS,
                 image_size: int | tuple[int, int] = 84, robot: str = "Panda", controller: str = "OSC_POSE",
                 control_freq: int = 20, reward_shaping: bool = False, terminate_on_success: bool = True,
                 fast_render: bool = True, render_mode: str | None = None) -> None:
        """
        Args:
            task: a robosuite environment name from `TASKS`.
            cameras: robosuite camera names rendered into `pixels`; empty for state-only (fast: no rendering).
            image_size: square size or (height, width) of every camera.
            robot, controller: robosuite robot and default controller config.
            control_freq: policy steps per simulated second.
            reward_shaping: robosuite's dense staged reward instead of the sparse success reward.
            terminate_on_success: end the episode (`terminated=True`) on the first success.
            fast_render: turn off multisampling and reflections (faster frames, flatter look).
            render_mode: 'rgb_array' (the first camera, or agentview when `cameras` is empty) or None.
        """
        if task not in TASKS:
            raise ValueError(f"unknown robosuite task {task!r}; registered tasks are {list(TASKS)}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if len(size) != 2 or min(size) < 8:
            raise ValueError(f"image_size must be >= 8 or a (height, width) pair of them, got {image_size!r}")
        self.task, self.cameras, self.image_hw = task, tuple(cameras), (int(size[0]), int(size[1]))
        self.terminate_on_success, self.render_mode = terminate_on_success, render_mode
        self.render_camera = self.cameras[0] if self.cameras else "agentview"
        suite = import_robosuite()
        offscreen = bool(self.cameras) or render_mode == "rgb_array"
        with seeded_global_numpy(0):  # robosuite resets once inside make(); keep the caller's generator
            self._env = suite.make(
                task, robots=robot, controller_configs=suite.load_controller_config(default_controller=controller),
                has_renderer=False, has_offscreen_renderer=offscreen, use_camera_obs=bool(self.cameras),
                camera_names=list(self.cameras) or "agentview", camera_heights=self.image_hw[0],
                camera_widths=self.image_hw[1], reward_shaping=reward_shaping, control_freq=control_freq,
                hard_reset=False, ignore_done=True, horizon=10**9,
            )
            raw = self._env.reset()
        if offscreen and fast_render:
            fast_render_settings(self._env.sim)
        self._state_dim = sum(int(np.size(raw[k])) for k in PROPRIO_KEYS)
        self._env_state_dim = int(np.size(raw["object-state"]))
        low, high = (np.asarray(b, np.float32) for b in self._env.action_spec)
        self.action_space = spaces.Box(low, high, dtype=np.float32)
        obs_spaces: dict[str, spaces.Space] = {}
        if self.cameras:
            obs_spaces["pixels"] = spaces.Dict(
                {c: spaces.Box(0, 255, (*self.image_hw, 3), np.uint8) for c in self.cameras})
        obs_spaces["agent_pos"] = spaces.Box(-np.inf, np.inf, (self._state_dim,), np.float32)
        obs_spaces["environment_state"] = spaces.Box(-np.inf, np.inf, (self._env_state_dim,), np.float32)
        self.observation_space = spaces.Dict(obs_spaces)

    # ---- Gymnasium API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Soft reset to a fresh random placement; `options={"sim_state": flat}` then restores a saved state."""
        super().reset(seed=seed)
        with seeded_global_numpy(int(self.np_random.integers(2**31 - 1))):
            raw = self._env.reset()
        for robot in self._env.robots:  # a soft reset keeps the gripper's integrated command; a hard one zeroes it
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        if options and "sim_state" in options:
            raw = self.set_sim_state(options["sim_state"])
        return self._observe(raw), self._info()

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        action = np.asarray(action, np.float64).reshape(self.action_space.shape)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action contains NaN or inf: {action}")
        raw, reward, _, _ = self._env.step(action)
        info = self._info()
        terminated = bool(info["is_success"] and self.terminate_on_success)
        return self._observe(raw), float(reward), terminated, False, info

    # ---- simulator access (experts, replay, tests) -------------------------------------------------

    @property
    def robosuite_env(self) -> Any:
        """The wrapped robosuite environment."""
        return self._env

    def get_sim_state(self) -> np.ndarray:
        """Flattened MuJoCo state (time, qpos, qvel) as robomimic stores it in `states`."""
        return np.asarray(self._env.sim.get_state().flatten(), np.float64)

    def set_sim_state(self, flat: np.ndarray) -> dict[str, Any]:
        """Restore a flattened state (robomimic's `reset_to`) and return robosuite's fresh observation."""
        self._env.sim.set_state_from_flattened(np.asarray(flat, np.float64))
        self._env.sim.forward()
        return self._env._get_observations(force_update=True)

    def check_success(self) -> bool:
        return bool(self._env._check_success())

    # ---- conversion --------------------------------------------------------------------------------

    def _observe(self, raw: dict[str, Any]) -> dict[str, Any]:
        obs: dict[str, Any] = {}
        if self.cameras:
            obs["pixels"] = {c: flip_rows(raw[f"{c}_image"]) for c in self.cameras}
        obs["agent_pos"] = np.concatenate([np.ravel(raw[k]) for k in PROPRIO_KEYS]).astype(np.float32)
        obs["environment_state"] = np.asarray(raw["object-state"], np.float32)
        return obs

    def _info(self) -> dict[str, Any]:
        return {"is_success": self.check_success(), "task": INSTRUCTIONS[self.task],
                "sim_state": self.get_sim_state()}
