"""The scripted experts' common machinery: batched rows with a per-episode memory and personality,
the skill knob's failure modes, action noise and hesitation, per-episode bias, chunked open-loop
plans. The task experts subclass `ScriptedExpert` (envs/push_experts.py, envs/experts.py); what
skill does is told in envs/experts.py, whose `make_expert` builds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np


class ScriptedExpert:
    """Batched scripted controller; a task subclass defines `_begin` (personality) and `_act`."""

    ENV_ID: ClassVar[str]
    AGENT_POS_DIM: ClassVar[int]
    ENV_STATE_DIM: ClassVar[int]
    ACTION_DIM: ClassVar[int]
    FAILURE_MODES: ClassVar[tuple[str, ...]]  # drawn by default
    EXTRA_MODES: ClassVar[tuple[str, ...]] = ()  # drawn only when named in `failure_modes`
    MOTION_DIM: ClassVar[int]  # leading action entries that move the agent (noise goes there)
    MOTION_SCALE: ClassVar[float]  # metres the agent moves per unit of those entries (env's ACTION_SCALE)
    NOISE: ClassVar[float] = 0.5  # action noise std at skill 0 (actions live in [-1, 1])
    HESITATE: ClassVar[float] = 0.15  # per-step probability of starting a pause at skill 0

    def __init__(self, skill: float = 1.0, seed: int = 0, horizon: int = 1, bias: float = 0.0,
                 failure_modes: Iterable[str] | None = None) -> None:
        if not isinstance(skill, int | float) or not 0.0 <= float(skill) <= 1.0:
            raise ValueError(f"skill must be a number in [0, 1], got {skill!r}")
        known = self.FAILURE_MODES + self.EXTRA_MODES
        modes = self.FAILURE_MODES if failure_modes is None else tuple(failure_modes)
        if isinstance(failure_modes, str) or not modes or any(m not in known for m in modes):
            raise ValueError(f"failure_modes must be a non-empty list drawn from {list(known)}, got {failure_modes!r}")
        self.failure_modes = modes
        """The failure modes an incompetent episode draws from, uniformly."""
        if not isinstance(bias, int | float) or not 0.0 <= float(bias) <= 1.0:
            raise ValueError(f"bias must be a number in [0, 1], got {bias!r}")
        self.bias = float(bias)
        """Largest per-episode actuator bias: each episode draws a constant offset of the motion
        actions, uniform in direction and U(0, bias) in size (actions live in [-1, 1]), added to every
        action, then clipped. Data for world models: with it, where the agent goes is no longer
        implied by where the cube and goal are, and a world model trained on such data can no longer
        imagine a biased policy's pushes reaching the goal as an expert's would (experiments/)."""
        if not isinstance(horizon, int | np.integer) or horizon < 1:
            raise ValueError(f"horizon must be an int >= 1, got {horizon!r}")
        self.horizon = int(horizon)
        """Actions per chunk: >1 plans open-loop on the agent position its own actions imply (for a
        world model that steps whole chunks, and the real env driven the same way)."""
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.skill = float(skill)
        self.seed = int(seed)
        self._seeds = np.random.SeedSequence(self.seed)
        self._memory: list[dict[str, Any] | None] = []
        self._episode_index: dict[int, int] = {}  # row -> the index of the episode it starts next

    def reset(self) -> None:
        """Forget every environment's memory; the next call starts new episodes for all rows."""
        self._memory = []
        self._episode_index = {}

    def reset_envs(self, indices: Iterable[int], episodes: Iterable[int] | None = None) -> None:
        """Rows `indices` start new episodes: their memory is dropped and redrawn at the next call,
        from the episodes[k]-th child generator of `seed` when episode indices are given."""
        indices = [int(i) for i in indices]
        if episodes is not None:
            self._episode_index.update(zip(indices, (int(e) for e in episodes), strict=True))
        for i in indices:
            if 0 <= i < len(self._memory):
                self._memory[i] = None

    def predict_action_chunk(self, obs: dict[str, Any], env_indices: Sequence[int] | None = None) -> np.ndarray:
        """obs {"agent_pos": (B, D), "environment_state": (B, E), ...} -> (B, horizon, A) float32 in [-1, 1].

        Row b is environment b, or environment env_indices[b] when given: the rollout engine then asks
        only for the environments that need a chunk, and every other environment's plan and memory stay
        as they are (asked for the whole batch, an expert would plan, and advance, rows whose chunk is
        thrown away)."""
        agent_pos = _batch(obs, "agent_pos", self.AGENT_POS_DIM, self.ENV_ID)  # (B, D)
        env_state = _batch(obs, "environment_state", self.ENV_STATE_DIM, self.ENV_ID)  # (B, E)
        batch = len(agent_pos)
        if len(env_state) != batch:
            raise ValueError(f"agent_pos has {batch} rows but environment_state has {len(env_state)}")
        slots = list(range(batch)) if env_indices is None else [int(i) for i in env_indices]
        if len(slots) != batch:
            raise ValueError(f"env_indices names {len(slots)} environments for a batch of {batch}")
        if env_indices is not None:
            self._memory += [None] * (max(slots, default=-1) + 1 - len(self._memory))
        elif not self._memory:
            self._memory = [None] * batch
        elif len(self._memory) != batch:
            raise ValueError(f"{type(self).__name__} was driving {len(self._memory)} envs and got a batch of "
                             f"{batch}; call reset() before changing the batch size")
        actions = np.empty((batch, self.horizon, self.ACTION_DIM), np.float32)  # (B, H, A)
        for i, slot in enumerate(slots):
            mem = self._memory[slot]
            if mem is None:
                mem = self._memory[slot] = self._new_episode(self._episode_index.pop(slot, None))
            pos, scene = agent_pos[i].astype(np.float64), env_state[i].astype(np.float64)
            for h in range(self.horizon):  # open loop: the agent moved by its actions, objects by _carry
                actions[i, h] = self._step(pos, scene, mem)
                move = self.MOTION_SCALE * actions[i, h, : self.MOTION_DIM]
                scene = self._carry(pos, scene, move, mem)
                pos = pos.copy()
                pos[: self.MOTION_DIM] += move
        return actions  # (B, H, A)

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        """(B, A): the chunk's first action (experts re-plan at every call)."""
        return self.predict_action_chunk(obs)[:, 0]

    def modes(self) -> list[str | None]:
        """The personality ("competent" or a failure mode) of each row's current episode."""
        return [None if m is None else m["mode"] for m in self._memory]

    # ---- per-episode memory -------------------------------------------------------------------
    def _new_episode(self, episode: int | None = None) -> dict[str, Any]:
        # the k-th child of SeedSequence(seed) is what the k-th spawn of an uninterrupted run returns
        seq = self._seeds.spawn(1)[0] if episode is None else np.random.SeedSequence(self.seed, spawn_key=(episode,))
        rng = np.random.default_rng(seq)
        competent = rng.random() < self.skill
        mode = "competent" if competent else self.failure_modes[rng.integers(len(self.failure_modes))]
        mem = {"mode": mode, "rng": rng, "t": 0, "pause": 0, "frozen_at": None}
        if mode == "freeze":
            mem["frozen_at"] = int(rng.integers(1, 10))
        self._begin(mem, rng)
        mem["bias"] = np.zeros(self.MOTION_DIM)
        if self.bias > 0:  # drawn last, so bias 0 leaves every other draw as it was
            direction = rng.normal(size=self.MOTION_DIM)
            mem["bias"] = rng.uniform(0.0, self.bias) * direction / np.linalg.norm(direction)
        return mem

    def _step(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        action = np.array(self._intended(agent_pos, env_state, mem), dtype=np.float64)  # a copy
        action[: self.MOTION_DIM] += mem["bias"]
        return np.clip(action, -1.0, 1.0)

    def _intended(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        rng = mem["rng"]
        mem["t"] += 1
        hold = self._hold(mem)
        if mem["frozen_at"] is not None and mem["t"] >= mem["frozen_at"]:
            return hold
        if mem["pause"] > 0:
            mem["pause"] -= 1
            return hold
        if rng.random() < self.HESITATE * (1.0 - self.skill):
            mem["pause"] = int(rng.integers(1, 5))  # this step and 1-4 more: 2-5 steps still
            return hold
        action = self._act(agent_pos.astype(np.float64), env_state.astype(np.float64), mem)
        if action is None:  # a deliberate stop (the expert believes it is done): no jitter either
            return hold
        noise = self.NOISE * (1.0 - self.skill)
        if noise > 0:
            action[: self.MOTION_DIM] += rng.normal(0.0, noise, size=self.MOTION_DIM)
        return np.clip(action, -1.0, 1.0)

    def _hold(self, mem: dict[str, Any]) -> np.ndarray:
        """The action that keeps everything where it is."""
        return np.zeros(self.ACTION_DIM)

    def _carry(self, agent_pos: np.ndarray, env_state: np.ndarray, move: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """The environment state an open-loop plan expects after the agent at `agent_pos` moves by
        `move` (MOTION_DIM,): objects stay where they are unless the task says what the agent carries."""
        return env_state

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        """(A,) action in [-1, 1] before noise, or None to hold still on purpose."""
        raise NotImplementedError


def _batch(obs: dict[str, Any], key: str, dim: int, env_id: str) -> np.ndarray:
    if key not in obs:
        raise KeyError(f"the {env_id} expert needs obs[{key!r}] (batched, (B, {dim})); got keys {sorted(obs)}")
    x = np.asarray(obs[key])
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"the {env_id} expert needs obs[{key!r}] of shape (B, {dim}), got {x.shape}; "
                         "add a leading batch axis to a single observation")
    return x
