"""`make_world_model_env`: the learned simulator of a registered Gymnasium task, from a checkpoint
(env.py's `WorldModelEnv` with the task's horizon and a real env of that id for its reset context)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from wmsuite.rollout.engine import env_spec
from wmsuite.world_models.contexts import GymResetContext
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.latent_memory import MemoryGeometry
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.tracking import ObjectTracking

if TYPE_CHECKING:  # as in env.py: `python -m wmsuite.world_models.novelty` runs that module as __main__
    from wmsuite.world_models.novelty import PatchNovelty


def make_world_model_env(path: str | Path | LatentWorldModel, env_id: str, num_envs: int, *, device: str = "cpu",
                         sampling_steps: int | None = None, seed: int = 0,
                         success_threshold: float = 0.5,
                         success_fn: Callable[[np.ndarray], np.ndarray] | None = None,
                         judge: str = "head", tracking: ObjectTracking | None = None,
                         static_state: slice | None = None, round_trip: bool = False,
                         idm_stop: float | None = None, start_reading: slice | None = None,
                         round_trip_model: LatentWorldModel | None = None,
                         memory_geometry: MemoryGeometry | None = None, novelty: PatchNovelty | None = None,
                         noise_seed: int = 0, env_kwargs: dict[str, Any] | None = None,
                         agent_advance: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> WorldModelEnv:
    """The learned simulator of the registered Gymnasium env `env_id`, from a world-model checkpoint.

    path: a checkpoint or training-run directory (`load_world_model`), or a model already loaded, so
    that one load serves several envs. The horizon is `env_id`'s max_episode_steps in world-model
    steps (chunks, rounded up), and every reset takes its context from a real env of that id
    (`gymnasium.make(env_id, **env_kwargs)`) reset with the same seed. `success_fn`, `judge`, `tracking`,
    `static_state`, `round_trip`, `idm_stop`, `start_reading`, `round_trip_model`, `memory_geometry`,
    `novelty`, `noise_seed`, `agent_advance`: see the module docstring (the caller fills them in from the task probe). world_models never imports wmsuite.envs: the caller
    registers the id first (`import wmsuite.envs` for wmsuite's own tasks).
    """
    try:
        spec = env_spec(env_id)
    except (gym.error.Error, ImportError) as err:
        raise ValueError(f"{env_id!r} is not a registered Gymnasium id ({err}); import the package that registers "
                         "it first (`import wmsuite.envs` for the wmsuite/ tasks), or name it as "
                         "'package.module:Ns/Name-v0'") from err
    if spec.max_episode_steps is None:
        raise ValueError(f"{env_id} registers no max_episode_steps; the imagined episodes need a horizon")
    if isinstance(path, LatentWorldModel):
        model = path
    else:
        from wmsuite.world_models import load_world_model  # the package imports this module

        model = load_world_model(path, device=device, sampling_steps=sampling_steps)
    return WorldModelEnv(model, GymResetContext(lambda: gym.make(env_id, **(env_kwargs or {}))), num_envs=num_envs,
                         horizon=math.ceil(spec.max_episode_steps / model.cfg.chunk),
                         success_threshold=success_threshold, sampling_steps=sampling_steps, device=device,
                         seed=seed, success_fn=success_fn, judge=judge, tracking=tracking,
                         static_state=static_state, round_trip=round_trip, idm_stop=idm_stop,
                         start_reading=start_reading, round_trip_model=round_trip_model,
                         memory_geometry=memory_geometry, novelty=novelty, noise_seed=noise_seed,
                         agent_advance=agent_advance)
