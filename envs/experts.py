"""Scripted experts for the built-in tasks, with a `skill` knob spanning ~0% to ~100% success.

    expert = make_expert("wmsuite/PushCube-v0", skill=0.5, seed=0)
    chunk = expert.predict_action_chunk(obs_batch)  # (B, 1, A) float32
    # on the command line: wmsuite.envs.experts:make_expert{"env_id": "wmsuite/PushCube-v0", "skill": 0.5}

Experts follow the Policy contract of wmsuite/policy.py and act from the batched privileged
observation (`agent_pos`, `environment_state`), never from pixels. Each environment row of the batch
has its own memory: a phase, counters and a *personality* drawn when its episode starts from a
per-episode generator (spawned from `seed`, so a run is reproducible). `reset_envs(indices)` starts
new episodes for those rows; `reset()` forgets every row (the seed stream continues, so the next
batch of episodes gets fresh personalities). `reset_envs(indices, episodes=...)` (the rollout engine's
`episode_rng`) names each new episode's index k, whose generator is then the k-th child of `seed`
whatever ran before: what an uninterrupted run draws, and a resumed one too.

How skill acts. With probability `skill` an episode is *competent*; otherwise it gets one failure mode,
drawn uniformly from the task's list. Failure modes are systematic mistakes that a competent expert's
retry logic repeats rather than fixes, so they fail for qualitatively different reasons:
    PushCube:  wrong_side (approaches from the goal side and pushes the cube away), freeze (stops
               moving for good after a few steps), early_stop (believes the cube arrived when 9-13 cm short)
               and, only when asked for with `failure_modes` (world-model data that the default
               modes lack): hover (goes round to the cube but stands off 1-5 cm short of touching it,
               drifting about at that distance: the agent near the object, the object still) and poke
               (strokes through the cube from random sides, head-on to grazing, at random speeds:
               contact at every angle, where the experts push head-on along the goal line)
    PushTwoCubes: PushCube's, and one_cube (believes the task done once the first cube is in)
    PickPlace: misaligned (lines the fingers up 5-7 cm beside the cube), early_close (misjudges the
               grasp height and closes 5-7 cm too high), late_close (starts lifting before closing),
               early_release (opens the gripper while lifting, 4-10 cm up, dropping the cube), freeze
On top of that every episode, competent or not, gets Gaussian action noise of std
`NOISE * (1 - skill)` and hesitates (holds still for 2-5 steps) with per-step probability
`HESITATE * (1 - skill)`. Skill 1 is noise-free and competent; skill 0 always has a failure mode. `failure_modes` picks which
modes are drawn (default: the task's `FAILURE_MODES`; `EXTRA_MODES` are only drawn when named there).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from wmsuite.envs import make_env
from wmsuite.envs.pick_place import ACTION_SCALE as PP_SCALE
from wmsuite.envs.pick_place import CUBE_HALF as PP_CUBE_HALF
from wmsuite.envs.pick_place import is_success_from_env_state as pick_place_success
from wmsuite.envs.push_cube import ACTION_SCALE as PC_SCALE
from wmsuite.envs.push_cube import CUBE_HALF as PC_CUBE_HALF
from wmsuite.envs.push_cube import GOAL_RADIUS


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

    def predict_action_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        """obs {"agent_pos": (B, D), "environment_state": (B, E), ...} -> (B, horizon, A) float32 in [-1, 1]."""
        agent_pos = _batch(obs, "agent_pos", self.AGENT_POS_DIM, self.ENV_ID)  # (B, D)
        env_state = _batch(obs, "environment_state", self.ENV_STATE_DIM, self.ENV_ID)  # (B, E)
        batch = len(agent_pos)
        if len(env_state) != batch:
            raise ValueError(f"agent_pos has {batch} rows but environment_state has {len(env_state)}")
        if not self._memory:
            self._memory = [None] * batch
        elif len(self._memory) != batch:
            raise ValueError(f"{type(self).__name__} was driving {len(self._memory)} envs and got a batch of "
                             f"{batch}; call reset() before changing the batch size")
        actions = np.empty((batch, self.horizon, self.ACTION_DIM), np.float32)  # (B, H, A)
        for i in range(batch):
            mem = self._memory[i]
            if mem is None:
                mem = self._memory[i] = self._new_episode(self._episode_index.pop(i, None))
            pos = agent_pos[i].astype(np.float64)
            for h in range(self.horizon):  # open loop: objects held still, the agent moved by its actions
                actions[i, h] = self._step(pos, env_state[i], mem)
                pos = pos.copy()
                pos[: self.MOTION_DIM] += self.MOTION_SCALE * actions[i, h, : self.MOTION_DIM]
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

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        """(A,) action in [-1, 1] before noise, or None to hold still on purpose."""
        raise NotImplementedError


class PushCubeExpert(ScriptedExpert):
    """Go round the cube to the point behind it on the goal line, then push along that line."""

    ENV_ID = "wmsuite/PushCube-v0"
    AGENT_POS_DIM = 2
    ENV_STATE_DIM = 6
    ACTION_DIM = 2
    MOTION_DIM = 2
    MOTION_SCALE = PC_SCALE
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop")
    EXTRA_MODES = ("hover", "poke")
    CONTACT = PC_CUBE_HALF + 0.02  # m, pusher centre to cube centre when touching a face
    PUSH_STEP = 0.02  # m per step while pushing
    CLEAR = 0.085  # m, sideways clearance when going round the cube

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        mem["done"] = False
        mem["pushing"] = False
        # Where the expert believes the cube has arrived (a competent one: well inside the goal).
        mem["stop_dist"] = rng.uniform(0.09, 0.13) if mem["mode"] == "early_stop" else 0.4 * GOAL_RADIUS
        if mem["mode"] == "hover":
            mem["standoff"] = 0.0  # pusher centre to cube centre; drawn with the angle at the first step
            mem["redraw"] = 0
        mem["stroke"] = None  # poke: the stroke under way (drawn when the last one ends)

    def _hover(self, pusher: np.ndarray, cube: np.ndarray, d: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """The hover mode's target: a stand-off point 1-5 cm short of touching the cube, within 1.2 rad of
        the back of the push line, redrawn every 6-15 steps. The pusher goes there along an arc round the
        cube (at most 0.4 rad a step), so it never cuts across the cube."""
        rng = mem["rng"]
        if mem["redraw"] <= 0:
            mem["standoff"] = self.CONTACT + rng.uniform(0.01, 0.05)
            mem["angle"] = rng.uniform(-1.2, 1.2)
            mem["redraw"] = int(rng.integers(6, 16))
        mem["redraw"] -= 1
        rel = pusher - cube
        back = np.arctan2(-d[1], -d[0])
        now = np.arctan2(rel[1], rel[0]) - back
        angle = back + now + np.clip(np.angle(np.exp(1j * (mem["angle"] - now))), -0.4, 0.4)
        return cube + mem["standoff"] * np.array([np.cos(angle), np.sin(angle)])

    POKE_START = 0.09  # m, stroke start: this far from the cube's centre (clear of it)

    def _poke(self, pusher: np.ndarray, cube: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """The poke mode's action: strokes along a line fixed when drawn, from a side at a random angle,
        offset sideways from the cube's centre by up to 4.5 cm (head-on to grazing), at a constant speed
        of 0.3-1 of full, running 1-10 cm past first touch; the pusher goes round the cube to each start."""
        rng, st = mem["rng"], mem["stroke"]
        if st is None or st["steps"] > 40:
            theta = rng.uniform(-np.pi, np.pi)
            side = np.array([np.cos(theta), np.sin(theta)])  # from the cube towards the start
            perp = np.array([-side[1], side[0]])
            st = mem["stroke"] = {"side": side, "start": cube + self.POKE_START * side + rng.uniform(-0.045, 0.045) * perp,
                                  "speed": rng.uniform(0.3, 1.0), "steps": 0, "go": False,
                                  "length": self.POKE_START - self.CONTACT + rng.uniform(0.01, 0.10)}
        st["steps"] += 1
        if not st["go"]:
            to_start = st["start"] - pusher
            if float(np.linalg.norm(to_start)) < 0.012:
                st["go"], st["origin"] = True, pusher.copy()
            else:  # go round the cube at the start's distance, at most 0.6 rad a step
                rel, aim = pusher - cube, st["start"] - cube
                now, want = np.arctan2(rel[1], rel[0]), np.arctan2(aim[1], aim[0])
                turn = np.angle(np.exp(1j * (want - now)))
                if abs(turn) < 0.6:
                    target = st["start"]
                else:
                    phi = now + np.sign(turn) * 0.6
                    target = cube + max(float(np.linalg.norm(aim)), self.CLEAR) * np.array([np.cos(phi), np.sin(phi)])
                return np.clip((target - pusher) / PC_SCALE, -1.0, 1.0)
        if float((pusher - st["origin"]) @ -st["side"]) >= st["length"]:
            mem["stroke"] = None  # done: the next step draws a new stroke
        return -st["speed"] * st["side"]

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        pusher, cube, goal = agent_pos[:2], env_state[:2], env_state[4:6]
        if mem["mode"] == "poke":
            return self._poke(pusher, cube, mem)
        to_goal = goal - cube
        dist = float(np.linalg.norm(to_goal))
        if mem["done"] or dist < mem["stop_dist"]:
            mem["done"] = mem["mode"] == "early_stop"  # the early stopper never looks again
            return None
        d = to_goal / dist  # push direction
        if mem["mode"] == "wrong_side":
            d = -d
        perp = np.array([-d[1], d[0]])
        rel = pusher - cube
        along, lateral = float(rel @ d), float(rel @ perp)
        if mem["pushing"] and (abs(lateral) > 0.03 or along > -0.03):
            mem["pushing"] = False  # slipped off the cube's back face
        if not mem["pushing"] and abs(lateral) < 0.012 and -0.08 < along < -0.035:
            mem["pushing"] = True  # lined up behind the cube
        angle_to_behind = float(np.angle(np.exp(1j * (np.arctan2(lateral, along) - np.pi))))  # (-pi, pi]
        if mem["mode"] == "hover" and abs(angle_to_behind) < 1.3:  # near its side of the cube: stand off
            target = self._hover(pusher, cube, d, mem)
        elif mem["pushing"]:
            target = cube - d * (self.CONTACT - self.PUSH_STEP)
        elif abs(angle_to_behind) < 0.5:  # roughly behind: go to the line-up point
            target = cube - d * (self.CONTACT + 0.02)
        else:  # go round the cube on a circle, at most 0.6 rad at a time
            phi = np.arctan2(lateral, along) - np.sign(angle_to_behind) * 0.6
            target = cube + self.CLEAR * (np.cos(phi) * d + np.sin(phi) * perp)
        return np.clip((target - pusher) / PC_SCALE, -1.0, 1.0)


class PushTwoCubesExpert(PushCubeExpert):
    """PushCube's expert, one cube at a time: first the cube whose push line (from the cube to its
    goal) passes farther from the other cube, then the other, and back to the first if the second
    push knocked it out of its goal. Its extra failure mode one_cube believes the task done once the
    first cube is in (a long-horizon mistake: half the work)."""

    ENV_ID = "wmsuite/PushTwoCubes-v0"
    ENV_STATE_DIM = 12
    FAILURE_MODES = ("wrong_side", "freeze", "early_stop", "one_cube")

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        super()._begin(mem, rng)
        mem["target"] = None  # the cube being pushed (0 red, 1 green), chosen at the first step

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray | None:
        cubes, goals = (env_state[0:4], env_state[4:8]), (env_state[8:10], env_state[10:12])
        if mem["target"] is None:
            mem["target"] = int(np.argmax([_clearance(cubes[i][:2], goals[i], cubes[1 - i][:2]) for i in (0, 1)]))
        t = mem["target"]
        arrived = [float(np.linalg.norm(c[:2] - g)) < mem["stop_dist"] for c, g in zip(cubes, goals)]
        if arrived[t] and not mem["done"]:
            if mem["mode"] == "one_cube" or arrived[1 - t]:
                mem["done"] = mem["mode"] == "one_cube"  # one_cube never looks again
                return None
            t = mem["target"] = 1 - t
            mem["pushing"] = False
        return super()._act(agent_pos, np.concatenate([cubes[t], goals[t]]), mem)


def _clearance(start: np.ndarray, end: np.ndarray, point: np.ndarray) -> float:
    """Distance from `point` to the segment start-end (all (2,))."""
    seg = end - start
    u = float(np.clip((point - start) @ seg / max(float(seg @ seg), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(start + u * seg - point))


class PickPlaceExpert(ScriptedExpert):
    """Hover over the cube, descend, close, lift, carry over the target, lower, open; retry on a lost cube."""

    ENV_ID = "wmsuite/PickPlace-v0"
    AGENT_POS_DIM = 4
    ENV_STATE_DIM = 6
    ACTION_DIM = 4
    MOTION_DIM = 3
    MOTION_SCALE = PP_SCALE
    FAILURE_MODES = ("misaligned", "early_close", "late_close", "early_release", "freeze")
    NOISE = 0.3
    Z_HOVER = 0.1  # m, fingertip height when lining up over the cube
    Z_CARRY = 0.12  # m, fingertip height while carrying
    GRASP_BELOW = 0.015  # m, fingertips this far below the cube's centre when grasping

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        mode = mem["mode"]
        mem.update(phase="reach", grip=-1.0, k=0)
        side = rng.choice([-1.0, 1.0])
        # misaligned: lines the fingers up this far beside the cube (across the closing direction).
        mem["offset"] = np.array([0.0, side * rng.uniform(0.05, 0.07)]) if mode == "misaligned" else np.zeros(2)
        # early_close: misjudges the grasp height by this much and closes there, above the cube.
        mem["close_above"] = rng.uniform(0.05, 0.07) if mode == "early_close" else 0.0
        # early_release: opens the gripper once the fingertips are this high during the lift.
        mem["release_at"] = rng.uniform(0.04, 0.1) if mode == "early_release" else np.inf

    def _hold(self, mem: dict[str, Any]) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, mem["grip"]])

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        hand, opening, cube, target = agent_pos[:3], agent_pos[3], env_state[:3], env_state[3:6]
        phase, mode = mem["phase"], mem["mode"]
        held = cube[2] - hand[2] > -0.01 and np.linalg.norm(cube[:2] - hand[:2]) < 0.03
        z_grasp = cube[2] - self.GRASP_BELOW
        goal = hand.copy()
        if phase in ("lift", "carry", "lower") and not held:  # the cube is not in the hand: start over
            phase, mem["grip"] = "reach", -1.0
        if phase == "retreat" and not pick_place_success(env_state) and cube[2] < PP_CUBE_HALF + 0.005:
            phase = "reach"
        if phase == "reach":
            mem["grip"] = -1.0
            goal = np.array([*(cube[:2] + mem["offset"]), max(self.Z_HOVER, z_grasp + 0.05)])
            if np.linalg.norm(hand[:2] - goal[:2]) < 0.01 and opening > 0.07:
                phase = "descend"
        if phase == "descend":
            goal = np.array([*(cube[:2] + mem["offset"]), z_grasp + mem["close_above"]])
            if hand[2] - goal[2] < 0.006:
                phase, mem["k"] = "close", 0
        if phase == "close":
            mem["k"] += 1
            late = mode == "late_close" and mem["k"] <= 2
            mem["grip"] = -1.0 if late else 1.0
            goal = hand + [0.0, 0.0, PP_SCALE] if late else np.array([*hand[:2], hand[2]])
            if mem["k"] >= 5 or (mem["k"] >= 3 and opening < 0.06):
                phase = "lift"
        if phase == "lift":
            goal = np.array([*hand[:2], self.Z_CARRY])
            if hand[2] > mem["release_at"]:
                phase, mem["grip"], mem["k"] = "release", -1.0, 0
            elif hand[2] > self.Z_CARRY - 0.015:
                phase = "carry"
        if phase == "carry":
            offset = cube[:2] - hand[:2]  # where the cube sits in the hand
            goal = np.array([*(target[:2] - offset), self.Z_CARRY])
            if np.linalg.norm(cube[:2] - target[:2]) < 0.008:
                phase = "lower"
        if phase == "lower":
            offset = cube[:2] - hand[:2]
            goal = np.array([*(target[:2] - offset), hand[2] - (cube[2] - PP_CUBE_HALF) - 0.002])
            if cube[2] < PP_CUBE_HALF + 0.003:
                phase, mem["k"] = "release", 0
        if phase == "release":
            mem["grip"], mem["k"] = -1.0, mem["k"] + 1
            goal = hand.copy()
            if mem["k"] >= 2:
                phase = "retreat"
        if phase == "retreat":
            goal = np.array([*hand[:2], self.Z_HOVER])
        mem["phase"] = phase
        move = np.clip((goal - hand) / PP_SCALE, -1.0, 1.0)
        return np.array([*move, mem["grip"]])


# env id -> expert class: the one registry of experts; tests sweep it.
EXPERTS: dict[str, type[ScriptedExpert]] = {cls.ENV_ID: cls for cls in (PushCubeExpert, PickPlaceExpert,
                                                                        PushTwoCubesExpert)}


def make_expert(env_id: str, skill: float = 1.0, seed: int = 0, horizon: int = 1, bias: float = 0.0,
                failure_modes: Iterable[str] | None = None) -> ScriptedExpert:
    """The scripted expert of a built-in task (a CLI policy spec: `wmsuite.envs.experts:make_expert{...}`)."""
    if env_id.startswith("wmsuite/robosuite-"):
        if horizon != 1 or bias or failure_modes is not None:
            raise ValueError("the robosuite experts act one step at a time (horizon 1), without bias, with "
                             "their own failure modes")
        from wmsuite.envs.robosuite_experts import make_robosuite_expert

        return make_robosuite_expert(env_id, skill=skill, seed=seed)
    if env_id not in EXPERTS:
        raise ValueError(f"no scripted expert for {env_id!r}; experts exist for {', '.join(EXPERTS)} "
                         "and the robosuite Lift and Stack tasks")
    return EXPERTS[env_id](skill=skill, seed=seed, horizon=horizon, bias=bias, failure_modes=failure_modes)


def run_expert(env_id: str, skill: float, episodes: int, seed: int = 0, **env_kwargs: Any) -> list[dict[str, Any]]:
    """Run the expert for `episodes` episodes (env seeds seed, seed+1, ...) in one env.

    Returns one record per episode: {"success": bool, "length": int, "mode": str}. Pixels are not
    needed by the expert, so `cameras=()` is the default here.
    """
    env_kwargs.setdefault("cameras", ())
    env = make_env(env_id, **env_kwargs)
    expert = make_expert(env_id, skill=skill, seed=seed)
    records = []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            expert.reset()
            success, length, done = bool(info["is_success"]), 0, False
            while not done:
                batch = {k: v[None] for k, v in obs.items() if k != "pixels"}
                action = expert.select_action(batch)[0]
                mode = expert.modes()[0]
                obs, _, terminated, truncated, info = env.step(action)
                success, length, done = bool(info["is_success"]), length + 1, terminated or truncated
            records.append({"success": success, "length": length, "mode": mode})
    finally:
        env.close()
    return records


def _batch(obs: dict[str, Any], key: str, dim: int, env_id: str) -> np.ndarray:
    if key not in obs:
        raise KeyError(f"the {env_id} expert needs obs[{key!r}] (batched, (B, {dim})); got keys {sorted(obs)}")
    x = np.asarray(obs[key])
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"the {env_id} expert needs obs[{key!r}] of shape (B, {dim}), got {x.shape}; "
                         "add a leading batch axis to a single observation")
    return x


def _main() -> None:
    """`python -m wmsuite.envs.experts [episodes]`: success rate per skill and failure mode, every task."""
    import sys
    from collections import Counter

    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    print(f"| task | skill | success ({episodes} episodes) | successes / episodes per mode |")
    print("|---|---|---|---|")
    for env_id in EXPERTS:
        for skill in (0.0, 0.25, 0.5, 0.75, 1.0):
            records = run_expert(env_id, skill, episodes, seed=0)
            wins, counts = Counter(r["mode"] for r in records if r["success"]), Counter(r["mode"] for r in records)
            modes = ", ".join(f"{m} {wins[m]}/{n}" for m, n in sorted(counts.items()))
            rate = sum(r["success"] for r in records) / episodes
            print(f"| {env_id} | {skill:.2f} | {rate:.2f} | {modes} |")


if __name__ == "__main__":
    _main()
