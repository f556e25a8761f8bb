"""Helpers shared by the commands: turning a `--policy` spec into a policy object."""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from wmsuite.checkpoint import is_checkpoint
from wmsuite.policy import load_object
from wmsuite.rollout import Backend
from wmsuite.specs import trust_code as trust_code_flag

POLICY_SPEC_HELP = (
    "'expert' (the env's scripted expert at --skill) or 'expert@0.5', a checkpoint or run directory written by "
    "`wmsuite train-policy` (or 'assets:policies/<name>' for a shipped one), or 'package.module:attr' with optional JSON kwargs, "
    "e.g. 'wmsuite.envs.experts:make_expert{\"env_id\": \"wmsuite/PushCube-v0\", \"skill\": 0.5}'"
)


def resolve_policy(spec: str, env_id: str | None = None, skill: float = 1.0, seed: int = 0,
                   device: str = "cpu", horizon: int = 1, trusted: bool = True, trust_code: bool = False) -> Any:
    """Build the policy named by `spec` (see POLICY_SPEC_HELP); `horizon` is the chunk length the
    scripted experts plan (learned policies have their own). `trusted`: the spec is the user's own
    (typed on the command line), not read from a manifest; `trust_code`: the --trust-code flag,
    which lets untrusted and nested specs name code (wmsuite/specs.py)."""
    with trust_code_flag(trust_code):
        return _resolve(spec, env_id, skill, seed, device, horizon, trusted)


def _resolve(spec: str, env_id: str | None, skill: float, seed: int, device: str, horizon: int, trusted: bool) -> Any:
    if spec == "expert" or spec.startswith("expert@"):
        if env_id is None:
            raise ValueError("--policy expert needs --env to know which task's expert to build")
        check_env_id(env_id)
        if spec.startswith("expert@"):
            try:
                skill = float(spec[len("expert@"):])
            except ValueError as err:
                raise ValueError(f"policy spec {spec!r}: the skill after 'expert@' must be a number") from err
        from wmsuite.envs.experts import make_expert

        return make_expert(env_id=env_id, skill=skill, seed=seed, horizon=horizon)
    if spec.startswith("assets:") or is_checkpoint(spec) or is_checkpoint(Path(spec) / "latest"):
        from wmsuite.policies import load_policy

        return load_policy(spec, device=device)
    if Path(spec).exists():
        raise ValueError(f"{spec} exists but is not a checkpoint directory (model.safetensors + config.json)")
    if ":" not in spec:
        raise ValueError(f"policy spec {spec!r}: no checkpoint directory at that path, and not 'expert', "
                         "'expert@<skill>', 'assets:policies/<name>' or 'package.module:attr'")
    return load_object(spec, trusted=trusted)


def check_env_id(env_id: str) -> str:
    """`env_id` if Gymnasium knows it; a ValueError that also lists wmsuite's ids otherwise."""
    from wmsuite.envs import wmsuite_ids
    from wmsuite.rollout.engine import checked_env_id

    try:
        checked_env_id(env_id)
    except ValueError as err:
        raise ValueError(f"{err}; wmsuite's are {', '.join(wmsuite_ids())} (robosuite and LIBERO ids need "
                         "their extras)") from err
    return env_id


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (third-party code may still use the legacy global RNG)
    torch.manual_seed(seed)


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("WMSUITE_LOG", "INFO"), format="%(levelname)s %(name)s: %(message)s")


def memory_geometry(env_id: str, camera: str, start_map: bool = False):
    """The spatial memory's `MemoryGeometry` for a world model of `camera` on `env_id`, from the task
    probe's moving camera (and map camera, which a model with `start_map` needs); a ValueError that says
    why where there is none."""
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models.latent_memory import MemoryGeometry

    probe = get_probe(env_id)
    if probe.moving_camera is None:
        raise ValueError(f"a world model with memory (--model.memory-frames > 0), or --revisit-fraction > 0, needs "
                         f"a task whose camera moves with the agent; {env_id}'s probe names none (PushCubeEgo's does)")
    if camera != probe.moving_camera:
        raise ValueError(f"the spatial memory follows {env_id}'s moving camera {probe.moving_camera!r}, but the world "
                         f"model generates {camera!r}; train it with --model.camera {probe.moving_camera}")
    if start_map and probe.map_camera is None:
        raise ValueError(f"a world model with a start map (--model.start-map) reads the start frame of a fixed camera "
                         f"that sees the whole scene; {env_id}'s probe names none (map_camera; PushCubeEgo's does)")
    return MemoryGeometry(fovy=probe.moving_camera_fovy, pose_fn=probe.moving_camera_pose,
                          advance_fn=probe.moving_camera_advance, map_camera=probe.map_camera,
                          map_fovy=probe.map_camera_fovy, map_pose=probe.map_camera_pose)


def recorded_env_id(data: str, episodes: list) -> str:
    """The env id `data` was recorded in: the file's env_args["env_name"] where it names a registered
    wmsuite task, else the one env id its episodes' meta carry; a ValueError where neither does."""
    from wmsuite.data import EpisodeFile
    from wmsuite.envs import wmsuite_ids

    with EpisodeFile(data) as f:
        name = str(f.env_args.get("env_name", ""))
    if name in wmsuite_ids():
        return name
    ids = sorted({str(ep.meta.get("env_id", "")) for ep in episodes} - {""})
    if len(ids) == 1:
        return ids[0]
    raise ValueError(f"--env is empty and {data} does not record one env id (env_args env_name {name!r}, "
                     f"episodes' env ids {ids}); pass --env, one of {', '.join(wmsuite_ids())}")


def env_kwargs_for(image_size: int | None, cameras: tuple[str, ...] | None) -> dict[str, Any]:
    """The real simulator's kwargs of --image-size and --cameras (None: the env's own size or cameras;
    cameras () a state-only env that renders nothing, all a policy of states needs, and much faster
    where rendering dominates a step (robosuite))."""
    kwargs: dict[str, Any] = {} if image_size is None else {"image_size": image_size}
    if cameras is not None:
        kwargs["cameras"] = tuple(cameras)
    return kwargs


def check_policy_cameras(policy: Any, cameras: tuple[str, ...] | None) -> None:
    """One clear error, before any episode, where --cameras leaves out a camera the policy (or a policy
    it wraps) reads; a policy that does not say which cameras it reads is not checked."""
    while cameras is not None and policy is not None:
        wanted = getattr(getattr(policy, "cfg", None), "cameras", None) or ()
        missing = [c for c in wanted if c not in cameras]
        if missing:
            raise ValueError(f"the policy reads camera(s) {', '.join(missing)}, which --cameras "
                             f"({', '.join(cameras) or 'none'}) leaves out; add them, or leave --cameras unset")
        policy = getattr(policy, "inner", None)


def check_precision(precision: str) -> None:
    """A --precision flag: '' (the world model's own), 'float32' or 'bfloat16'."""
    if precision not in ("", "float32", "bfloat16"):
        raise ValueError(f"--precision must be float32 or bfloat16 (or empty: the checkpoint's), got {precision!r}")


@dataclass
class SimBackendFlags:
    """The flags of the commands that run a real simulator (collect, eval) for where it runs."""

    backend: Literal["local", "ray"] = "local"
    """Where the real simulator's sub-environments run: 'local' (this machine's processes) or 'ray'
    (Ray actors; the same seeds give the same episodes; wmsuite/rollout/ray_env.py)."""
    ray_workers: int = 2
    """With --backend ray: actors the sub-environments are spread over."""
    ray_address: str | None = None
    """With --backend ray: a running Ray cluster to join ('auto' or 'HOST:6379'); unset starts a local one."""

    def sim_backend(self) -> Backend:
        """The flags as the rollout engine's `Backend` (validating them)."""
        return Backend(self.backend, self.ray_workers, self.ray_address)
