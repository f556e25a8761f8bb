"""Episode datasets: the robomimic-format HDF5 store, readers of public layouts, training windows.

`load_episodes(path)` is the one entry point the training commands use: it reads our own files
and, through `wmsuite.data.readers`, the public Robomimic and LIBERO layouts. Bad data is refused
where it enters: a truncated or corrupt file, a malformed demo or NaN/inf in one raises one
`DatasetError` naming the file and the demo, or with `drop_bad=True` the bad demos are skipped and
logged on the `wmsuite.data` logger.
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
from wmsuite.types import Episode, validate_finite

__all__ = [
    "DatasetError",
    "EpisodeFile",
    "append_episodes",
    "count_episodes",
    "load_episodes",
    "read_episodes",
    "validate_finite",
    "write_episodes",
]


def load_episodes(path: str | Path, filter_key: str | None = None, limit: int | None = None,
                  drop_bad: bool = False) -> list[Episode]:
    """Read the episodes of a dataset file, whatever its layout (ours, Robomimic, LIBERO).

    `limit` reads the first `limit` demos. `drop_bad=True` skips demos that are malformed or hold
    NaN/inf (one warning each, then a summary) and raises only when none is left; by default the
    first bad demo raises a `DatasetError` naming the file, the demo and the key.
    """
    from wmsuite.data import readers  # detects the layout and maps a public one's keys to ours

    return readers.read_any(path, filter_key=filter_key, limit=limit, drop_bad=drop_bad)
