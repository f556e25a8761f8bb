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

Reading refuses bad data where it enters: whatever h5py or numpy raise on a truncated or corrupt
file, a malformed demo or NaN/inf in it, the caller gets one `DatasetError` naming the file and the
demo (`data/x.hdf5:data/demo_3: actions contains NaN or inf at step 17`). `drop_bad=True` skips
such demos instead, logging each on the `wmsuite.data` logger.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from wmsuite.types import Episode, validate_finite

FORMAT_VERSION = 1
IMAGE_SUFFIX = "_image"
_COMPRESSION = {"compression": "lzf"}
log = logging.getLogger("wmsuite.data")

H5_ERRORS = (OSError, RuntimeError, KeyError, IndexError, TypeError, ValueError)
"""What h5py and numpy raise on a truncated or corrupt file or an array of the wrong kind."""


class DatasetError(ValueError):
    """A dataset file is not HDF5, is truncated or corrupt, lacks keys we need or holds bad values."""


def write_episodes(path: str | Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None = None,
                   overwrite: bool = False) -> Path:
    """Write a new file holding `episodes` (refuses to replace an existing file unless `overwrite`)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it or choose another path "
                              "(from Python: overwrite=True, or append_episodes() to add to it)")
    return _atomic_update(path, episodes, env_args, start_from=None)


def append_episodes(path: str | Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None = None) -> Path:
    """Add `episodes` after those already in `path` (creating it if missing), atomically."""
    path = Path(path)
    if not path.exists():
        return _atomic_update(path, episodes, env_args, start_from=None)
    open_checked(path).close()  # a clear error if the existing file is not ours to extend
    return _atomic_update(path, episodes, env_args, start_from=path)


def _atomic_update(path: Path, episodes: Sequence[Episode], env_args: dict[str, Any] | None,
                   start_from: Path | None) -> Path:
    for i, ep in enumerate(episodes):  # arrays are mutable: an episode may have gone bad since it was made
        reason = validate_finite(ep)
        if reason is not None:
            raise ValueError(f"episode {i} {reason}; refusing to write it to {path}")
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
            start = max((int(k[5:]) for k in demo_keys(data)), default=-1) + 1
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


# ---- reading: every failure becomes one DatasetError naming where ---------------------------------------

def open_checked(path: Path) -> h5py.File:
    """Open a robomimic-format HDF5 file read-only, or raise one error that says what is wrong with it."""
    if not path.exists():
        raise FileNotFoundError(f"no dataset at {path}; record one with `wmsuite collect --out {path}` "
                                "or convert one with `wmsuite convert`")
    if path.is_dir():
        raise DatasetError(f"{path} is a folder; expected a robomimic-format HDF5 file (data/demo_<i>/...)")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{path} is not readable (permission denied)")
    if not looks_like_hdf5(path):
        raise DatasetError(f"{path} is not an HDF5 file; expected a robomimic-format dataset (data/demo_<i>/...): "
                           "ours, Robomimic's or LIBERO's")
    try:
        f = h5py.File(path, "r")
    except PermissionError as err:
        raise PermissionError(f"{path} is not readable ({one_line(err)})") from err
    except H5_ERRORS as err:
        raise DatasetError(f"{path}: {describe(err)}") from err
    try:
        with reading(str(path)):
            data = f.get("data")
            if isinstance(data, h5py.Group):
                return f
            keys = list(f.keys())
        if data is not None:
            raise DatasetError(f"{path}: 'data' is a {type(data).__name__}, not the group of demos; the file is corrupt")
        raise DatasetError(f"{path} has no 'data' group: not a robomimic-format dataset (keys: {keys[:10]})")
    except BaseException:
        f.close()
        raise


def looks_like_hdf5(path: Path) -> bool:
    """Whether h5py can open the file or it starts with HDF5's signature (a truncated one cannot be opened)."""
    if h5py.is_hdf5(path):
        return True
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89HDF\r\n\x1a\n"


@contextmanager
def reading(where: str) -> Iterator[None]:
    """Re-raise what h5py and numpy raise while reading as one `DatasetError` that starts with `where`."""
    try:
        yield
    except DatasetError:
        raise
    except H5_ERRORS as err:
        raise DatasetError(f"{where}: {describe(err)}") from err


def describe(err: BaseException) -> str:
    """One line saying what a library error means for the file being read."""
    if isinstance(err, (OSError, RuntimeError)):  # HDF5's own failures: bad checksums, broken links, short reads
        return f"unreadable ({one_line(err)}); the file is truncated or corrupt: re-copy or re-record it"
    if type(err) is ValueError:  # our own checks (Episode's) say it all
        return one_line(err)
    return f"malformed ({type(err).__name__}: {one_line(err)})"


def one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def demo_keys(data: h5py.Group) -> list[str]:
    """The `demo_<i>` members of `data`, in numeric order."""
    keys = [k for k in data.keys() if k.startswith("demo_") and k[5:].isdigit()]
    return sorted(keys, key=lambda k: int(k[5:]))


def member(group: h5py.Group, name: str, where: str, kind: type = h5py.Group) -> Any:
    """`group[name]`, refused unless it is there and of `kind` (h5py.Group or h5py.Dataset)."""
    node = group.get(name)
    if node is None:
        raise DatasetError(f"{where} lacks '{name}'")
    if not isinstance(node, kind):
        raise DatasetError(f"{where}/{name} is not {'a group' if kind is h5py.Group else 'an array'}")
    return node


def read_array(group: h5py.Group, name: str, where: str) -> np.ndarray:
    """The array at `group[name]`, refused unless it holds real numbers (bool, int or float)."""
    arr = np.asarray(member(group, name, where, h5py.Dataset)[()])
    if arr.dtype.kind not in "biuf":
        raise DatasetError(f"{where}/{name} holds {arr.dtype} values, not real numbers")
    return arr


def json_attr(attrs: h5py.AttributeManager, name: str, where: str) -> dict[str, Any]:
    """A JSON object stored as a string attribute ({} when absent or empty)."""
    text = attr_text(attrs, name, where)
    try:
        value = json.loads(text or "{}")
    except ValueError as err:
        raise DatasetError(f"{where}: attribute {name!r} is not valid JSON ({one_line(err)})") from err
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: attribute {name!r} should hold a JSON object, got {type(value).__name__}")
    return value


def attr_text(attrs: h5py.AttributeManager, name: str, where: str) -> str:
    """A string attribute ('' when absent); bytes are decoded as UTF-8, anything else is refused."""
    value = attrs.get(name, "")
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError as err:
            raise DatasetError(f"{where}: attribute {name!r} is not UTF-8 text ({err.reason})") from err
    if not isinstance(value, str):
        raise DatasetError(f"{where}: attribute {name!r} should be a string, got {type(value).__name__}")
    return value


def _attr_flag(attrs: h5py.AttributeManager, name: str, default: bool, where: str) -> bool:
    value = attrs.get(name, default)
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return bool(value)
    raise DatasetError(f"{where}: attribute {name!r} should be a boolean, got {type(value).__name__}")


def read_demos(read: Callable[[str], Episode], keys: Sequence[str], path: str | Path,
               drop_bad: bool = False) -> list[Episode]:
    """`read(key)` for each key; with `drop_bad`, demos that raise `DatasetError` are logged and skipped.

    Every demo dropped gives one warning with its reason, and a summary follows; a file whose every
    demo is bad still raises, since an empty dataset would only fail later with a vaguer message.
    """
    episodes, errors = [], []
    for key in keys:
        try:
            episodes.append(read(key))
        except DatasetError as err:
            if not drop_bad:
                raise
            log.warning("dropped %s", err)
            errors.append(err)
    if errors:
        log.warning("dropped %d of %d episodes of %s (non-finite or malformed)", len(errors), len(keys), path)
        if not episodes:
            raise DatasetError(f"{path}: all {len(keys)} episodes are non-finite or malformed; the first: {errors[0]}")
    return episodes


class EpisodeFile:
    """Lazy, read-only access to the episodes of one robomimic-format file.

        with EpisodeFile("data/pushcube.hdf5") as f:
            ep = f[0]                  # Episode
            f.env_args, len(f), f.keys
    """

    def __init__(self, path: str | Path, filter_key: str | None = None) -> None:
        self.path = Path(path)
        self._f = open_checked(self.path)
        try:
            with reading(str(self.path)):
                self._index(filter_key)
        except BaseException:
            self._f.close()
            raise

    def _index(self, filter_key: str | None) -> None:
        data = self._f["data"]
        keys = demo_keys(data)
        if filter_key is not None:
            if f"mask/{filter_key}" not in self._f:
                masks = list(self._f["mask"].keys()) if isinstance(self._f.get("mask"), h5py.Group) else []
                raise DatasetError(f"{self.path} has no filter key mask/{filter_key}; available: {masks}")
            mask = member(self._f, f"mask/{filter_key}", str(self.path), h5py.Dataset)[()]
            wanted = {k.decode() if isinstance(k, bytes) else str(k) for k in np.atleast_1d(mask)}
            keys = [k for k in keys if k in wanted]
        self.keys = keys
        self.env_args = json_attr(data.attrs, "env_args", f"{self.path}:data")
        self.is_wmsuite = "wmsuite_version" in data.attrs
        """True for files we wrote; public Robomimic/LIBERO files go through `wmsuite.data.readers`."""

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Episode:
        return self.read(self.keys[i])

    def read(self, key: str, cameras: Iterable[str] | None = None) -> Episode:
        """The demo `data/<key>`; any problem with it is one `DatasetError` naming the file and the demo."""
        where = f"{self.path}:data/{key}"
        with reading(where):
            return self._read(member(self._f["data"], key, f"{self.path}:data"), where, cameras)

    def _read(self, g: h5py.Group, where: str, cameras: Iterable[str] | None) -> Episode:
        for need in ("actions", "obs", "next_obs"):
            if need not in g:
                raise DatasetError(f"{where} lacks '{need}'; robomimic-format demos need obs/, next_obs/ and actions")
        obs, nxt = member(g, "obs", where), member(g, "next_obs", where)
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
            return np.concatenate([read_array(obs, name, f"{where}/obs"),
                                   read_array(nxt, name, f"{where}/next_obs")[-1:]], axis=0)

        frames = {c: both(c + IMAGE_SUFFIX) for c in cams}
        env_state = both("environment_state") if "environment_state" in obs else None
        actions = read_array(g, "actions", where)
        sim = None
        states = g.get("states")
        if isinstance(states, h5py.Dataset) and states.ndim == 2 and states.shape[1] > 0:
            states = read_array(g, "states", where)
            final = read_array(g, "final_state", where) if "final_state" in g else np.zeros(0)
            sim = np.concatenate([states, (final if final.size else states[-1])[None]], axis=0)
        a = g.attrs
        dones = read_array(g, "dones", where).reshape(-1) if "dones" in g else np.zeros(0)
        done = bool(dones[-1]) if len(dones) else False
        return Episode(
            obs=frames,
            state=both("agent_pos"),
            actions=actions,
            rewards=read_array(g, "rewards", where) if "rewards" in g else np.zeros(actions.shape[:1], np.float32),
            success=_attr_flag(a, "success", done, where),
            terminated=_attr_flag(a, "terminated", done, where),
            truncated=_attr_flag(a, "truncated", False, where),
            env_state=env_state,
            intervention=read_array(g, "intervention", where) if "intervention" in g else None,
            sim_states=sim,
            task=attr_text(a, "task", where),
            meta=json_attr(a, "meta", where),
        )

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> EpisodeFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_episodes(path: str | Path, indices: Sequence[int] | None = None, filter_key: str | None = None,
                  cameras: Iterable[str] | None = None, drop_bad: bool = False) -> list[Episode]:
    """Read episodes (all, or those at `indices` after filtering) from a robomimic-format file.

    `drop_bad` skips (and logs) demos that are malformed or hold NaN/inf instead of raising.
    """
    with EpisodeFile(path, filter_key=filter_key) as f:
        keys = f.keys if indices is None else [f.keys[i] for i in indices]
        return read_demos(lambda k: f.read(k, cameras=cameras), keys, path, drop_bad)


def count_episodes(path: str | Path) -> int:
    """How many demos `path` holds (their contents are not read)."""
    with EpisodeFile(path) as f:
        return len(f)
