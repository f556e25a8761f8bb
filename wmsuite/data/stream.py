"""Stream episodes to disk as they finish, so an interrupted run keeps every finished episode.

    with EpisodeStream("data/pushcube.hdf5", env_args) as stream:
        done = stream.done_indices()          # episodes finished by an earlier, interrupted run
        for ep in rollout(..., skip=done):
            stream.add(ep)                    # one small file per episode, written atomically
    # on exit the shards are merged into data/pushcube.hdf5 (atomically) and removed

Each finished episode lands in `<out>.parts/episode_<index>.hdf5` (temp file + rename), so killing
the process at any moment loses at most the episodes still running. Merging appends the shards in
episode-index order to the target with `append_episodes`, which never half-writes the target.

Crash-safe merge: with a `run_id`, every episode's meta carries it (`meta["collect_run"]`), so the
target itself records which of this run's episodes it holds. A merge appends only the shards the
target lacks, and the shards are removed only after the target was replaced (the run record last),
so a kill at any point neither loses nor duplicates an episode: the rerun finds them merged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py

from wmsuite.data.hdf5 import append_episodes, read_episodes, write_episodes
from wmsuite.types import Episode

RUN_KEY = "collect_run"


class EpisodeStream:
    def __init__(self, out: str | Path, env_args: dict[str, Any] | None = None, run_id: str | None = None) -> None:
        self.out = Path(out)
        self.env_args = env_args
        self.run_id = run_id
        self.parts = self.out.with_name(self.out.name + ".parts")
        self.parts.mkdir(parents=True, exist_ok=True)

    def _shard(self, index: int) -> Path:
        return self.parts / f"episode_{index:07d}.hdf5"

    def done_indices(self) -> set[int]:
        """Episode indices already streamed (by this or an interrupted earlier run)."""
        return {int(p.stem.split("_")[1]) for p in self.parts.glob("episode_*.hdf5")}

    def merged_indices(self) -> set[int]:
        """Episode indices of this run (`run_id`) that the target file already holds."""
        return merged_indices(self.out, self.run_id) if self.run_id is not None else set()

    def add(self, episode: Episode) -> None:
        index = int(episode.meta.get("episode_index", len(self.done_indices())))
        if self.run_id is not None:
            episode.meta[RUN_KEY] = self.run_id
        write_episodes(self._shard(index), [episode], env_args=self.env_args, overwrite=True)

    def merge(self) -> int:
        """Append the shards the target lacks to it in episode order, then remove them (and the
        parts folder, its files last); returns how many were appended."""
        merged = self.merged_indices()
        shards = sorted(self.parts.glob("episode_*.hdf5"))
        todo = [s for s in shards if int(s.stem.split("_")[1]) not in merged]
        if todo:
            append_episodes(self.out, [ep for shard in todo for ep in read_episodes(shard)], env_args=self.env_args)
        for shard in shards:
            shard.unlink()
        for rest in sorted(self.parts.iterdir(), key=lambda p: p.name == "run.json"):  # the record last
            rest.unlink()
        self.parts.rmdir()
        return len(todo)

    def __enter__(self) -> EpisodeStream:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.merge()


def merged_indices(path: str | Path, run_id: str) -> set[int]:
    """Episode indices of the collection `run_id` that the file at `path` holds (none if it is missing)."""
    return held_runs(path).get(run_id, set())


def held_runs(path: str | Path) -> dict[str, set[int]]:
    """Every collection id the file at `path` holds, with the episode indices it holds of each."""
    path = Path(path)
    if not path.exists():
        return {}
    found: dict[str, set[int]] = {}
    with h5py.File(path, "r") as f:
        for demo in f["data"].values() if "data" in f else ():
            meta = json.loads(demo.attrs.get("meta", "{}") or "{}")
            if RUN_KEY in meta and "episode_index" in meta:
                found.setdefault(meta[RUN_KEY], set()).add(int(meta["episode_index"]))
    return found
