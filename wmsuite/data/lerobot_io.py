"""LeRobotDataset (v3) export and import through the `lerobot` library (extra `lerobot`).

    export_lerobot(episodes, "data/pushcube_lerobot", fps=20)            # images stored in parquet: exact
    export_lerobot(episodes, "data/pushcube_lerobot_mp4", use_videos=True) # H.264 mp4: smaller, lossy
    episodes = import_lerobot("data/pushcube_lerobot")

lerobot 0.4.4 needs torch 2.14 + torchvision 0.29, so it lives in its own virtual environment
(`.venv-lerobot`, see docs/real-benchmarks.md); run `wmsuite convert` from there. Everything is
local: `HF_HUB_OFFLINE=1` is set before lerobot is imported (unless the caller set it).

Feature layout of an exported dataset (one LeRobot frame per observation):

    observation.images.<camera>    image or video (H, W, 3)
    observation.state              float32 (D,)   agent_pos
    observation.environment_state  float32 (E,)   only when E > 0
    action                         float32 (A,)
    next.reward, next.done, next.success          per transition; success/done on the last one
    wmsuite.final_observation      bool (1,)      True on the extra last frame of each episode
    wmsuite.sim_state              float64 (S,)   only when the episodes carry simulator states
    wmsuite.intervention           bool (1,)

An `Episode` holds T actions between T+1 observations; a LeRobot frame pairs one observation with
the action taken at it. The export writes T+1 frames, the last (`wmsuite.final_observation`) carrying
the final observation with the last action repeated (LeRobot's own padding rule) and zero reward.
Episode-level fields that have no LeRobot column (terminated, truncated, meta) go to
`meta/wmsuite_episodes.jsonl` beside LeRobot's metadata.

Import reads any LeRobotDataset: frames of our exports are mapped back exactly; for other
datasets every frame is an observation and the action of the last frame (whose outcome was not
recorded) is dropped, giving T = frames - 1. Video frames are decoded with PyAV directly (H.264,
AV1 through dav1d), so torchcodec is not needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmsuite.data.hdf5 import DatasetError
from wmsuite.types import Episode

INSTALL_HINT = (
    "lerobot is not importable in this environment; it needs torch 2.14 + torchvision 0.29, so it has its own "
    "venv: run .ci/install-extras.sh lerobot, then use .venv-lerobot/bin/wmsuite convert (docs/real-benchmarks.md)"
)
IMAGE_PREFIX = "observation.images."
FINAL = "wmsuite.final_observation"
SIM_STATE = "wmsuite.sim_state"
INTERVENTION = "wmsuite.intervention"
SIDECAR = "meta/wmsuite_episodes.jsonl"


def import_lerobot_library() -> Any:
    """Import `lerobot.datasets.lerobot_dataset` offline, or raise an ImportError naming the fix."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from lerobot.datasets import lerobot_dataset
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err
    return lerobot_dataset


def features_for(ep: Episode, use_videos: bool) -> dict[str, dict[str, Any]]:
    """LeRobot feature specs for episodes shaped like `ep`."""
    feats: dict[str, dict[str, Any]] = {}
    for cam in ep.cameras:
        feats[IMAGE_PREFIX + cam] = {"dtype": "video" if use_videos else "image",
                                     "shape": tuple(ep.obs[cam].shape[1:]), "names": ["height", "width", "channels"]}
    feats["observation.state"] = {"dtype": "float32", "shape": (ep.state.shape[1],), "names": None}
    if ep.env_state.shape[1]:
        feats["observation.environment_state"] = {"dtype": "float32", "shape": (ep.env_state.shape[1],), "names": None}
    feats["action"] = {"dtype": "float32", "shape": (ep.actions.shape[1],), "names": None}
    for key in ("next.done", "next.success", FINAL, INTERVENTION):
        feats[key] = {"dtype": "bool", "shape": (1,), "names": None}
    feats["next.reward"] = {"dtype": "float32", "shape": (1,), "names": None}
    if ep.sim_states.shape[1]:
        feats[SIM_STATE] = {"dtype": "float64", "shape": (ep.sim_states.shape[1],), "names": None}
    return feats


def export_lerobot(episodes: Sequence[Episode], root: str | Path, repo_id: str = "wmsuite/export", fps: int = 20,
                   use_videos: bool = False, vcodec: str = "h264", robot_type: str | None = None) -> Path:
    """Write `episodes` as a new LeRobotDataset at `root` (which must not exist yet).

    `use_videos=False` stores PNG frames inside the parquet files (exact round trip);
    `use_videos=True` encodes one mp4 per camera with `vcodec` ('h264', 'hevc' or 'libsvtav1').
    """
    if not episodes:
        raise ValueError("no episodes to export")
    root = Path(root)
    if root.exists():
        raise FileExistsError(f"{root} exists; LeRobotDataset.create writes a new dataset folder, choose another path")
    if fps < 1:
        raise ValueError(f"fps must be >= 1, got {fps}")
    feats = features_for(episodes[0], use_videos)
    for i, ep in enumerate(episodes):
        if features_for(ep, use_videos) != feats:
            raise ValueError(f"episode {i} has different cameras or dimensions than episode 0; "
                             "a LeRobotDataset has one feature layout")
    lrd = import_lerobot_library()
    ds = lrd.LeRobotDataset.create(repo_id=repo_id, fps=fps, features=feats, root=root, robot_type=robot_type,
                                   use_videos=use_videos, vcodec=vcodec)
    sidecar = []
    try:
        for index, ep in enumerate(episodes):
            for frame in _frames(ep):
                ds.add_frame(frame)
            ds.save_episode()
            sidecar.append({"episode_index": index, "success": ep.success, "terminated": ep.terminated,
                            "truncated": ep.truncated, "meta": ep.meta})
    finally:
        ds.finalize()
    (root / SIDECAR).write_text("".join(json.dumps(row, default=str) + "\n" for row in sidecar))
    return root


def _frames(ep: Episode) -> list[dict[str, Any]]:
    """T+1 LeRobot frames of one episode (the last one holds the final observation)."""
    t = ep.length
    frames = []
    for i in range(t + 1):
        last = i == t
        frame: dict[str, Any] = {IMAGE_PREFIX + cam: ep.obs[cam][i] for cam in ep.cameras}
        frame["observation.state"] = ep.state[i]
        if ep.env_state.shape[1]:
            frame["observation.environment_state"] = ep.env_state[i]
        frame["action"] = ep.actions[min(i, t - 1)]
        frame["next.reward"] = np.array([0.0 if last else ep.rewards[i]], np.float32)
        closing = i == t - 1  # the transition into the final observation
        frame["next.done"] = np.array([closing and (ep.terminated or ep.truncated)], bool)
        frame["next.success"] = np.array([closing and ep.success], bool)
        frame[FINAL] = np.array([last], bool)
        frame[INTERVENTION] = np.array([False if last else bool(ep.intervention[i])], bool)
        if ep.sim_states.shape[1]:
            frame[SIM_STATE] = ep.sim_states[i]
        frame["task"] = ep.task
        frames.append(frame)
    return frames


def import_lerobot(root: str | Path, repo_id: str = "wmsuite/import", episodes: Sequence[int] | None = None,
                   limit: int | None = None) -> list[Episode]:
    """Read the episodes of a local LeRobotDataset (ours or anyone's) as `Episode`s.

    `episodes` picks them by index (all when None), `limit` keeps the first `limit` of those. An
    episode that is malformed or holds NaN/inf raises one `DatasetError` naming the dataset and it.
    """
    root = Path(root)
    if not (root / "meta" / "info.json").is_file():
        raise FileNotFoundError(f"no LeRobotDataset at {root} (missing meta/info.json)")
    lrd = import_lerobot_library()
    ds = lrd.LeRobotDataset(repo_id, root=root)
    meta = ds.meta
    feats = meta.features
    for need in ("observation.state", "action"):
        if need not in feats:
            raise DatasetError(f"{root}: LeRobotDataset lacks feature {need!r}; it has {sorted(feats)}")
    cams = {_camera_name(k): k for k in meta.camera_keys}
    sidecar = _read_sidecar(root)
    # arrow for numbers (datasets' numpy formatter casts float64 to float32), numpy for the decoded images
    hf_arrow = ds.hf_dataset.with_format("arrow")
    hf_images = ds.hf_dataset.select_columns(meta.image_keys).with_format("numpy") if meta.image_keys else None
    wanted = list(range(meta.total_episodes) if episodes is None else episodes)[:limit]
    out = []
    videos = _VideoCache()
    for e in wanted:
        if not 0 <= e < meta.total_episodes:
            raise IndexError(f"episode {e} out of range: {root} holds {meta.total_episodes} episodes")
        try:
            out.append(_episode(root, ds, int(e), cams, sidecar, hf_arrow, hf_images, videos))
        except (ValueError, KeyError, IndexError, TypeError, OSError) as err:  # DatasetError included
            raise DatasetError(f"{root}: episode {e}: {' '.join(str(err).split())[:300]}") from err
    return out


def _episode(root: Path, ds: Any, e: int, cams: dict[str, str], sidecar: dict[int, dict[str, Any]],
             hf_arrow: Any, hf_images: Any, videos: _VideoCache) -> Episode:
    """Episode `e` of an open LeRobotDataset."""
    meta = ds.meta
    row = meta.episodes[e]
    lo, hi = int(row["dataset_from_index"]), int(row["dataset_to_index"])
    cols = _numeric_columns(hf_arrow[lo:hi], [k for k in meta.features if k not in meta.camera_keys])
    ours = FINAL in meta.features
    frames = {}
    for cam, key in cams.items():
        if key in meta.video_keys:
            path = root / meta.get_video_file_path(e, key)
            frames[cam] = videos.frames(path, float(row[f"videos/{key}/from_timestamp"]), hi - lo, meta.fps)
        else:
            frames[cam] = _as_uint8_frames(hf_images[lo:hi][key])
    n_act = hi - lo - 1  # ours: the final frame's action is padding; others: its outcome is unseen
    extra = sidecar.get(e, {})
    tasks = row["tasks"]
    task = str(tasks[0]) if len(tasks) else ""
    success = bool(np.any(cols["next.success"])) if "next.success" in cols else bool(extra.get("success", False))
    done = bool(np.any(cols["next.done"])) if "next.done" in cols else False
    sims = np.asarray(cols[SIM_STATE], np.float64) if SIM_STATE in cols else None
    return Episode(
        obs=frames,
        state=np.asarray(cols["observation.state"], np.float32),
        env_state=(np.asarray(cols["observation.environment_state"], np.float32)
                   if "observation.environment_state" in cols else None),
        actions=np.asarray(cols["action"], np.float32)[:n_act],
        rewards=(np.asarray(cols["next.reward"], np.float32).reshape(-1)[:n_act] if "next.reward" in cols
                 else np.zeros(n_act, np.float32)),
        success=bool(extra.get("success", success)),
        terminated=bool(extra.get("terminated", done and success)),
        truncated=bool(extra.get("truncated", done and not success)),
        intervention=(np.asarray(cols[INTERVENTION]).reshape(-1)[:n_act] if INTERVENTION in cols else None),
        sim_states=sims,
        task=task,
        meta={**extra.get("meta", {}), "source": "lerobot", "lerobot_episode_index": e,
              "lerobot_root": str(root), **({} if ours else {"dropped_steps": 1})},
    )


def _numeric_columns(table: Any, keys: list[str]) -> dict[str, np.ndarray]:
    """Columns of a pyarrow table as numpy arrays in their stored dtype: (N,) scalars or (N, D) vectors."""
    out = {}
    for key in keys:
        if key not in table.column_names:
            continue
        values = table.column(key).to_pylist()
        out[key] = np.asarray(values)
    return out


def _camera_name(key: str) -> str:
    """'observation.images.front' -> 'front'; 'observation.image' (single-camera datasets) -> 'image'."""
    return key[len(IMAGE_PREFIX):] if key.startswith(IMAGE_PREFIX) else key.rsplit(".", 1)[-1]


def _as_uint8_frames(column: Any) -> np.ndarray:
    """A numpy-formatted image column -> uint8 (T, H, W, 3)."""
    images = [np.asarray(f) for f in column]
    if not images or len({(f.dtype, f.shape) for f in images}) != 1:
        raise DatasetError(f"expected {len(images)} images of one size and dtype in the parquet image column, got "
                           f"{sorted({f'{f.dtype}{f.shape}' for f in images})[:4]}")
    frames = np.stack(images)
    if frames.dtype != np.uint8:
        raise DatasetError(f"expected uint8 images from the parquet image column, got {frames.dtype}")
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise DatasetError(f"expected (T, H, W, 3) RGB frames, got {frames.shape}")
    return frames


def _read_sidecar(root: Path) -> dict[int, dict[str, Any]]:
    """episode_index -> our episode-level fields ({} when the dataset is not ours)."""
    path = root / SIDECAR
    if not path.exists():
        return {}
    out = {}
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path} is not UTF-8 text ({err.reason}): it is corrupt; re-export the dataset") from err
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as err:
            raise DatasetError(f"{path}:{n} is not valid JSON ({' '.join(str(err).split())[:200]})") from err
        index = row.get("episode_index") if isinstance(row, dict) else None
        if type(index) is not int or not isinstance(row.get("meta", {}), dict):
            raise DatasetError(f"{path}:{n} should be an object with an integer episode_index and a meta object")
        out[index] = row
    return out


class _VideoCache:
    """Decode each mp4 once with PyAV and hand out the frames of one episode (v3 packs many per file)."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._frames: np.ndarray | None = None  # (N, H, W, 3) uint8

    def frames(self, path: Path, from_timestamp: float, count: int, fps: int) -> np.ndarray:
        if path != self._path:
            import av

            with av.open(str(path)) as container:
                self._frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
            self._path = path
        assert self._frames is not None
        start = int(round(from_timestamp * fps))
        clip = self._frames[start:start + count]
        if len(clip) != count:
            raise ValueError(f"{path} holds {len(self._frames)} frames; episode wants {count} from frame {start}")
        return clip
