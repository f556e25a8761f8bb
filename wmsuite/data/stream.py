"""Stream episodes to disk as they finish, so an interrupted run keeps every finished episode.

    with EpisodeStream("data/pushcube.hdf5", env_args) as stream:
        done = stream.done_indices()          # episodes finished by an earlier, interrupted run
        for ep in rollout(..., skip=done):
            stream.add(ep)                    # one small file per episode, written atomically
    # on exit the shards are merged into data/pushcube.hdf5 (atomically) and removed

Each finished episode lands in `<out>.parts/episode_<index>.hdf5` (temp file + rename), so killing
the process at any moment loses at most the episodes still running. Merging appends the shards in
episode-index order to the target with `append_episodes`, which never half-writes the target.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from wmsuite.data.hdf5 import append_episodes, read_episodes, write_episodes
from wmsuite.types import Episode


class EpisodeStream:
    def __init__(self, out: str | Path, env_args: dict[str, Any] | None = None) -> None:
        self.out = Path(out)
        self.env_args = env_args
        self.parts = self.out.with_name(self.out.name + ".parts")
        self.parts.mkdir(parents=True, exist_ok=True)

    def _shard(self, index: int) -> Path:
        return self.parts / f"episode_{index:07d}.hdf5"

    def done_indices(self) -> set[int]:
        """Episode indices already streamed (by this or an interrupted earlier run)."""
        return {int(p.stem.split("_")[1]) for p in self.parts.glob("episode_*.hdf5")}

    def add(self, episode: Episode) -> None:
        index = int(episode.meta.get("episode_index", len(self.done_indices())))
        write_episodes(self._shard(index), [episode], env_args=self.env_args, overwrite=True)

    def merge(self) -> int:
        """Append all shards to the target in episode order, then remove them; returns how many."""
        shards = sorted(self.parts.glob("episode_*.hdf5"))
        if shards:
            episodes = [ep for shard in shards for ep in read_episodes(shard)]
            append_episodes(self.out, episodes, env_args=self.env_args)
        shutil.rmtree(self.parts, ignore_errors=True)
        return len(shards)

    def __enter__(self) -> EpisodeStream:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.merge()
