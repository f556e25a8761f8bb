"""`wmsuite convert`: episodes between HDF5 (ours, Robomimic, LIBERO) and LeRobotDataset.

    wmsuite convert --src lift/ph/image.hdf5 --filter-key train --dst data/lift_train.hdf5   # Robomimic -> ours
    wmsuite convert --src libero_spatial/..._demo.hdf5 --dst data/libero_task0.hdf5         # LIBERO -> ours
    .venv-lerobot/bin/wmsuite convert --src data/lift_train.hdf5 --dst data/lift_lerobot    # ours -> LeRobot
    .venv-lerobot/bin/wmsuite convert --src data/lift_lerobot --dst data/lift_back.hdf5     # LeRobot -> ours

The source format is detected (a folder with meta/info.json is a LeRobotDataset, an HDF5 file is
read through `wmsuite.data.load_episodes`, which detects its layout); the destination is an HDF5
file when it ends in .hdf5/.h5, a new LeRobotDataset folder otherwise (or as `--to` says).
LeRobot conversions need the `lerobot` extra, which lives in its own venv (docs/real-benchmarks.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HDF5_SUFFIXES = (".hdf5", ".h5")


@dataclass
class ConvertConfig:
    src: str = ""
    """Input: an HDF5 dataset (ours, Robomimic or LIBERO; detected) or a LeRobotDataset folder."""
    dst: str = ""
    """Output: an .hdf5 file (our robomimic-format store) or a folder for a new LeRobotDataset."""
    to: Literal["auto", "hdf5", "lerobot"] = "auto"
    """Output format; 'auto' picks hdf5 for a .hdf5/.h5 destination and lerobot otherwise."""
    filter_key: str | None = None
    """Robomimic filter key (mask/<name>, e.g. train or valid) selecting the demos of an HDF5 source."""
    limit: int | None = None
    """Convert only the first N episodes."""
    sim_states: bool = False
    """Keep simulator states from Robomimic/LIBERO sources (drops each demo's last step, whose state is not stored)."""
    fps: int = 20
    """Frames per second recorded in a LeRobotDataset (robosuite and LIBERO run at 20 Hz)."""
    use_videos: bool = False
    """Store LeRobot cameras as mp4 videos (lossy, small) instead of PNG frames in parquet (exact)."""
    vcodec: Literal["h264", "hevc", "libsvtav1"] = "h264"
    """Video codec for --use-videos (H.264 decodes everywhere, PyAV included)."""
    repo_id: str = "wmsuite/converted"
    """repo_id recorded in a LeRobotDataset (nothing is uploaded)."""
    overwrite: bool = False
    """Replace an existing HDF5 destination (a LeRobot destination must not exist)."""

    def __post_init__(self) -> None:
        if not self.src:
            raise ValueError("--src is required")
        if not self.dst:
            raise ValueError("--dst is required")
        if Path(self.src).resolve() == Path(self.dst).resolve():
            raise ValueError(f"--src and --dst are the same path: {self.src}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        if self.fps < 1:
            raise ValueError(f"fps must be >= 1, got {self.fps}")
        if self.to == "auto":
            self.to = "hdf5" if Path(self.dst).suffix.lower() in HDF5_SUFFIXES else "lerobot"
        if self.to == "hdf5" and Path(self.dst).suffix.lower() not in HDF5_SUFFIXES:
            raise ValueError(f"an HDF5 destination must end in .hdf5 or .h5, got {self.dst}")


CONFIG = ConvertConfig


def is_lerobot_dataset(path: Path) -> bool:
    return path.is_dir() and (path / "meta" / "info.json").is_file()


def run(cfg: ConvertConfig) -> int:
    from wmsuite.data import DatasetError, write_episodes
    from wmsuite.data.hdf5 import looks_like_hdf5

    src, dst = Path(cfg.src), Path(cfg.dst)
    if dst.exists() and (cfg.to == "lerobot" or not cfg.overwrite):  # before reading what may be a large source
        fix = "choose another --dst" if cfg.to == "lerobot" else "pass --overwrite to replace it or choose another --dst"
        raise FileExistsError(f"{dst} exists; {fix}")
    start = time.perf_counter()
    env_args: dict = {}
    if is_lerobot_dataset(src):
        from wmsuite.data.lerobot_io import import_lerobot

        if cfg.filter_key is not None:
            raise SystemExit("--filter-key selects Robomimic masks; a LeRobotDataset source has none: drop it")
        episodes = import_lerobot(src, limit=cfg.limit)
        source = "lerobot"
    elif src.is_file():
        if not looks_like_hdf5(src):
            raise DatasetError(f"{src} is neither an HDF5 file nor a folder; convert reads HDF5 datasets (ours, "
                               "Robomimic's, LIBERO's) and LeRobotDataset folders (with meta/info.json)")
        episodes, env_args = _read_hdf5(src, cfg)
        source = "hdf5"
    elif src.is_dir():
        raise SystemExit(f"{src} is a folder without meta/info.json: not a LeRobotDataset")
    else:
        raise SystemExit(f"no dataset at {src}")
    if not episodes:
        raise SystemExit(f"{src} holds no episodes (filter key {cfg.filter_key!r})")

    if cfg.to == "hdf5":
        write_episodes(dst, episodes, env_args={**env_args, "converted_from": str(src)}, overwrite=cfg.overwrite)
    else:
        from wmsuite.data.lerobot_io import export_lerobot

        export_lerobot(episodes, dst, repo_id=cfg.repo_id, fps=cfg.fps, use_videos=cfg.use_videos, vcodec=cfg.vcodec)
    frames = sum(ep.length + 1 for ep in episodes)
    print(f"converted {len(episodes)} episodes ({frames} frames) from {source} {src} to {cfg.to} {dst} "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


def _read_hdf5(src: Path, cfg: ConvertConfig) -> tuple[list, dict]:
    """Episodes and env_args of an HDF5 source of any layout."""
    from wmsuite.data import load_episodes
    from wmsuite.data.readers import detect, read_libero, read_robomimic

    layout, env_args = detect(src)
    if cfg.sim_states and layout != "wmsuite":  # our files always carry their states
        reader = read_libero if layout == "libero" else read_robomimic
        return reader(src, filter_key=cfg.filter_key, limit=cfg.limit, sim_states=True), env_args
    return load_episodes(src, filter_key=cfg.filter_key, limit=cfg.limit), env_args
