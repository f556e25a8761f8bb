"""What the built-in MuJoCo tasks share: scene loading, the step loop, rendering, sim state, pixel rays.

A task subclasses `MujocoTaskEnv` and says how to lay out a scene from the seed (`_randomize`), how an
action becomes actuator targets (`_apply_action`), and what `agent_pos` and `environment_state` are.
Success is always a pure function of the float32 `environment_state` the env returns, so
`info["is_success"]` and the task module's batched `is_success_from_env_state` cannot disagree.
`info` on every reset and step: {"is_success": bool, "task": str, "sim_state": (S,) float64}, the
last being `get_sim_state()`, from which `set_sim_state` replays the episode bit for bit.

Observations (LeRobot convention):
    {"pixels": {camera: (S, S, 3) uint8}, "agent_pos": (D,) float32, "environment_state": (E,) float32}
`cameras=("top",)` etc. selects cameras; `cameras=()` makes a state-only env whose observations have no
"pixels" entry (for scripted experts and tests that need no images).

Control runs at 10 Hz: every `step` holds the actuator targets for CONTROL_DT / timestep physics steps.
Offscreen rendering goes through one `mujoco.Renderer` per image size, created on first use.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering; must be set before mujoco loads GL

import atexit
import importlib.resources
import weakref
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

# Everything a replay needs: time, qpos, qvel, actuator activations, warm start, controls, applied
# forces, mocap poses (goal/target live on mocap bodies), equality flags, user data.
SIM_STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION


# Envs with open renderers, closed at exit while EGL still works: a renderer freed during interpreter
# teardown prints EGL errors. The hook is registered after mujoco's EGL module registers its own
# eglTerminate (on the first context), so that it runs before it (atexit runs hooks last-in first-out).
_LIVE_ENVS: weakref.WeakSet[MujocoTaskEnv] = weakref.WeakSet()
_EXIT_HOOK: list[bool] = []


def _close_live_envs() -> None:
    for env in list(_LIVE_ENVS):
        env.close()


def scene_path(name: str) -> str:
    """Absolute path of an MJCF scene shipped in wmsuite/assets/scenes/."""
    path = importlib.resources.files("wmsuite.assets") / "scenes" / name
    if not path.is_file():
        raise FileNotFoundError(f"no MJCF scene {name!r} at {path}; is the wmsuite package installed completely?")
    return str(path)


class MujocoTaskEnv(gym.Env):
    """Base class of the built-in tasks (see the module docstring). Subclasses set the class constants."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    SCENE: ClassVar[str]  # file name under assets/scenes/
    CAMERAS: ClassVar[tuple[str, ...]]  # cameras observed by default
    RENDER_CAMERA: ClassVar[str]  # the camera `render()` shows
    TASK: ClassVar[str]  # language instruction
    ACTION_NAMES: ClassVar[tuple[str, ...]]
    AGENT_POS_BOUNDS: ClassVar[tuple[Sequence[float], Sequence[float]]]
    ENV_STATE_BOUNDS: ClassVar[tuple[Sequence[float], Sequence[float]]]
    CONTROL_DT: ClassVar[float] = 0.1  # s per `step`: control at 10 Hz
    is_success_from_env_state: ClassVar[Callable[[np.ndarray], np.ndarray]]

    def __init__(
        self,
        image_size: int = 64,
        cameras: Sequence[str] | None = None,
        render_mode: str | None = None,
        render_size: int | None = None,
        terminate_on_success: bool = True,
    ) -> None:
        name = type(self).__name__
        if not isinstance(image_size, int | np.integer) or not 8 <= image_size <= 1024:
            raise ValueError(f"{name}: image_size must be an int in [8, 1024], got {image_size!r}")
        if render_size is not None and (not isinstance(render_size, int | np.integer) or not 8 <= render_size <= 2048):
            raise ValueError(f"{name}: render_size must be None or an int in [8, 2048], got {render_size!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"{name}: render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        cameras = self.CAMERAS if cameras is None else tuple(cameras)
        unknown = [c for c in cameras if c not in self.CAMERAS]
        if unknown or len(set(cameras)) != len(cameras):
            raise ValueError(f"{name}: cameras must be distinct names from {self.CAMERAS} (or empty), got {cameras!r}")
        self.image_size = int(image_size)
        self.render_size = int(render_size) if render_size is not None else self.image_size
        self.cameras = cameras
        self.render_mode = render_mode
        self.terminate_on_success = bool(terminate_on_success)
        self.task = self.TASK

        self.model = self._load_model()
        self.data = mujoco.MjData(self.model)
        self.frame_skip = round(self.CONTROL_DT / self.model.opt.timestep)
        largest = max(self.image_size, self.render_size)
        self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, largest)
        self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, largest)
        self._renderers: dict[tuple[int, bool], mujoco.Renderer] = {}  # (size, depth) -> renderer

        n = len(self.ACTION_NAMES)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float32)
        pixel = spaces.Box(0, 255, shape=(self.image_size, self.image_size, 3), dtype=np.uint8)
        obs_spaces: dict[str, spaces.Space] = {
            "agent_pos": spaces.Box(*(np.asarray(b, np.float32) for b in self.AGENT_POS_BOUNDS), dtype=np.float32),
            "environment_state": spaces.Box(*(np.asarray(b, np.float32) for b in self.ENV_STATE_BOUNDS),
                                            dtype=np.float32),
        }
        if self.cameras:  # cameras=() gives a state-only env with no "pixels" entry (Gymnasium forbids empty Dicts)
            obs_spaces["pixels"] = spaces.Dict({cam: pixel for cam in self.cameras})
        self.observation_space = spaces.Dict(obs_spaces)

    # ---- what a task defines ------------------------------------------------------------------
    def _load_model(self) -> mujoco.MjModel:
        """The compiled scene; a task with scene variants edits it here."""
        return mujoco.MjModel.from_xml_path(scene_path(self.SCENE))

    def _randomize(self, rng: np.random.Generator) -> None:
        """Write a random initial layout into self.data (qpos, mocap, ctrl), drawing only from rng."""
        raise NotImplementedError

    def _apply_action(self, action: np.ndarray) -> None:
        """Set self.data.ctrl from a clipped (A,) action in [-1, 1]."""
        raise NotImplementedError

    def _agent_pos(self) -> np.ndarray:
        raise NotImplementedError

    def _env_state(self) -> np.ndarray:
        raise NotImplementedError

    # ---- Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self._randomize(self.np_random)
        mujoco.mj_forward(self.model, self.data)
        obs = self._observation()
        return obs, self._info(obs)

    def step(self, action: Any):
        action = self._check_action(action)
        self._apply_action(action)
        mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
        # mj_step leaves positions of bodies and cameras one substep behind qpos; bring them up to date so
        # that pixels, agent_pos and environment_state describe the same instant (and a restored sim
        # state renders the same image). It does not change the trajectory.
        mujoco.mj_forward(self.model, self.data)
        obs = self._observation()
        info = self._info(obs)
        terminated = info["is_success"] and self.terminate_on_success
        return obs, float(info["is_success"]), terminated, False, info

    def render(self) -> np.ndarray | None:
        """The `RENDER_CAMERA` view at `render_size` (rgb_array mode), (S, S, 3) uint8."""
        if self.render_mode is None:
            gym.logger.warn(f"{type(self).__name__}.render() called without a render_mode; pass render_mode='rgb_array'")
            return None
        return self.render_camera(self.RENDER_CAMERA, self.render_size)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers = {}

    # ---- simulator state, for exact replay ----------------------------------------------------
    def get_sim_state(self) -> np.ndarray:
        """(S,) float64: everything MuJoCo needs to continue this episode bit for bit."""
        out = np.empty(mujoco.mj_stateSize(self.model, SIM_STATE_SPEC), np.float64)
        mujoco.mj_getState(self.model, self.data, out, SIM_STATE_SPEC)
        return out

    def set_sim_state(self, state: np.ndarray) -> None:
        """Restore a vector from `get_sim_state` (of this task) and recompute derived quantities."""
        state = np.asarray(state, np.float64)
        size = mujoco.mj_stateSize(self.model, SIM_STATE_SPEC)
        if state.shape != (size,):
            raise ValueError(f"{type(self).__name__}.set_sim_state expects shape ({size},), got {state.shape}; "
                             "was it recorded from another task?")
        if not np.all(np.isfinite(state)):
            raise ValueError(f"{type(self).__name__}.set_sim_state got NaN or inf")
        mujoco.mj_setState(self.model, self.data, state, SIM_STATE_SPEC)
        mujoco.mj_forward(self.model, self.data)

    # ---- helpers ------------------------------------------------------------------------------

    def nudge_cube(self, dxy: tuple[float, float] = (0.0, 0.0), dyaw: float = 0.0) -> None:
        """Shift the task's free object (the joint at qpos index `self._cube`) by `dxy` (m) and turn it by
        `dyaw` (rad) about the vertical; takes effect at the next forward pass or step (the start
        perturbation of eval-wm's replays: how much an outcome hinges on what a frame shows)."""
        q, c = self.data.qpos, self._cube
        q[c : c + 2] += np.asarray(dxy, np.float64)
        turn = np.array([np.cos(dyaw / 2), 0.0, 0.0, np.sin(dyaw / 2)])
        quat = np.empty(4)
        mujoco.mju_mulQuat(quat, turn, q[c + 3 : c + 7].copy())
        q[c + 3 : c + 7] = quat
    def render_camera(self, camera: str, size: int) -> np.ndarray:
        """Render one camera of the current state, (size, size, 3) uint8 (a new array every call)."""
        renderer = self._renderer(size, depth=False)
        renderer.update_scene(self.data, camera=camera)
        return renderer.render()

    def render_depth(self, camera: str, size: int) -> np.ndarray:
        """Depth of one camera's view, (size, size) float32 metres along its optical axis (z-depth, as
        `camera_geometry`'s intrinsics back-project it)."""
        renderer = self._renderer(size, depth=True)
        renderer.update_scene(self.data, camera=camera)
        return renderer.render().astype(np.float32)

    def camera_geometry(self, camera: str, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(intrinsics (3, 3), camera-to-world pose (4, 4)) of `camera` now, for (size, size) images, in
        the OpenCV convention: x right, y down, z along the view; pixel (row r, column c) has its
        centre at (u, v) = (c + 0.5, r + 0.5). MuJoCo's cameras look along their -z with y up."""
        cam = self.model.camera(camera)
        focal = (size / 2) / np.tan(np.deg2rad(float(cam.fovy[0])) / 2)
        intrinsics = np.array([[focal, 0.0, size / 2], [0.0, focal, size / 2], [0.0, 0.0, 1.0]])
        pose = np.eye(4)
        pose[:3, :3] = self.data.cam_xmat[cam.id].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        pose[:3, 3] = self.data.cam_xpos[cam.id]
        return intrinsics, pose

    def _renderer(self, size: int, depth: bool) -> mujoco.Renderer:
        renderer = self._renderers.get((size, depth))
        if renderer is None:
            try:
                renderer = self._renderers[size, depth] = mujoco.Renderer(self.model, size, size)
            except Exception as err:  # mujoco raises FatalError or a GL error from the platform layer
                raise RuntimeError(
                    f"cannot create a MuJoCo offscreen renderer ({err}). Headless machines need "
                    "MUJOCO_GL=egl set before mujoco is first imported: export MUJOCO_GL=egl, or import "
                    "wmsuite.envs before mujoco. To run without pixels pass cameras=() to the env."
                ) from err
            if depth:
                renderer.enable_depth_rendering()
            _LIVE_ENVS.add(self)
            if not _EXIT_HOOK:
                atexit.register(_close_live_envs)
                _EXIT_HOOK.append(True)
        return renderer

    def _observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "agent_pos": self._agent_pos().astype(np.float32),
            "environment_state": self._env_state().astype(np.float32),
        }
        if self.cameras:
            obs["pixels"] = {cam: self.render_camera(cam, self.image_size) for cam in self.cameras}
        return obs

    def _info(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Every reset and step: success, the instruction, and the sim state (the rollout engine records it)."""
        success = bool(type(self).is_success_from_env_state(obs["environment_state"][None])[0])
        return {"is_success": success, "task": self.task, "sim_state": self.get_sim_state()}

    def _check_action(self, action: Any) -> np.ndarray:
        shape = self.action_space.shape
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{type(self).__name__}: action must be numeric of shape {shape} "
                             f"{self.ACTION_NAMES}, got {action!r}") from err
        if a.shape != shape:
            raise ValueError(f"{type(self).__name__}: action must have shape {shape} {self.ACTION_NAMES} "
                             f"with values in [-1, 1], got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{type(self).__name__}: action contains NaN or inf: {a.tolist()}")
        return np.clip(a, -1.0, 1.0)  # values outside [-1, 1] saturate, as the Box bounds say

    def _joint_qpos(self, name: str) -> int:
        return int(self.model.joint(name).qposadr[0])


def sample_away(rng: np.random.Generator, half: float, avoid: np.ndarray, min_dist: float) -> np.ndarray:
    """Uniform in [-half, half]^2, redrawn until at least min_dist from `avoid`."""
    while True:
        xy = rng.uniform(-half, half, size=2)
        if np.linalg.norm(xy - avoid) >= min_dist:
            return xy


# ---- pixels -> world, for colour-blob detectors -----------------------------------------------


@cache
def camera_pose(scene: str, camera: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(position (3,), rotation (3, 3) camera->world, vertical fov in radians) of a fixed camera."""
    model = mujoco.MjModel.from_xml_path(scene_path(scene))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    cam = model.camera(camera)
    if cam.bodyid[0] != 0:
        raise ValueError(f"camera {camera!r} of {scene} moves with a body; pixel rays need a fixed camera")
    return data.cam_xpos[cam.id].copy(), data.cam_xmat[cam.id].reshape(3, 3).copy(), float(np.deg2rad(cam.fovy[0]))


def detect_blob_xy(frames: np.ndarray, scene: str, camera: str, plane_z: float,
                   mask_fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """World (x, y) where the ray through each frame's blob centroid meets the plane z = plane_z.

    frames: (H, W, 3) or (N, H, W, 3) uint8 from `camera`; mask_fn maps (..., 3) int pixels to a bool
    mask. Returns (2,) or (N, 2) float64, NaN where no pixel matches.
    """
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise ValueError(f"expected uint8 frames (H, W, 3) or (N, H, W, 3), got {frames.dtype} {frames.shape}")
    single = frames.ndim == 3
    frames = frames[None] if single else frames
    _, h, w, _ = frames.shape
    mask = mask_fn(frames.astype(np.int16))  # (N, H, W)
    count = mask.sum(axis=(1, 2))  # (N,)
    rows = (np.arange(h) + 0.5)[None, :, None]
    cols = (np.arange(w) + 0.5)[None, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        v = (mask * rows).sum(axis=(1, 2)) / count  # (N,) pixel row of the centroid
        u = (mask * cols).sum(axis=(1, 2)) / count  # (N,) pixel column
    pos, rot, fovy = camera_pose(scene, camera)
    focal = (h / 2) / np.tan(fovy / 2)  # pixels
    ray_cam = np.stack([(u - w / 2) / focal, -(v - h / 2) / focal, -np.ones_like(u)], axis=-1)  # (N, 3)
    ray = ray_cam @ rot.T  # (N, 3) in world coordinates
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (plane_z - pos[2]) / ray[:, 2]
    xy = pos[:2] + t[:, None] * ray[:, :2]  # (N, 2)
    xy[count == 0] = np.nan
    return xy[0] if single else xy


def red_mask(pixels: np.ndarray) -> np.ndarray:
    """Pixels of the red cube: strongly red, little green or blue. (..., 3) int -> (...) bool."""
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return (r > 90) & (r > 2 * g) & (r > 2 * b)


def green_mask(pixels: np.ndarray) -> np.ndarray:
    """Pixels of a green cube: strongly green, little red or blue (a pale green goal disk is not).
    (..., 3) int -> (...) bool."""
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return (g > 60) & (g > 2 * r) & (g > 2 * b)
