"""Play data for world models: scripted PushCube behaviours that are not the task, drawn per episode.

    play = make_play("wmsuite/PushCube-v0", seed=0)                  # every play mode, uniformly
    play = make_play("wmsuite/PushCube-v0", modes=["park"], seed=0)  # one behaviour
    # on the command line: wmsuite.envs.play:make_play{"env_id": "wmsuite/PushCube-v0", "seed": 0}

Why. A world model trained on expert episodes learns what success usually looks like (pusher and
cube arriving at the goal together), not what it is: it then imagines a cube appearing on the goal
when a policy parks the pusher there. Play data shows what other policies do, so that nothing in the
scene but the cube's own contact moves the cube. Each episode draws one mode:

    wander          waypoints anywhere on the table, redrawn on arrival or every 8-30 steps, at 0.3-1 of
                    full speed; it drives through the cube when it is in the way (contact by chance)
    park            drives to a point inside the goal disk, going round the cube (never touching it),
                    and stays there drifting about: the agent on the goal, the object elsewhere
    goal_direct     drives straight at the goal, ignoring the cube (pushing it where it is in the way),
                    then stops there
    approach_leave  approaches the cube from a random side to 0-3 cm short of touching it, waits 0-6
                    steps and leaves for a random point; again and again
    random          smoothed random actions (an Ornstein-Uhlenbeck process in [-1, 1]^2)
    hover, poke     the expert's opt-in modes (experts.py): standing off near the cube; strokes through
                    the cube from every side

Play policies are `PushCubeExpert`s at skill 0 whose failure modes are these behaviours, so they
share the experts' per-episode generators (`reset_envs(..., episodes=)`), action noise (std
`NOISE * (1 - skill)`), hesitation and optional actuator `bias`. `skill` > 0 mixes in competent
expert episodes at that rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from wmsuite.envs.experts import PushCubeExpert
from wmsuite.envs.push_cube import ACTION_SCALE, GOAL_RADIUS

TABLE = 0.25  # m: waypoints stay within [-TABLE, TABLE]^2, inside the walls (0.3)


class PushCubePlay(PushCubeExpert):
    """See the module docstring."""

    PLAY_MODES = ("wander", "park", "goal_direct", "approach_leave", "random")
    EXTRA_MODES = (*PushCubeExpert.EXTRA_MODES, *PLAY_MODES)
    DEFAULT_MODES = (*PLAY_MODES, "hover", "poke")

    def __init__(self, skill: float = 0.0, seed: int = 0, horizon: int = 1, bias: float = 0.0,
                 modes: Iterable[str] | None = None, noise: float | None = None) -> None:
        super().__init__(skill=skill, seed=seed, horizon=horizon, bias=bias,
                         failure_modes=self.DEFAULT_MODES if modes is None else modes)
        if noise is not None and not (isinstance(noise, int | float) and 0.0 <= noise <= 1.0):
            raise ValueError(f"noise must be a number in [0, 1] (action noise std at skill 0), got {noise!r}")
        self.NOISE = float(noise) if noise is not None else 0.25
        """Action noise std at skill 0 (the experts use 0.5: play motion is already varied)."""

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        super()._begin(mem, rng)
        mem["target"], mem["timer"], mem["speed"] = None, 0, rng.uniform(0.3, 1.0)
        mem["ou"] = np.zeros(2)
        mem["phase"] = "approach"

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        mode = mem["mode"]
        if mode not in self.PLAY_MODES:
            return super()._act(agent_pos, env_state, mem)
        pusher, cube, goal, rng = agent_pos[:2], env_state[:2], env_state[4:6], mem["rng"]
        if mode == "random":
            mem["ou"] += -0.15 * mem["ou"] + 0.35 * rng.normal(size=2)
            return np.clip(mem["ou"], -1.0, 1.0)
        if mode == "wander":
            if mem["target"] is None or mem["timer"] <= 0 or np.linalg.norm(mem["target"] - pusher) < 0.01:
                mem["target"] = rng.uniform(-TABLE, TABLE, size=2)
                mem["timer"], mem["speed"] = int(rng.integers(8, 31)), rng.uniform(0.3, 1.0)
            mem["timer"] -= 1
            return _towards(pusher, mem["target"], mem["speed"])
        if mode == "goal_direct":
            if np.linalg.norm(goal - pusher) < 0.01:
                return None
            return _towards(pusher, goal, mem["speed"])
        if mode == "park":
            return self._park(pusher, cube, goal, mem)
        return self._approach_leave(pusher, cube, mem)

    def _park(self, pusher: np.ndarray, cube: np.ndarray, goal: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """To a spot inside the goal disk (redrawn every 5-15 steps once there), round the cube."""
        rng = mem["rng"]
        if mem["target"] is None or (mem["timer"] <= 0 and np.linalg.norm(mem["target"] - pusher) < 0.02):
            r, phi = GOAL_RADIUS * np.sqrt(rng.uniform(0, 0.8)), rng.uniform(-np.pi, np.pi)
            mem["target"], mem["timer"] = goal + r * np.array([np.cos(phi), np.sin(phi)]), int(rng.integers(5, 16))
        mem["timer"] -= 1
        return _towards(pusher, _round_obstacle(pusher, mem["target"], cube, self.CLEAR), mem["speed"])

    def _approach_leave(self, pusher: np.ndarray, cube: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        """Approach to a stand-off point on a random side of the cube, wait, leave; repeat."""
        rng = mem["rng"]
        if mem["target"] is None:
            theta = rng.uniform(-np.pi, np.pi)
            mem["target"] = cube + (self.CONTACT + rng.uniform(0.0, 0.03)) * np.array([np.cos(theta), np.sin(theta)])
            mem["phase"], mem["timer"] = "approach", 40
        mem["timer"] -= 1
        if mem["phase"] == "approach":
            if np.linalg.norm(mem["target"] - pusher) < 0.008 or mem["timer"] <= 0:
                mem["phase"], mem["timer"] = "wait", int(rng.integers(0, 7))
            else:
                return _towards(pusher, _round_obstacle(pusher, mem["target"], cube, self.CLEAR), mem["speed"])
        if mem["phase"] == "wait":
            if mem["timer"] > 0:
                return None
            mem["phase"], mem["timer"] = "leave", int(rng.integers(6, 20))
            mem["away"] = rng.uniform(-TABLE, TABLE, size=2)
        if mem["timer"] <= 0:
            mem["target"] = None  # the next step picks a new side
        return _towards(pusher, _round_obstacle(pusher, mem["away"], cube, self.CLEAR), mem["speed"])


def _towards(pusher: np.ndarray, target: np.ndarray, speed: float) -> np.ndarray:
    """The action that moves the pusher towards `target` at up to `speed` of full, arriving exactly."""
    step = (target - pusher) / ACTION_SCALE
    norm = float(np.linalg.norm(step))
    return step if norm <= speed else step * (speed / norm)


def _round_obstacle(pusher: np.ndarray, target: np.ndarray, cube: np.ndarray, clear: float) -> np.ndarray:
    """`target`, or a waypoint beside the cube when the straight path would pass within `clear` of it."""
    path = target - pusher
    length = float(np.linalg.norm(path))
    if length < 1e-6:
        return target
    d = path / length
    along = float((cube - pusher) @ d)
    if along <= 0 or along >= length + clear:  # the cube is behind the pusher or beyond the target
        return target
    perp = np.array([-d[1], d[0]])
    off = float((pusher - cube) @ perp)
    if abs(off) >= clear:
        return target
    side = 1.0 if off >= 0 else -1.0
    return cube + side * clear * perp - 0.5 * clear * d  # beside the cube, a little before it


def make_play(env_id: str = "wmsuite/PushCube-v0", skill: float = 0.0, seed: int = 0, horizon: int = 1,
              bias: float = 0.0, modes: Iterable[str] | None = None, noise: float | None = None) -> PushCubePlay:
    """A play policy (a CLI policy spec: `wmsuite.envs.play:make_play{...}`); PushCube only for now."""
    if env_id != PushCubePlay.ENV_ID:
        raise ValueError(f"play behaviours exist for {PushCubePlay.ENV_ID} only, got {env_id!r}")
    return PushCubePlay(skill=skill, seed=seed, horizon=horizon, bias=bias, modes=modes, noise=noise)
