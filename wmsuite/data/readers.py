"""Readers of the public Robomimic and LIBERO HDF5 layouts, mapped to `Episode` through declared key maps.

    episodes = read_any("lift/ph/image.hdf5", filter_key="train")      # layout detected from the file
    episodes = read_robomimic(path, key_map=ROBOMIMIC_LOW_DIM)
    episodes = read_libero("libero_spatial/pick_up_..._demo.hdf5")

The two public layouts differ in ways that matter for a world model:

| | Robomimic (dataset_states_to_obs.py) | LIBERO (scripts/create_dataset.py) |
|---|---|---|
| observations | `obs/k` at each state, `next_obs/k` after each action | `obs/k` only, recorded *after* replaying `actions[k]` |
| images | upright (robomimic's env wrapper flips robosuite's frames) | bottom-up rows (`macros_image_convention` = "opengl") |
| language | none | `data.attrs["problem_info"]["language_instruction"]` |
| filter keys | `mask/<name>` (byte strings of demo names), e.g. train / valid | none |

An `Episode` wants T actions between T+1 observations, with `obs[t]` seen before `actions[t]`:

* Robomimic: observations are `obs/` (T) plus the last `next_obs/`, actions all T.
* LIBERO: `obs[k]` is the scene after `actions[k]`, so the action taken at frame k is `actions[k + 1]`;
  the episode keeps the T recorded frames and `actions[1:]` (T-1 actions). The first action (taken
  before any recorded frame) is dropped.

`sim_states=True` also returns the flattened MuJoCo states aligned with the observations; the final
state is not stored in either layout, so the last action (and for LIBERO the last frame) is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import h5py
import numpy as np

from wmsuite.data.hdf5 import (
    DatasetError,
    EpisodeFile,
    attr_text,
    demo_keys,
    json_attr,
    member,
    open_checked,
    read_array,
    read_demos,
    reading,
)
from wmsuite.types import Episode

Layout = Literal["wmsuite", "robomimic", "libero"]


@dataclass(frozen=True)
class KeyMap:
    """How a public layout's keys become our episode fields."""

    cameras: dict[str, str]
    """Our camera name -> image key under `obs/` (uint8 (T, H, W, 3))."""
    agent_pos: tuple[str, ...]
    """`obs/` keys concatenated, in order, into `agent_pos` (proprioception)."""
    environment_state: tuple[str, ...] = ()
    """`obs/` keys concatenated into `environment_state` (privileged scene state); may be empty."""
    flip_images: bool | None = False
    """Reverse image rows (frames stored bottom-up); None reads `data.attrs["macros_image_convention"]`."""
    obs_after_action: bool = False
    """True when `obs/k[i]` was recorded after `actions[i]` (LIBERO), False when before it (Robomimic)."""

    def __post_init__(self) -> None:
        if not self.agent_pos:
            raise ValueError("a KeyMap needs at least one agent_pos key")
        for name in self.cameras:
            if not name or "/" in name:
                raise ValueError(f"camera names must be non-empty and contain no '/', got {name!r}")


ROBOMIMIC_IMAGE = KeyMap(
    cameras={"agentview": "agentview_image", "robot0_eye_in_hand": "robot0_eye_in_hand_image"},
    agent_pos=("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos"),
    environment_state=("object",),
)
"""Robomimic image datasets (lift/can/square/... image.hdf5): the same `agent_pos` layout (9) and
`environment_state` (robosuite object-state) as `wmsuite/robosuite-<Task>-v0`."""

ROBOMIMIC_LOW_DIM = KeyMap(cameras={}, agent_pos=ROBOMIMIC_IMAGE.agent_pos,
                           environment_state=ROBOMIMIC_IMAGE.environment_state)
"""Robomimic low-dim datasets (low_dim.hdf5): no frames."""

LIBERO = KeyMap(
    cameras={"agentview": "agentview_rgb", "robot0_eye_in_hand": "eye_in_hand_rgb"},
    agent_pos=("ee_states", "gripper_states"),
    environment_state=(),
    flip_images=None,
    obs_after_action=True,
)
"""LIBERO datasets: `agent_pos` = eef position + axis-angle (ee_states, 6) + finger qpos (gripper_states, 2),
as `wmsuite/libero-*` environments return it; cameras named as robosuite names them in those envs."""


# ---- layout detection ---------------------------------------------------------------------------------

def detect_layout(f: h5py.File) -> Layout:
    """Which layout an open HDF5 file has: ours, Robomimic's or LIBERO's."""
    with reading(str(f.filename)):
        data = member(f, "data", str(f.filename))
        if "wmsuite_version" in data.attrs:
            return "wmsuite"
        demos = demo_keys(data)
        if not demos:
            raise DatasetError(f"{f.filename} has no data/demo_<i> groups")
        first = member(data, demos[0], f"{f.filename}:data")
        obs = first.get("obs")
        if "problem_info" in data.attrs or (isinstance(obs, h5py.Group) and "agentview_rgb" in obs):
            return "libero"
        if obs is not None and "actions" in first:
            return "robomimic"
        raise DatasetError(f"{f.filename}:data/{demos[0]} has keys {list(first.keys())[:10]}; expected obs/ and "
                           "actions (a raw robosuite demo.hdf5 holds states only: extract observations with "
                           "robomimic's dataset_states_to_obs.py first)")


def detect(path: str | Path) -> tuple[Layout, dict[str, Any]]:
    """The layout of the dataset file at `path` and its `env_args` ({} when it has none)."""
    with open_checked(Path(path)) as f, reading(str(path)):
        return detect_layout(f), json_attr(f["data"].attrs, "env_args", f"{path}:data")


def read_any(path: str | Path, filter_key: str | None = None, cameras: Iterable[str] | None = None,
             limit: int | None = None, drop_bad: bool = False) -> list[Episode]:
    """Read a dataset of any supported layout with the default key map of that layout.

    `limit` reads the first `limit` demos; `drop_bad` skips (and logs) those that are malformed or hold
    NaN/inf instead of raising, so fewer may come back.
    """
    layout, _ = detect(path)
    if layout == "wmsuite":
        with EpisodeFile(path, filter_key=filter_key) as f:
            return read_demos(lambda k: f.read(k, cameras=cameras), f.keys[:limit], path, drop_bad)
    reader = read_libero if layout == "libero" else read_robomimic
    return reader(path, filter_key=filter_key, cameras=cameras, limit=limit, drop_bad=drop_bad)


# ---- the two public layouts -------------------------------------------------------------------------

def read_robomimic(path: str | Path, key_map: KeyMap | None = None, filter_key: str | None = None,
                   cameras: Iterable[str] | None = None, limit: int | None = None,
                   sim_states: bool = False, drop_bad: bool = False) -> list[Episode]:
    """Episodes of a Robomimic HDF5 file (image or low-dim; `key_map` None picks the matching default)."""
    with open_checked(Path(path)) as f:
        with reading(str(path)):
            keys = _selected(f, filter_key, limit)
            if not keys:
                return []
            if key_map is None:
                obs = member(f["data"], keys[0], f"{path}:data").get("obs")
                has_images = isinstance(obs, h5py.Group) and any(k in obs for k in ROBOMIMIC_IMAGE.cameras.values())
                key_map = ROBOMIMIC_IMAGE if has_images else ROBOMIMIC_LOW_DIM
            env_args = json_attr(f["data"].attrs, "env_args", f"{path}:data")
            meta = {"source": "robomimic", "env_name": str(env_args.get("env_name", "")), "source_path": str(path)}
            # robosuite pays reward_scale (1.0 in robomimic's datasets) exactly on success, dense reward or sparse
            kwargs = env_args.get("env_kwargs")
            scale = float((kwargs.get("reward_scale") if isinstance(kwargs, dict) else None) or 1.0)
            if not math.isfinite(scale):
                raise DatasetError(f"{path}: env_args env_kwargs.reward_scale is {scale}; expected a finite number")
        return read_demos(lambda key: _read_demo(f, key, key_map, cameras, sim_states, task="", meta=meta,
                                                 success_reward=scale), keys, path, drop_bad)


def read_libero(path: str | Path, key_map: KeyMap = LIBERO, filter_key: str | None = None,
                cameras: Iterable[str] | None = None, limit: int | None = None,
                sim_states: bool = False, drop_bad: bool = False) -> list[Episode]:
    """Episodes of a LIBERO HDF5 file, with the task's language instruction from `problem_info`."""
    with open_checked(Path(path)) as f:
        with reading(str(path)):
            data = f["data"]
            if "problem_info" not in data.attrs:
                raise DatasetError(f"{path}: data.attrs lacks 'problem_info' (LIBERO files carry the task's "
                                   "language there); read a Robomimic file with read_robomimic()")
            info = json_attr(data.attrs, "problem_info", f"{path}:data")
            task = info.get("language_instruction", "")
            if not task or not isinstance(task, str):
                raise DatasetError(f"{path}: problem_info has no language_instruction: {str(info)[:200]}")
            meta = {"source": "libero", "problem_name": str(info.get("problem_name", "")), "source_path": str(path),
                    "bddl_file_name": _attr_str(data.attrs.get("bddl_file_name", ""))}
            keys = _selected(f, filter_key, limit)
        return read_demos(lambda key: _read_demo(f, key, key_map, cameras, sim_states, task=task, meta=meta),
                          keys, path, drop_bad)


# ---- shared machinery ---------------------------------------------------------------------------------

def _selected(f: h5py.File, filter_key: str | None, limit: int | None) -> list[str]:
    keys = demo_keys(f["data"])
    if filter_key is not None:
        if f"mask/{filter_key}" not in f:
            masks = sorted(f["mask"].keys()) if isinstance(f.get("mask"), h5py.Group) else []
            raise DatasetError(f"{f.filename} has no filter key mask/{filter_key}; available: {masks}")
        mask = member(f, f"mask/{filter_key}", str(f.filename), h5py.Dataset)[()]
        wanted = sorted({_attr_str(k) for k in np.atleast_1d(mask)})
        missing = sorted(set(wanted) - set(keys))
        if missing:
            raise DatasetError(f"{f.filename}: mask/{filter_key} names demos that do not exist: {missing[:5]}")
        keys = sorted(wanted, key=lambda k: int(k[5:]))
    return keys if limit is None else keys[:limit]


def _attr_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _flip(f: h5py.File, key_map: KeyMap) -> bool:
    if key_map.flip_images is not None:
        return key_map.flip_images
    if "macros_image_convention" not in f["data"].attrs:
        raise DatasetError(f"{f.filename}: data.attrs lacks 'macros_image_convention'; pass a KeyMap with "
                           "flip_images=True (frames stored bottom-up, robosuite's default) or False")
    convention = attr_text(f["data"].attrs, "macros_image_convention", f"{f.filename}:data")
    if convention not in ("opengl", "opencv"):
        raise DatasetError(f"{f.filename}: unknown macros_image_convention {convention!r:.60} (want opengl or opencv)")
    return convention == "opengl"


def _read_demo(f: h5py.File, key: str, key_map: KeyMap, cameras: Iterable[str] | None, sim_states: bool,
               task: str, meta: dict, success_reward: float | None = None) -> Episode:
    """One demo; success is `rewards[-1] >= success_reward` when given, else `dones[-1]` (LIBERO).

    Any problem with it is one `DatasetError` naming the file and the demo.
    """
    where = f"{f.filename}:data/{key}"
    with reading(where):
        return _demo(f, member(f["data"], key, f"{f.filename}:data"), where, key_map, cameras, sim_states, task,
                     {**meta, "demo_key": key}, success_reward)


def _demo(f: h5py.File, g: h5py.Group, where: str, key_map: KeyMap, cameras: Iterable[str] | None,
          sim_states: bool, task: str, meta: dict, success_reward: float | None) -> Episode:
    if "actions" not in g or "obs" not in g:
        raise DatasetError(f"{where} lacks 'actions' or 'obs/' (has {sorted(g.keys())[:10]})")
    obs = member(g, "obs", where)
    nxt = member(g, "next_obs", where) if "next_obs" in g and not key_map.obs_after_action else None
    actions = read_array(g, "actions", where)  # (T, A)
    if actions.ndim != 2:
        raise DatasetError(f"{where}/actions has shape {actions.shape}; expected (T, A)")
    t = len(actions)

    cam_keys = dict(key_map.cameras)
    if cameras is not None:
        unknown = sorted(set(cameras) - set(cam_keys))
        if unknown:
            raise DatasetError(f"{where}: no camera(s) {unknown} in the key map; it maps {sorted(cam_keys)}")
        cam_keys = {c: cam_keys[c] for c in cameras}
    needed = [*cam_keys.values(), *key_map.agent_pos, *key_map.environment_state]
    missing = [k for k in needed if k not in obs]
    if missing:
        raise DatasetError(f"{where}/obs lacks {missing} named by the key map; it has {sorted(obs.keys())}. "
                           "Pass a KeyMap that matches the file (e.g. ROBOMIMIC_LOW_DIM for low_dim.hdf5)")
    if nxt is not None:
        missing = [k for k in needed if k not in nxt]
        if missing:
            raise DatasetError(f"{where}/next_obs lacks {missing}; it has {sorted(nxt.keys())}")

    # Index plan: frames[i] = obs[rows[i]] (plus next_obs[-1] at the end), actions[i] = actions[act[i]].
    if key_map.obs_after_action:  # LIBERO: the action taken at recorded frame k is actions[k + 1]
        n_frames = t - 1 if sim_states else t
        act = np.arange(1, n_frames)
        state_rows = np.arange(1, n_frames + 1)  # states[k + 1] precedes actions[k + 1]
        take_next = False
    else:  # Robomimic: obs[k] precedes actions[k]
        if sim_states or nxt is None:
            n_frames = t
            act = np.arange(0, t - 1)
            take_next = False
        else:
            n_frames = t + 1
            act = np.arange(0, t)
            take_next = True
        state_rows = np.arange(0, n_frames)
    if len(act) < 1:
        raise DatasetError(f"{where} has {t} steps: too short to form one transition")
    rows = np.arange(0, n_frames - 1 if take_next else n_frames)

    def series(name: str, dtype: type) -> np.ndarray:  # (n_frames, ...)
        values = read_array(obs, name, f"{where}/obs")[rows]
        if take_next:
            values = np.concatenate([values, read_array(nxt, name, f"{where}/next_obs")[-1:]], axis=0)
        if dtype is np.uint8 and values.dtype != np.uint8:  # casting would wrap or truncate pixel values
            raise DatasetError(f"{where}/obs/{name} holds {values.dtype} values; expected uint8 frames")
        with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf, which Episode refuses
            return values.astype(dtype, copy=False)

    def stacked(names: Sequence[str]) -> np.ndarray | None:  # (n_frames, D)
        if not names:
            return None
        return np.concatenate([series(k, np.float32).reshape(n_frames, -1) for k in names], axis=1)

    flip = _flip(f, key_map) if cam_keys else False
    frames = {}
    for cam, k in cam_keys.items():
        video = series(k, np.uint8)  # (n_frames, H, W, 3)
        if video.ndim != 4 or video.shape[-1] != 3:
            raise DatasetError(f"{where}/obs/{k} has shape {video.shape}; expected (T, H, W, 3) uint8 frames")
        frames[cam] = np.ascontiguousarray(video[:, ::-1]) if flip else video

    all_rewards = read_array(g, "rewards", where) if "rewards" in g else np.zeros(t, np.float32)
    dones = read_array(g, "dones", where) if "dones" in g else np.zeros(t)
    for name, values in (("rewards", all_rewards), ("dones", dones)):
        if values.shape != (t,):
            raise DatasetError(f"{where}/{name} has shape {values.shape}; expected ({t},), one per action")
    rewards = all_rewards[act]
    sims = None
    if sim_states:
        if "states" not in g:
            raise DatasetError(f"{where} lacks 'states'; read it with sim_states=False")
        sims = read_array(g, "states", where)[state_rows]
    if success_reward is not None:
        success = bool(all_rewards[-1] >= success_reward - 1e-6)
    else:
        success = bool(dones[-1])
    ep_meta = {**meta, "source_steps": t, "dropped_steps": t - len(act)}
    return Episode(obs=frames, state=stacked(key_map.agent_pos), env_state=stacked(key_map.environment_state),
                   actions=actions[act], rewards=rewards, success=success, terminated=success, sim_states=sims,
                   task=task, meta=ep_meta)
