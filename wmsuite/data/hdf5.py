"""Robomimic-format HDF5 episode store: our native on-disk format (LIBERO uses the same layout).

Layout written (robomimic's keys, plus our extras marked *):

    data/                       attrs: total, env_args (JSON), *wmsuite_version
      demo_<i>/                 attrs: num_samples, *success, *terminated, *truncated, *task, *policy_id, *meta (JSON)
        obs/<camera>_image      uint8   (T, H, W, 3)   observation before each action
        obs/agent_pos           float32 (T, D)
        obs/environment_state   float32 (T, E)
        next_obs/...            same keys, the observation after each action
        actions                 float32 (T, A)
        rewards                 float32 (T,)
        dones                   int64   (T,)   1 on the last step when the episode terminated
        states                  float64 (T, S) simulator state before each action
        *intervention           bool    (T,)
        *final_state            float64 (S,)   simulator state after the last action

Every write goes to a temporary file in the same directory that is renamed over the target, so a
crash at any point leaves either the old file or the new one, never a half-written mix.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from wmsuite.types import Episode

FORMAT_VERSION = 1
IMAGE_SUFFIX = "_image"
_COMPRESSION = {"compression": "lzf"}


class DatasetError(ValueError):
    """A dataset file is missing, not HDF5, or lacks keys we need."""


def write_episodes(path: str | Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None = None,
                   overwrite: bool = False) -> Path:
    """Write a new file holding `episodes` (refuses to replace an existing file unless `overwrite`)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; append with append_episodes() or pass overwrite=True")
    return _atomic_update(path, episodes, env_args, start_from=None)


def append_episodes(path: str | Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None = None) -> Path:
    """Add `episodes` after those already in `path` (creating it if missing), atomically."""
    path = Path(path)
    if not path.exists():
        return _atomic_update(path, episodes, env_args, start_from=None)
    _open_checked(path).close()  # a clear error if the existing file is not ours to extend
    return _atomic_update(path, episodes, env_args, start_from=path)


def _atomic_update(path: Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None,
                   start_from: Path | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if start_from is not None:
            shutil.copyfile(start_from, tmp)
        with h5py.File(tmp, "r+" if start_from is not None else "w") as f:
            data = f.require_group("data")
            if env_args is not None:
                data.attrs["env_args"] = json.dumps(env_args)
            elif "env_args" not in data.attrs:
                data.attrs["env_args"] = json.dumps({})
            data.attrs["wmsuite_version"] = FORMAT_VERSION
            start = _next_index(data)
            total = int(data.attrs.get("total", 0))
            for offset, ep in enumerate(episodes):
                _write_demo(data.create_group(f"demo_{start + offset}"), ep)
                total += ep.length
            data.attrs["total"] = total
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _next_index(data: h5py.Group) -> int:
    ids = [int(k.split("_", 1)[1]) for k in data.keys() if k.startswith("demo_")]
    return max(ids, default=-1) + 1


def _write_demo(g: h5py.Group, ep: Episode) -> None:
    t = ep.length
    g.attrs["num_samples"] = t
    g.attrs["success"] = ep.success
    g.attrs["terminated"] = ep.terminated
    g.attrs["truncated"] = ep.truncated
    g.attrs["task"] = ep.task
    g.attrs["policy_id"] = str(ep.meta.get("policy_id", ""))
    g.attrs["meta"] = json.dumps(ep.meta, default=str)
    for group, sl in (("obs", slice(0, t)), ("next_obs", slice(1, t + 1))):
        obs = g.create_group(group)
        for cam, frames in ep.obs.items():
            obs.create_dataset(cam + IMAGE_SUFFIX, data=frames[sl], chunks=(1, *frames.shape[1:]), **_COMPRESSION)
        obs.create_dataset("agent_pos", data=ep.state[sl])
        obs.create_dataset("environment_state", data=ep.env_state[sl])
    g.create_dataset("actions", data=ep.actions)
    g.create_dataset("rewards", data=ep.rewards)
    dones = np.zeros(t, np.int64)
    if t and ep.terminated:
        dones[-1] = 1
    g.create_dataset("dones", data=dones)
    g.create_dataset("states", data=ep.sim_states[:t])
    g.create_dataset("final_state", data=ep.sim_states[t] if ep.sim_states.shape[1] else np.zeros(0))
    g.create_dataset("intervention", data=ep.intervention)


def _open_checked(path: Path) -> h5py.File:
    if not path.exists():
        raise FileNotFoundError(f"no dataset at {path}; record one with `wmsuite collect --out {path}`")
    if not h5py.is_hdf5(path):
        raise DatasetError(f"{path} is not an HDF5 file; expected a robomimic-format dataset (data/demo_i/...)")
    f = h5py.File(path, "r")
    if "data" not in f:
        keys = list(f.keys())
        f.close()
        raise DatasetError(f"{path} has no 'data' group: not a robomimic-format dataset (keys: {keys})")
    return f


class EpisodeFile:
    """Lazy, read-only access to the episodes of one robomimic-format file.

        with EpisodeFile("data/pushcube.hdf5") as f:
            ep = f[0]                  # Episode
            f.env_args, len(f), f.keys
    """

    def __init__(self, path: str | Path, filter_key: str | None = None) -> None:
        self.path = Path(path)
        self._f = _open_checked(self.path)
        data = self._f["data"]
        keys = sorted((k for k in data.keys() if k.startswith("demo_")), key=lambda k: int(k.split("_", 1)[1]))
        if filter_key is not None:
            if f"mask/{filter_key}" not in self._f:
                masks = list(self._f["mask"].keys()) if "mask" in self._f else []
                raise DatasetError(f"{self.path} has no filter key mask/{filter_key}; available: {masks}")
            wanted = {k.decode() if isinstance(k, bytes) else str(k) for k in self._f[f"mask/{filter_key}"][()]}
            keys = [k for k in keys if k in wanted]
        self.keys = keys
        self.env_args = json.loads(data.attrs.get("env_args", "{}") or "{}")
        self.is_wmsuite = "wmsuite_version" in data.attrs
        """True for files we wrote; public Robomimic/LIBERO files go through `wmsuite.data.readers`."""

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Episode:
        return self.read(self.keys[i])

    def read(self, key: str, cameras: Iterable[str] | None = None) -> Episode:
        g = self._f["data"][key]
        where = f"{self.path}:data/{key}"
        for need in ("actions", "obs", "next_obs"):
            if need not in g:
                raise DatasetError(f"{where} lacks '{need}'; robomimic-format demos need obs/, next_obs/ and actions")
        obs, nxt = g["obs"], g["next_obs"]
        cams = sorted(k[: -len(IMAGE_SUFFIX)] for k in obs.keys() if k.endswith(IMAGE_SUFFIX))
        if cameras is not None:
            missing = sorted(set(cameras) - set(cams))
            if missing:
                raise DatasetError(f"{where} has no camera(s) {missing}; it has {cams}")
            cams = list(cameras)
        if "agent_pos" not in obs:
            raise DatasetError(
                f"{where}/obs lacks 'agent_pos'; for robosuite/LIBERO files use wmsuite.data.readers with a key map"
            )

        def both(name: str) -> np.ndarray:  # (T+1, ...) = obs (T) + last next_obs
            return np.concatenate([obs[name][()], nxt[name][-1:]], axis=0)

        frames = {c: both(c + IMAGE_SUFFIX) for c in cams}
        env_state = both("environment_state") if "environment_state" in obs else None
        sim = None
        if "states" in g and g["states"].ndim == 2 and g["states"].shape[1] > 0:
            states = g["states"][()]
            final = g["final_state"][()] if "final_state" in g and g["final_state"].size else states[-1]
            sim = np.concatenate([states, final[None]], axis=0)
        a = g.attrs
        meta = json.loads(a.get("meta", "{}") or "{}")
        dones = g["dones"][()] if "dones" in g else np.zeros(len(g["actions"]))
        return Episode(
            obs=frames,
            state=both("agent_pos"),
            actions=g["actions"][()],
            rewards=g["rewards"][()] if "rewards" in g else np.zeros(len(g["actions"]), np.float32),
            success=bool(a.get("success", bool(dones[-1]) if len(dones) else False)),
            terminated=bool(a.get("terminated", bool(dones[-1]) if len(dones) else False)),
            truncated=bool(a.get("truncated", False)),
            env_state=env_state,
            intervention=g["intervention"][()] if "intervention" in g else None,
            sim_states=sim,
            task=str(a.get("task", "")),
            meta=meta,
        )

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> EpisodeFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_episodes(path: str | Path, indices: Sequence[int] | None = None, filter_key: str | None = None,
                  cameras: Iterable[str] | None = None) -> list[Episode]:
    """Read episodes (all, or those at `indices` after filtering) from a robomimic-format file."""
    with EpisodeFile(path, filter_key=filter_key) as f:
        keys = f.keys if indices is None else [f.keys[i] for i in indices]
        return [f.read(k, cameras=cameras) for k in keys]


def count_episodes(path: str | Path) -> int:
    with EpisodeFile(path) as f:
        return len(f)
