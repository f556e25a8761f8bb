"""Episode datasets: the robomimic-format HDF5 store, readers of public layouts, training windows.

`load_episodes(path)` is the one entry point the training commands use: it reads our own files
and, through `wmsuite.data.readers`, the public Robomimic and LIBERO layouts.
"""

from __future__ import annotations

from pathlib import Path

from wmsuite.data.hdf5 import (
    DatasetError,
    EpisodeFile,
    append_episodes,
    count_episodes,
    read_episodes,
    write_episodes,
)
from wmsuite.types import Episode

__all__ = [
    "DatasetError",
    "EpisodeFile",
    "append_episodes",
    "count_episodes",
    "load_episodes",
    "read_episodes",
    "write_episodes",
]


def load_episodes(path: str | Path, filter_key: str | None = None, limit: int | None = None) -> list[Episode]:
    """Read every episode of a dataset file, whatever its layout (ours, Robomimic, LIBERO)."""
    with EpisodeFile(path, filter_key=filter_key) as f:
        if f.is_wmsuite:
            return [f.read(k) for k in f.keys[:limit]]
    from wmsuite.data import readers  # a public layout: map its keys to ours

    episodes = readers.read_any(path, filter_key=filter_key)
    return episodes if limit is None else episodes[:limit]
