"""Scripted experts for robosuite Lift and Stack, driving the OSC_POSE controller, with a skill knob.

    expert = make_robosuite_expert("wmsuite/robosuite-Lift-v0", skill=0.9, seed=0, horizon=4)
    expert.reset_envs([0, 1]); chunk = expert.predict_action_chunk(obs_batch)   # (B, 4, 7)

The expert reads only `agent_pos` (eef position, eef quaternion xyzw, finger qpos) and
`environment_state` (robosuite's object-state) and follows a phase machine: hover over the cube,
turn the gripper to the cube's yaw, descend, close, lift (Lift), then carry over the base cube,
lower and release (Stack). Actions are OSC_POSE deltas in [-1, 1]: position (3), axis-angle (3),
gripper (-1 open, +1 close).

Chunks (`horizon` H > 1, a world model's chunk length): the expert plans H actions from one
observation, open loop, moving its own copy of the end effector by what the OSC controller does with
an action (`POS_STEP` metres and `YAW_STEP` radians per unit and step, measured in robosuite Lift at
steady state) and the cube with it while it holds the cube; it re-plans from the next observation.

Skill, as for the built-in experts: each episode draws, with probability `1 - skill`, one failure
mode (uniformly among `FAILURE_MODES`), and adds Gaussian action noise of std `0.15 * (1 - skill)`.
The failures are qualitatively different, so a policy zoo built from skills spans distinct errors:

    offset      descends 4.5-6 cm beside the cube (across the fingers) and closes on air
    early_close closes 4-6 cm above the cube and lifts nothing
    drop        opens the gripper as the cube leaves the table (Lift) or while carrying it (Stack)
    freeze      stops over the cube and hovers there, gripper open, until the time limit

skill=1 succeeds almost always, skill=0 almost never, and success falls roughly linearly in between
(docs/real-benchmarks.md has the table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FAILURE_MODES = ("offset", "early_close", "drop", "freeze")

HOVER = 0.08  # m above the grasp point while approaching
LIFT_HEIGHT = 0.12  # m the cube is raised above its start (Lift succeeds at > 0.04 above the table)
STACK_CLEARANCE = 0.10  # m above the base cube while carrying
POS_GAIN = 12.0  # action units per metre of position error (1.0 moves ~1 cm a step at 20 Hz)
YAW_GAIN = 2.0  # action units per radian of yaw error
OFFSET_RANGE = (0.045, 0.06)  # m, the 'offset' failure's grasp error
POS_STEP = 0.0125  # m the end effector moves per step per unit of position action (OSC_POSE, 20 Hz)
YAW_STEP = 0.095  # rad it turns about z per step per unit of action[5]
CLOSE_STEPS = 10  # the Panda gripper command integrates to fully closed in ~8 steps
OPEN_STEPS = 10

# Layout of robosuite's object-state for the supported tasks: name -> slice.
STATE_LAYOUT = {
    "Lift": {"cube_pos": slice(0, 3), "cube_quat": slice(3, 7)},
    "Stack": {"cube_pos": slice(0, 3), "cube_quat": slice(3, 7), "base_pos": slice(7, 10), "base_quat": slice(10, 14)},
}
EXPERT_TASKS = tuple(STATE_LAYOUT)
CUBE_HALF = {"Lift": 0.021, "Stack": 0.021}  # mean half size of the grasped cube (robosuite samples 0.020-0.022)
BASE_HALF = 0.025  # Stack's cubeB half size (0.025-0.027)


def quat_yaw(q: np.ndarray) -> float:
    """Yaw (rotation about world z) of the frame's x axis; `q` is robosuite's xyzw quaternion."""
    x, y, z, w = (float(v) for v in q)
    r00 = 1 - 2 * (y * y + z * z)
    r10 = 2 * (x * y + z * w)
    return float(np.arctan2(r10, r00))


def turn_yaw(q: np.ndarray, angle: float) -> np.ndarray:
    """robosuite's xyzw quaternion `q` turned by `angle` about world z (the rotation applied first
    in the world frame: q' = rz(angle) * q)."""
    x, y, z, w = (float(v) for v in q)
    c, s = np.cos(angle / 2), np.sin(angle / 2)  # rz = (0, 0, s, c)
    return np.array([c * x - s * y, c * y + s * x, c * z + s * w, c * w - s * z])


def wrap(angle: float, period: float) -> float:
    """Wrap into [-period/2, period/2)."""
    return float((angle + period / 2) % period - period / 2)


@dataclass
class _EnvPlan:
    """Per-environment memory of the phase machine."""

    phase: str = "approach"
    steps_in_phase: int = 0
    failure: str | None = None
    offset: np.ndarray | None = None  # (3,) grasp-point error for the 'offset' and 'early_close' modes
    drop_at: float = 0.5  # Lift: metres risen before 'drop' opens the gripper; Stack: fraction of the carry
    start_z: float | None = None
    hold_pos: np.ndarray | None = None  # (3,) where 'freeze' hovers or 'drop' let go


class RobosuiteExpert:
    """Scripted pick (Lift) and pick-and-place (Stack) expert for a batch of environments."""

    def __init__(self, task: str = "Lift", skill: float = 1.0, seed: int = 0, noise_scale: float = 0.15,
                 force_failure: str | None = None, horizon: int = 1) -> None:
        """
        Args:
            task: 'Lift' or 'Stack'.
            skill: in [0, 1]; each episode fails on purpose with probability 1 - skill.
            seed: seed of the expert's own generator (failure draws and action noise).
            noise_scale: action noise std at skill 0 (it falls linearly to 0 at skill 1).
            force_failure: always use this failure mode (diagnostics and tests); None draws as above.
            horizon: actions per chunk, planned open loop from one observation (module docstring).
        """
        if not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be an int >= 1, got {horizon!r}")
        self.horizon = horizon
        if force_failure is not None and force_failure not in FAILURE_MODES:
            raise ValueError(f"force_failure must be one of {FAILURE_MODES} or None, got {force_failure!r}")
        self.force_failure = force_failure
        if task not in STATE_LAYOUT:
            raise ValueError(f"no scripted robosuite expert for task {task!r}; experts exist for {list(EXPERT_TASKS)}")
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {skill}")
        if noise_scale < 0:
            raise ValueError(f"noise_scale must be >= 0, got {noise_scale}")
        self.task, self.skill, self.seed = task, float(skill), int(seed)
        self.noise_std = noise_scale * (1.0 - self.skill)
        self.layout = STATE_LAYOUT[task]
        self.rng = np.random.default_rng(seed)
        self.plans: list[_EnvPlan] = []

    # ---- Policy contract -------------------------------------------------------------------------

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.plans = []

    def reset_envs(self, indices: Sequence[int]) -> None:
        """Start a new episode (and draw its failure mode) in each listed environment."""
        for i in indices:
            i = int(i)
            while len(self.plans) <= i:
                self.plans.append(self._new_plan())
            self.plans[i] = self._new_plan()

    def predict_action_chunk(self, obs: dict[str, Any], env_indices: Sequence[int] | None = None) -> np.ndarray:
        """(B, horizon, 7) OSC_POSE actions for a batch of observations; row b is environment b, or
        env_indices[b] when given (the engine asks only for the environments that need a chunk)."""
        agent = np.asarray(obs["agent_pos"], np.float64)  # (B, 9)
        scene = np.asarray(obs["environment_state"], np.float64)  # (B, E)
        batch = agent.shape[0]
        slots = list(range(batch)) if env_indices is None else [int(i) for i in env_indices]
        if len(slots) != batch:
            raise ValueError(f"env_indices names {len(slots)} environments for a batch of {batch}")
        if len(self.plans) <= max(slots, default=-1):
            self.reset_envs(range(len(self.plans), max(slots) + 1))
        out = np.zeros((batch, self.horizon, 7), np.float32)
        cube = self.layout["cube_pos"]
        for b, slot in enumerate(slots):
            me, world = agent[b].copy(), scene[b].copy()
            for h in range(self.horizon):  # open loop: the controller's response predicted; a cube not held stays
                action = self._act(self.plans[slot], me, world)
                if self.noise_std > 0:
                    action[:6] += self.rng.normal(0.0, self.noise_std, 6)
                out[b, h] = np.clip(action, -1.0, 1.0)
                move = POS_STEP * out[b, h, :3]
                if self.plans[slot].phase in ("lift", "carry", "lower", "hold") and out[b, h, 6] > 0:
                    world[cube] += move  # a held cube goes where the fingers go
                me[:3] += move
                me[3:7] = turn_yaw(me[3:7], YAW_STEP * float(out[b, h, 5]))
        return out

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        return self.predict_action_chunk(obs)[:, 0]

    # ---- the phase machine --------------------------------------------------------------------------

    def _new_plan(self) -> _EnvPlan:
        plan = _EnvPlan()
        fails = self.rng.random() < 1.0 - self.skill
        mode = FAILURE_MODES[int(self.rng.integers(len(FAILURE_MODES)))]
        plan.failure = self.force_failure or (mode if fails else None)
        if plan.failure == "offset":
            plan.offset = np.array([self.rng.choice([-1.0, 1.0]) * self.rng.uniform(*OFFSET_RANGE), 0.0, 0.0])
        elif plan.failure == "early_close":
            plan.offset = np.array([0.0, 0.0, self.rng.uniform(0.04, 0.06)])
        elif plan.failure == "drop":  # Lift succeeds 0.04 m above the table, ~0.009 m above the resting cube
            plan.drop_at = float(self.rng.uniform(0.0, 0.003) if self.task == "Lift" else self.rng.uniform(0.2, 0.8))
        return plan

    def _goto(self, plan: _EnvPlan, phase: str) -> None:
        plan.phase, plan.steps_in_phase = phase, 0

    def _act(self, plan: _EnvPlan, agent: np.ndarray, scene: np.ndarray) -> np.ndarray:
        eef, eef_quat = agent[:3], agent[3:7]
        cube = scene[self.layout["cube_pos"]]
        cube_yaw = quat_yaw(scene[self.layout["cube_quat"]])
        grasp = cube.copy()
        if plan.offset is not None:  # the offset is given in the cube's frame (x: across the closing fingers)
            c, s = np.cos(cube_yaw), np.sin(cube_yaw)
            grasp += [c * plan.offset[0] - s * plan.offset[1], s * plan.offset[0] + c * plan.offset[1], plan.offset[2]]
        plan.steps_in_phase += 1
        gripper = -1.0
        target = eef.copy()
        yaw_error = wrap(cube_yaw - quat_yaw(eef_quat), np.pi / 2)  # the cube looks the same every 90 degrees
        turn = True

        if plan.phase == "approach":
            target = grasp + [0.0, 0.0, HOVER]
            if np.linalg.norm((target - eef)[:2]) < 0.01 and abs(target[2] - eef[2]) < 0.02 and abs(yaw_error) < 0.05:
                if plan.failure == "freeze":
                    plan.hold_pos = target.copy()
                    self._goto(plan, "hold")
                else:
                    self._goto(plan, "descend")
        if plan.phase == "descend":
            target = grasp.copy()
            if abs(target[2] - eef[2]) < 0.008 or plan.steps_in_phase > 60:
                self._goto(plan, "close")
        if plan.phase == "close":
            target, gripper = grasp.copy(), 1.0
            if plan.steps_in_phase >= CLOSE_STEPS:
                plan.start_z = float(cube[2])
                self._goto(plan, "lift")
        if plan.phase in ("lift", "carry", "lower", "release", "retreat"):
            gripper, turn = 1.0, False
        if plan.phase == "lift":
            target = eef.copy()
            target[2] = (plan.start_z or cube[2]) + LIFT_HEIGHT
            if self.task == "Stack" and eef[2] > target[2] - 0.02:
                self._goto(plan, "carry")
            elif self.task == "Lift" and eef[2] >= target[2] - 0.01:
                self._goto(plan, "hold")
            if plan.failure == "drop" and plan.phase == "lift":
                if cube[2] - (plan.start_z or cube[2]) > plan.drop_at:
                    plan.hold_pos = eef - [0.0, 0.0, 0.01]  # stop rising while the fingers open
                    self._goto(plan, "dropped")
        if plan.phase == "carry":
            base = scene[self.layout["base_pos"]]
            target = base + [0.0, 0.0, STACK_CLEARANCE]
            if plan.failure == "drop" and plan.steps_in_phase > 5 + 20 * plan.drop_at:
                plan.hold_pos = eef.copy()
                self._goto(plan, "dropped")
            elif np.linalg.norm((target - eef)[:2]) < 0.008:
                self._goto(plan, "lower")
        if plan.phase == "lower":
            base = scene[self.layout["base_pos"]]
            # eef sits at the grasped cube's centre: put its bottom just above the base cube's top
            target = base + [0.0, 0.0, BASE_HALF + CUBE_HALF[self.task] + 0.012]
            if abs(target[2] - eef[2]) < 0.006 or plan.steps_in_phase > 60:
                self._goto(plan, "release")
        if plan.phase == "release":
            target, gripper = eef.copy(), -1.0
            if plan.steps_in_phase >= OPEN_STEPS:
                self._goto(plan, "retreat")
        if plan.phase == "retreat":
            target, gripper = eef + [0.0, 0.0, 0.05], -1.0
        if plan.phase == "dropped":
            target, gripper, turn = plan.hold_pos.copy(), -1.0, False
        if plan.phase == "hold":
            if plan.failure == "freeze":  # hover over the cube, gripper open
                target, gripper, turn = plan.hold_pos.copy(), -1.0, False
            else:  # Lift done: keep the cube up
                target, gripper, turn = eef.copy(), 1.0, False
                target[2] = (plan.start_z or cube[2]) + LIFT_HEIGHT

        action = np.zeros(7)
        action[:3] = POS_GAIN * (target - eef)
        action[5] = YAW_GAIN * yaw_error if turn else 0.0
        action[6] = gripper
        return np.clip(action, -1.0, 1.0)


def make_robosuite_expert(env_id: str, skill: float = 1.0, seed: int = 0, horizon: int = 1) -> RobosuiteExpert:
    """The scripted expert of a registered robosuite id (`wmsuite/robosuite-<Task>-v0`)."""
    prefix, suffix = "wmsuite/robosuite-", "-v0"
    if not (env_id.startswith(prefix) and env_id.endswith(suffix)):
        raise ValueError(f"{env_id!r} is not a wmsuite robosuite id (wmsuite/robosuite-<Task>-v0)")
    return RobosuiteExpert(task=env_id[len(prefix):-len(suffix)], skill=skill, seed=seed, horizon=horizon)
