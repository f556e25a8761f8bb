"""Simulator workers on Ray: a Gymnasium `VectorEnv` whose sub-environments live in Ray actors.

    env = make_vector_env("wmsuite/PushCube-v0", num_envs=8, backend=Backend("ray", workers=4))
    for ep in rollout(policy, env, RolloutConfig(episodes=100, seed=0)):   # the engine as ever
        ...

`RayVectorEnv` spreads `num_envs` sub-environments over `workers` actors (contiguous blocks: actor k
holds sub-envs [k*n/W, (k+1)*n/W)). Every `reset` and `step` sends each actor its sub-envs' seeds or
actions, runs them there concurrently and gathers the results in sub-environment order, exactly as
Gymnasium's `SyncVectorEnv` batches them (observations concatenated, infos merged with their `_key`
masks, `options={"reset_mask": ...}` resetting only the masked sub-envs). So the engine's per-episode
seeds give the same episodes as with the local engine. Policy and world-model inference stays in the
driver, batched over all sub-environments. Autoreset is disabled, as the engine requires.

The cluster: `Backend.address` joins a running one (`ray start --head` on the head node, `ray start
--address=HEAD:6379` on the others, then `--ray-address auto` or `HEAD:6379`); without it a local
one is started with this machine's cores. Ray is the `dist` extra: pip install 'wmsuite[dist]'.
"""

from __future__ import annotations

import time
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array


@dataclass
class Backend:
    kind: Literal["local", "ray"] = "local"
    """Where the simulator's sub-environments run: "local" (this process, or Gymnasium's worker
    processes) or "ray" (Ray actors, on this machine or a cluster)."""
    workers: int = 2
    """With "ray": actors to spread the sub-environments over (at most one per sub-environment)."""
    address: str | None = None
    """With "ray": a running cluster to join ("auto", or "HOST:6379"); unset starts a local one."""

    def __post_init__(self) -> None:
        if self.kind not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', got {self.kind!r}")
        if self.workers < 1:
            raise ValueError(f"ray workers must be >= 1, got {self.workers}")


def require_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError("the ray backend needs Ray: pip install 'wmsuite[dist]'") from err
    return ray


def _free_cpus(ray: Any, needed: int, wait_s: float = 30.0) -> float:
    """The cluster's free CPUs, waiting up to `wait_s` for `needed` of them (those of actors just
    killed come back a moment later)."""
    deadline = time.monotonic() + wait_s
    while (free := ray.available_resources().get("CPU", 0)) < needed and time.monotonic() < deadline:
        time.sleep(0.2)
    return free


class _Worker:
    """One Ray actor: a block of sub-environments, each built by `make()` in the actor's process."""

    def __init__(self, make: Any, count: int) -> None:
        self.envs = [make() for _ in range(count)]

    def spaces(self) -> tuple[gym.Space, gym.Space, dict]:
        env = self.envs[0]
        return env.observation_space, env.action_space, dict(env.metadata)

    def reset(self, seeds: list[int | None], mask: list[bool], options: dict | None) -> list[tuple | None]:
        return [env.reset(seed=s, options=options) if m else None
                for env, s, m in zip(self.envs, seeds, mask, strict=True)]

    def step(self, actions: list[Any]) -> list[tuple]:
        return [env.step(a) for env, a in zip(self.envs, actions, strict=True)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RayVectorEnv(gym.vector.VectorEnv):
    """`num_envs` copies of `make()` in `workers` Ray actors, batched as `SyncVectorEnv` batches them
    (see the module docstring); autoreset disabled."""

    def __init__(self, make: Any, num_envs: int, workers: int = 2, address: str | None = None) -> None:
        ray = require_ray()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        workers = min(workers, num_envs)
        free = _free_cpus(ray, workers)
        if free < workers:  # an actor without a CPU would wait for one forever
            raise RuntimeError(f"the Ray cluster has {free:g} free CPUs for {workers} simulator workers (one CPU "
                               "each); use fewer --ray-workers, close other Ray envs, or add nodes")
        bounds = np.linspace(0, num_envs, workers + 1).round().astype(int)
        self._blocks = [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        actor = ray.remote(num_cpus=1)(_Worker)
        self._actors = [actor.remote(make, len(block)) for block in self._blocks]
        self._ray = ray
        obs_space, act_space, metadata = ray.get(self._actors[0].spaces.remote())
        self.num_envs = num_envs
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, num_envs)
        self.action_space = batch_space(act_space, num_envs)
        self.metadata = {**metadata, "autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        self._env_obs: list[Any] = [None] * num_envs
        self._observations = create_empty_array(obs_space, num_envs, fn=np.zeros)
        self._rewards = np.zeros(num_envs, dtype=np.float64)
        self._terminations = np.zeros(num_envs, dtype=np.bool_)
        self._truncations = np.zeros(num_envs, dtype=np.bool_)

    def _gather(self, calls: list[Any]) -> list[Any]:
        """Every actor's per-sub-env results, flattened into sub-environment order."""
        return [r for block in self._ray.get(calls) for r in block]

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        n = self.num_envs
        seeds = [None] * n if seed is None else [seed + i for i in range(n)] if isinstance(seed, int) else list(seed)
        if len(seeds) != n:
            raise ValueError(f"reset got {len(seeds)} seeds for {n} sub-environments")
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(n, dtype=np.bool_))
        if not isinstance(mask, np.ndarray) or mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
            raise ValueError(f"options['reset_mask'] must be a bool array of shape ({n},) with a True value, got {mask!r}")
        results = self._gather([a.reset.remote([seeds[i] for i in b], [bool(mask[i]) for i in b], options or None)
                                for a, b in zip(self._actors, self._blocks, strict=True)])
        infos: dict[str, Any] = {}
        for i, result in enumerate(results):
            if result is not None:
                self._env_obs[i], info = result
                self._terminations[i] = self._truncations[i] = False
                infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return deepcopy(self._observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        acts = list(gym.vector.utils.iterate(self.action_space, actions))
        results = self._gather([a.step.remote([acts[i] for i in b])
                                for a, b in zip(self._actors, self._blocks, strict=True)])
        infos: dict[str, Any] = {}
        for i, (obs, reward, terminated, truncated, info) in enumerate(results):
            self._env_obs[i] = obs
            self._rewards[i], self._terminations[i], self._truncations[i] = reward, terminated, truncated
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return (deepcopy(self._observations), np.copy(self._rewards), np.copy(self._terminations),
                np.copy(self._truncations), infos)

    def close_extras(self, **kwargs: Any) -> None:
        for actor in getattr(self, "_actors", []):
            try:
                self._ray.get(actor.close.remote())
            finally:
                self._ray.kill(actor)
        self._actors = []
