"""The rollout engine: any Policy against any Gymnasium VectorEnv, recording `Episode`s.

    env = make_vector_env("wmsuite/PushCube-v0", num_envs=4)
    for ep in rollout(policy, env, RolloutConfig(episodes=50, seed=0)):
        ...                                   # streamed as each episode finishes

- Episode i is reset with seed `cfg.seed + i`, whatever sub-environment runs it, so a run is
  reproducible and an interrupted run can redo exactly the episodes it lacks (`skip=`).
- The vector env runs with autoreset disabled: finished sub-environments are reset explicitly with
  the next episode's seed (`options={"reset_mask": ...}`), or left idle once every episode is handed out.
- Action chunks: an env whose single action space is 2-D `(H, A)` takes a whole chunk per step
  (a world model); otherwise the engine keeps a queue per sub-environment and feeds the chunk one
  action at a time, re-planning when the queue runs dry (every `n_action_steps` actions, or every
  `act_every` actions when that is set). A policy whose chunks are shorter than what is needed (a
  one-action expert driving a world model) is queried again on the same observation until there are
  enough actions, so every policy runs under the same open-loop protocol in both kinds of env.
- Policies with per-env memory (they define `reset_envs(indices)`) are called on the rows that need a
  chunk with `env_indices=` naming their sub-environments, where `predict_action_chunk` takes it (the
  scripted experts and wrappers around them do); others are called on the full batch, so row i is
  sub-environment i, and plan (and remember) chunks for rows that throw them away when the sub-envs
  are out of step. Stateless policies are called only on the rows that need a chunk.
- `rollout(..., intervene=Intervention(expert, threshold, steps))` lets an expert take over where the
  policy drifts and hand back after its steps (intervene.py); each episode's `intervention` mask
  marks the expert's actions.
- `episode_rng=True` makes every episode's actions a function of its seed alone, whichever episodes
  share its batch: stateless policies are then queried one row at a time with Python's, numpy's and
  torch's global RNGs seeded from (seed, episode index, query number), and a stateful policy whose
  `reset_envs` takes `episodes=` gets each new episode's index, from which it draws that episode's
  randomness (the scripted experts do). A resumed collection then records exactly the episodes an
  uninterrupted one does.
"""

from __future__ import annotations

import importlib
import inspect
import random
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from wmsuite.policy import query_chunk, takes_env_indices
from wmsuite.rollout.intervene import Intervention
from wmsuite.rollout.ray_env import Backend
from wmsuite.rollout.recorder import Recorder, info_row, row
from wmsuite.types import Episode


@dataclass
class RolloutConfig:
    episodes: int = 10
    """Number of episodes to finish."""
    seed: int = 0
    """Episode i is reset with seed `seed + i`."""
    n_action_steps: int | None = None
    """Actions executed from each predicted chunk before re-planning (default: the policy's
    `n_action_steps` attribute if it has one, else the whole chunk)."""
    act_every: int | None = None
    """Query the policy every `act_every` steps and execute exactly that many actions open-loop (the
    chunk's first ones, or repeated queries on the same observation when its chunks are shorter).
    Chunk envs always act every chunk; set this to their chunk length on the real env to compare the
    two under the same control protocol."""
    record_frames: bool = True
    """Keep camera frames in the recorded episodes (turn off for fast success-rate-only runs)."""
    progress: bool = True
    """Show a progress bar over finished episodes."""
    policy_id: str = ""
    """Stored in each episode's `meta["policy_id"]`."""
    env_id: str = ""
    """Stored in each episode's `meta["env_id"]`."""
    extra_meta: dict[str, Any] = field(default_factory=dict)
    """Merged into each episode's `meta`."""
    episode_rng: bool = False
    """Seed the policy's randomness per episode (see the module docstring): slower for batched
    learned policies, needed where a resumed run must reproduce an uninterrupted one."""

    def __post_init__(self) -> None:
        if self.episodes < 0:
            raise ValueError(f"episodes must be >= 0, got {self.episodes}")
        if self.n_action_steps is not None and self.n_action_steps < 1:
            raise ValueError(f"n_action_steps must be >= 1, got {self.n_action_steps}")
        if self.act_every is not None and self.act_every < 1:
            raise ValueError(f"act_every must be >= 1, got {self.act_every}")


def make_vector_env(env_id: str, num_envs: int = 1, asynchronous: bool = True,
                    env_kwargs: dict[str, Any] | None = None, backend: Backend | None = None,
                    after_success: int = 0) -> gym.vector.VectorEnv:
    """A VectorEnv with autoreset disabled; async workers create their env inside the worker.

    `env_id` may carry the module that registers it (`"pkg.module:Ns/Name-v0"`); wmsuite's own ids
    (`wmsuite/...`) get `wmsuite.envs` as that module, so workers started by spawn find them too.
    `backend`: Backend("ray", workers=W) puts the sub-environments in Ray actors (ray_env.py).
    `after_success` > 0: episodes go on that many steps past their first success (EndAfterSuccess).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if after_success < 0:
        raise ValueError(f"after_success must be >= 0, got {after_success}")
    full_id = checked_env_id(env_id)
    factory = _EnvFactory(full_id, dict(env_kwargs or {}), after_success)
    if backend is not None and backend.kind == "ray":
        from wmsuite.rollout.ray_env import RayVectorEnv

        return RayVectorEnv(factory, num_envs, backend.workers, backend.address)
    fns = [factory] * num_envs  # stateless: each call makes a fresh env
    mode = gym.vector.AutoresetMode.DISABLED
    if asynchronous and num_envs > 1:
        return gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode, context="spawn")
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


def checked_env_id(env_id: str) -> str:
    """`env_id` with the module that registers it (`pkg.module:Ns/Name-v0`; `wmsuite.envs` for
    wmsuite's own ids, so spawned workers find them too), after checking in this process that
    Gymnasium knows it; a ValueError with Gymnasium's near matches otherwise."""
    full_id = env_id if ":" in env_id or not env_id.startswith("wmsuite/") else f"wmsuite.envs:{env_id}"
    try:
        env_spec(full_id)
    except (gym.error.Error, ImportError) as err:
        raise ValueError(f"unknown env id {env_id!r} ({err})") from err
    return full_id


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """Gymnasium's spec of `env_id`, in its 'pkg.module:Ns/Name-v0' form importing the module first,
    as gym.make does; Gymnasium's error (or the ImportError) where it is unknown."""
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    return gym.spec(name)


@dataclass
class _EnvFactory:
    """Picklable env constructor for spawned workers."""

    env_id: str
    kwargs: dict[str, Any]
    after_success: int = 0

    def __call__(self) -> gym.Env:
        if not self.after_success:
            return gym.make(self.env_id, **self.kwargs)
        try:
            env = gym.make(self.env_id, **self.kwargs, terminate_on_success=False)
        except TypeError as err:
            raise ValueError(f"{self.env_id} takes no terminate_on_success keyword, so its episodes cannot go on "
                             f"past their success; drop --after-success for it ({err})") from err
        return EndAfterSuccess(env, self.after_success)


class EndAfterSuccess(gym.Wrapper):
    """Ends an episode `steps` steps after the first one whose info["is_success"] holds (the env must
    not end it there itself: make it with terminate_on_success=False). A world model's data then shows
    what a done task looks like (Lift: the cube held up, not just leaving the table on the last frame);
    the recorder notes where success began (Episode.success_from)."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        super().__init__(env)
        self.steps, self._since = int(steps), None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._since = None
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._since is not None:
            self._since += 1
        elif info.get("is_success", False):
            self._since = 0
        return obs, reward, terminated or (self._since is not None and self._since >= self.steps), truncated, info


def rollout(policy: Any, env: gym.vector.VectorEnv, cfg: RolloutConfig,
            skip: Iterable[int] = (), on_step: Callable[[dict[str, Any]], None] | None = None,
            intervene: Intervention | None = None) -> Iterator[Episode]:
    """Yield finished episodes (in finishing order) until every index in range(cfg.episodes) not in
    `skip` is done. `on_step` receives each step's batched `info` (trust signals, logging).
    `intervene`: an expert that takes over where the policy drifts (intervene.py); the actions it
    executes are True in each episode's `intervention` mask."""
    todo = deque(i for i in range(cfg.episodes) if i not in set(skip))
    if not todo:
        return
    n = env.num_envs
    chunk_env = len(env.single_action_space.shape) == 2
    stateful = hasattr(policy, "reset_envs")
    # how a policy with per-env memory is asked: the rows that need a chunk (by env_indices), or all rows
    memory = ("rows" if takes_env_indices(policy) else "batch") if stateful else "none"
    takes_index = stateful and cfg.episode_rng and "episodes" in inspect.signature(policy.reset_envs).parameters
    steps_per_chunk = cfg.n_action_steps or getattr(policy, "n_action_steps", None)
    policy.reset()
    if intervene is not None:
        intervene.reset(n)

    slot_episode = np.full(n, -1)  # episode index each sub-env is running, -1 when idle
    records: list[Recorder | None] = [None] * n
    queues: list[deque[tuple[np.ndarray, bool]]] = [deque() for _ in range(n)]  # (action, intervened)
    queries = np.zeros(n, int)  # policy queries of each sub-env's current episode (episode_rng)
    bar = tqdm(total=len(todo), desc=f"rollout {cfg.policy_id or type(policy).__name__}",
               disable=not cfg.progress, unit="ep")

    def start(mask: np.ndarray) -> tuple[dict[str, Any], dict[str, Any], np.ndarray]:
        """Reset the masked sub-envs (autoreset is off, so finished ones must be reset before the next
        step); those that get a new episode are returned as `working`, the rest stay idle."""
        seeds: list[int | None] = [None] * n
        working = np.zeros(n, bool)
        for i in np.flatnonzero(mask):
            queues[i].clear()
            queries[i] = 0
            if todo:
                slot_episode[i] = todo.popleft()
                seeds[i] = cfg.seed + int(slot_episode[i])
                working[i] = True
        if stateful and working.any():
            rows = np.flatnonzero(working)
            if takes_index:
                policy.reset_envs(rows, episodes=[int(slot_episode[i]) for i in rows])
            else:
                policy.reset_envs(rows)
        if intervene is not None and working.any():
            rows = np.flatnonzero(working)
            intervene.reset_envs(rows, episodes=[int(slot_episode[i]) for i in rows] if cfg.episode_rng else None)
        if mask.all():
            obs, info = env.reset(seed=seeds)
        else:
            obs, info = env.reset(seed=seeds, options={"reset_mask": mask})
        for i in np.flatnonzero(working):
            records[i] = Recorder(row(obs, i), info_row(info, i), cfg.record_frames)
        return obs, info, working

    obs, info, _ = start(np.ones(n, bool))

    try:
        while (slot_episode >= 0).any():
            active = slot_episode >= 0
            tasks = [r.task if r is not None else "" for r in records]
            seen = {**obs, "task": tasks} if any(tasks) else obs  # each sub-env's instruction (the Policy contract)
            action, intervened = _next_actions(policy, seen, queues, active, memory, chunk_env, steps_per_chunk,
                                               cfg, env, slot_episode, queries, intervene)
            obs, reward, terminated, truncated, info = env.step(action)
            if on_step is not None:
                on_step(info)
            done = (terminated | truncated) & active
            for i in np.flatnonzero(active):
                rec = records[i]
                assert rec is not None
                rec.add(action[i], float(reward[i]), row(obs, i), info_row(info, i), intervened[i])
            for i in np.flatnonzero(done):
                rec = records[i]
                assert rec is not None
                meta = {"env_id": cfg.env_id, "seed": cfg.seed + int(slot_episode[i]), "policy_id": cfg.policy_id,
                        "episode_index": int(slot_episode[i]), **cfg.extra_meta}
                yield rec.episode(bool(terminated[i]), bool(truncated[i]), meta)
                records[i] = None
                slot_episode[i] = -1
                bar.update(1)
            finished = terminated | truncated  # idle sub-envs may finish too: all must be reset
            if finished.any() and (slot_episode >= 0).any() | bool(todo):
                obs, _, _ = start(finished)
    finally:
        bar.close()


def _next_actions(policy: Any, obs: dict[str, Any], queues: list[deque[tuple[np.ndarray, bool]]], active: np.ndarray,
                  memory: str, chunk_env: bool, steps: int | None, cfg: RolloutConfig,
                  env: gym.vector.VectorEnv, slot_episode: np.ndarray, queries: np.ndarray,
                  intervene: Intervention | None) -> tuple[np.ndarray, np.ndarray]:
    """(n, A) actions, or (n, H, A) chunks for a chunk env, idle rows zeros; and whether the
    intervening expert chose them, (n,) or (n, H)."""
    n, act_every = len(queues), cfg.act_every
    space = env.single_action_space
    if chunk_env:  # the env consumes the whole chunk at once
        out = query_chunk(policy, obs, n, space.shape[0], space.shape[-1])  # (n, H, A)
        took = np.zeros(n, bool)
        if intervene is not None:
            out, took = intervene(obs, np.arange(n), out)
        out[~active] = 0.0
        return np.clip(out, space.low, space.high).astype(space.dtype), np.repeat((took & active)[:, None], out.shape[1], 1)
    need = np.array([active[i] and not queues[i] for i in range(n)])
    if need.any():
        rows = np.arange(n) if memory == "batch" else np.flatnonzero(need)
        if cfg.episode_rng and memory == "none":  # one row at a time, its randomness from its episode alone
            parts = []
            for i in rows:
                _seed_globals(cfg.seed, int(slot_episode[i]), int(queries[i]))
                parts.append(query_chunk(policy, _index(obs, np.array([i])), 1, act_every, space.shape[-1]))
            chunk = np.concatenate(parts)  # (len(rows), H, A)
        else:
            kwargs = {"env_indices": rows.tolist()} if memory == "rows" else {}
            chunk = query_chunk(policy, _index(obs, rows), len(rows), act_every, space.shape[-1], **kwargs)  # (len(rows), H, A)
        queries[need] += 1
        take = chunk.shape[1] if steps is None or act_every else min(steps, chunk.shape[1])
        chunk, took = chunk[:, :take], np.zeros(len(rows), bool)
        if intervene is not None:
            keep = need[rows]  # rows asked only to keep a stateful policy's batch whole are not judged
            chunk[keep], took[keep] = intervene(_index(obs, rows[keep]), rows[keep], chunk[keep])
        for r, i in enumerate(rows):
            if need[i]:
                queues[i].extend((a, bool(took[r])) for a in chunk[r])
    out, flags = np.zeros((n, *space.shape), dtype=space.dtype), np.zeros(n, bool)
    for i in np.flatnonzero(active):
        out[i], flags[i] = queues[i].popleft()
    return out, flags


def _seed_globals(seed: int, episode: int, query: int) -> None:
    """Seed Python's, numpy's and (when loaded) torch's global RNGs from one episode's query."""
    value = int(np.random.SeedSequence([seed, episode, query]).generate_state(1)[0])
    random.seed(value)
    np.random.seed(value)  # noqa: NPY002  (policies may draw from the legacy global RNG)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(value)


def _index(tree: Any, rows: np.ndarray) -> Any:
    if isinstance(tree, dict):
        return {k: _index(v, rows) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [tree[r] for r in rows]
    return tree[rows]
