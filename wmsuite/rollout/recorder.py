"""Episode recording for the rollout engine: one `Recorder` per sub-environment accumulates what the
vector env returns, and hands back an `Episode` (actions, one observation per action, rewards, the
trust and judge signals a learned simulator reports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wmsuite.types import Episode


def row(tree: Any, i: int) -> Any:
    """Sub-env i's entry of a batched observation (nested dicts of arrays), copied."""
    if isinstance(tree, dict):
        return {k: row(v, i) for k, v in tree.items()}
    return np.array(tree[i], copy=True)


def info_row(info: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env i's entries of a vector env's info dict (keys with a `_key` mask that is set)."""
    out = {}
    for k, v in info.items():
        if k.startswith("_"):
            continue
        mask = info.get("_" + k)
        if mask is not None and not mask[i]:
            continue
        out[k] = row(v, i) if isinstance(v, dict) else v[i]
    return out


class Recorder:
    """Accumulates one sub-environment's episode."""

    def __init__(self, obs: dict[str, Any], info: dict[str, Any], frames: bool) -> None:
        self.frames = frames
        self.pixels: dict[str, list[np.ndarray]] = {c: [f] for c, f in obs.get("pixels", {}).items()} if frames else {}
        self.state = [_flat(obs, "agent_pos")]
        self.env_state = [_flat(obs, "environment_state")]
        self.actions: list[np.ndarray] = []
        self.intervened: list[np.ndarray] = []  # per step, (1,) or (H,) for a chunk env
        self.rewards: list[float] = []
        self.success = bool(info.get("is_success", False))
        self.success_at: int | None = None  # steps taken when info["is_success"] first held
        self.task = str(info.get("task", ""))
        self.sim = [info["sim_state"]] if "sim_state" in info else None
        self.signals: dict[str, list[dict[str, float]]] = {k: [] for k in SIGNALS}  # per step
        self.between: list[dict[str, Any]] = []  # per step of a chunk env, its info["chunk"] (CHUNK_INFO)

    def add(self, action: np.ndarray, reward: float, obs: dict[str, Any], info: dict[str, Any],
            intervened: bool | np.ndarray = False) -> None:
        if self.frames:
            for c, f in obs.get("pixels", {}).items():
                self.pixels[c].append(f)
        self.state.append(_flat(obs, "agent_pos"))
        self.env_state.append(_flat(obs, "environment_state"))
        action = np.asarray(action, np.float32)
        self.actions.append(action.reshape(-1, action.shape[-1]) if action.ndim == 2 else action[None])
        self.intervened.append(np.asarray(intervened, bool).reshape(-1))
        self.rewards.append(reward)
        self.success = bool(info.get("is_success", False))
        if self.success and self.success_at is None:
            self.success_at = len(self.actions)
        if self.sim is not None and "sim_state" in info:
            self.sim.append(info["sim_state"])
        if CHUNK_INFO in info:  # frames only where the episode keeps frames
            self.between.append({k: v for k, v in info[CHUNK_INFO].items() if k != "pixels" or self.frames})
        for kind, steps in self.signals.items():
            values = {k: float(v) for k, v in info.items() if k.startswith(kind + "/")}
            if values:
                steps.append(values)

    def episode(self, terminated: bool, truncated: bool, meta: dict[str, Any]) -> Episode:
        # (T, A). A chunk env takes H actions per step and returns one observation after them: the
        # episode then holds every action, and the observations between a chunk's actions are the
        # ones its info["chunk"] reports (CHUNK_INFO), else the chunk's first observation repeated.
        actions = np.concatenate(self.actions, 0)
        steps = len(self.actions)
        per = actions.shape[0] // steps
        idx = np.minimum(np.arange(actions.shape[0] + 1) // per, steps)  # (T+1,) observation per time
        reported = per > 1 and len(self.between) == steps

        def series(ends: list[np.ndarray], get: Callable[[dict], np.ndarray]) -> np.ndarray:  # (T+1, ...)
            return _interleave(ends, [get(b) for b in self.between], per) if reported else np.stack(ends)[idx]

        obs = {c: series(f, lambda b, c=c: b["pixels"][c]) for c, f in self.pixels.items()}
        state = series(self.state, lambda b: b["agent_pos"])
        env_state = series(self.env_state, lambda b: b["environment_state"])
        rewards = np.zeros(actions.shape[0], np.float32)
        rewards[per - 1 :: per] = self.rewards
        for kind, per_step in self.signals.items():
            if per_step:
                keys = dict.fromkeys(k for t in per_step for k in t)  # a signal may come on some steps only
                meta = {**meta, kind: {k: [t[k] for t in per_step if k in t] for k in keys}}
        sim = np.stack(self.sim)[idx] if self.sim is not None and len(self.sim) == steps + 1 else None
        if self.success_at is not None and self.success_at < steps:  # it went on past its success
            meta = {**meta, "success_step": self.success_at * per}  # Episode.success_from
        return Episode(obs=obs, state=state, env_state=env_state,
                       actions=actions, rewards=rewards, success=self.success, terminated=terminated,
                       truncated=truncated, intervention=np.concatenate(self.intervened), sim_states=sim,
                       task=self.task, meta=meta)


CHUNK_INFO = "chunk"
"""A chunk env's info key for the observations between a chunk's actions, as it imagined them: per
sub-env {"agent_pos": (H, D), "environment_state": (H, E), "pixels": {camera: (H, S, S, 3)}}, entry j
the observation after action j (the last one the step's own observation, or past an early end the
frames drawn after it). The engine records them in place of the chunk's first observation repeated,
so an episode from a learned simulator holds one observation per action, as a real one does."""


def _interleave(ends: list[np.ndarray], between: list[np.ndarray], per: int) -> np.ndarray:
    """ends: the steps' observations (steps + 1 of shape X); between: per step (H, *X) -> (steps * per
    + 1, *X), each chunk's first per - 1 in-between observations before the step's own."""
    out = [np.asarray(ends[0])[None]]
    for b, end in zip(between, ends[1:], strict=True):
        arr, size = np.asarray(b, np.asarray(end).dtype), int(np.prod(np.shape(end)))
        rows = arr.size // size if size else len(arr)  # an empty observation (no environment_state): one per entry
        out += [arr.reshape(rows, *np.shape(end))[: per - 1], np.asarray(end)[None]]
    return np.concatenate(out)


SIGNALS = ("trust", "judge")
"""Per-step info keys `<kind>/<name>` the engine keeps in an episode's meta[kind][key] (a list over
the steps that reported it: a sub-env masked out by `_<kind>/<name>` reports nothing that step):
trust signals, and the learned simulator's success judges (which judge fired when)."""


def _flat(obs: dict[str, Any], key: str) -> np.ndarray:
    return np.asarray(obs.get(key, np.zeros(0)), np.float32).reshape(-1)
