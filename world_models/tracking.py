"""Object positions the rule-based judges of the learned simulator believe (world_models/env.py).

A world model draws what it has seen often: a cube beside a pusher that never touched it, a cube held
up in fingers that closed on air. Its heads read such frames faithfully, so the task's success rule on
those readings fires. The "tracked" and "latched" judges apply the rule to positions that move only
as real objects can:

- tracked: an object's reading is believed only on frames where the agent is within `reach` of where
  the object was; elsewhere the object stays put (objects do not move untouched). With `reacquire` = k,
  a reading that puts the object within reach of the agent on k frames in a row is believed as well:
  the judge finds a push the frames show again after a few bad readings sent its belief astray (a
  riding camera's frames misplace the object just as the agent goes round it), while one frame that
  draws the object beside the agent cannot teleport it. With `step_slack` = s, a believed object moves
  on one frame at most as far as the agent moved plus s metres: a pushed object goes no faster than
  what pushes it, so one misdrawn frame moves the belief a step towards it, not onto it.
- latched: the same, and a grasp holds. On the frame whose gripper command closes (after one that
  opened) with the agent within reach of the object, the object is latched to the agent until a
  command opens the gripper: it takes its reading where that is within reach of the agent, and is
  otherwise carried with the agent at the offset it last had. Where the task names its fingers, the
  grasp also lets go on a frame whose fingers read closer than the object's hold gap (they closed on
  nothing: the object slipped out). Fingers carry what they closed on, even where the drawn object lags
  behind them; fingers that closed beside the object, or on nothing, carry nothing, wherever the model
  draws it.

`ObjectTracker` advances these positions frame by frame for a batch of sub-envs; the env runs one per
judge, and the probe tests run it on a real simulator's states (where it must keep every real outcome).

For a camera that rides on the agent the heads cannot say where the agent is (its frames show it at
the same place wherever it is): `dead_reckoned` moves it by the commanded motion instead, and
`anchored` places the objects the heads read relative to the camera at that agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ObjectTracking:
    """What the "tracked" and "latched" judges need of a task (the composer fills it in from the task probe)."""

    agent_xy: slice
    """agent_pos[..., agent_xy]: the agent's (x, y) in metres, or its (x, y, z) where the task's success
    is a height (Lift)."""
    object_xy: slice
    """environment_state[..., object_xy]: the manipulated object's position in metres, as many entries
    as agent_xy."""
    reach: float
    """Metres between the agent's and the object's centres within which the agent can move the object
    in one step (contact distance plus one step of motion and the heads' reading error)."""
    others_xy: tuple[slice, ...] = ()
    """environment_state slices of the other objects the agent moves (PushTwoCubes' green cube), each
    tracked the same way with the same reach (never latched)."""
    grasp_action: int | None = None
    """Index of the gripper command in an action (> 0 closes, <= 0 opens: robosuite's last entry); the
    "latched" judge needs it. None where the agent has no gripper."""
    fingers: tuple[int, ...] | None = None
    """agent_pos entries that give the fingers' opening in metres: two finger positions (their difference,
    robosuite's Panda) or one opening (PickPlace's); with it the latched judge holds a grasp only on
    frames whose fingers read at least `hold_gap` apart. None: the grasp holds until the command opens."""
    hold_gap: float = 0.0
    """Metres the fingers read apart while they hold the object (used with `fingers`)."""
    reacquire: int = 0
    """Frames in a row on which a reading must put an object within `reach` of the agent, while the agent
    is out of reach of where the judge believes it, for the judge to believe that reading (0: never)."""

    step_slack: float | None = None
    """Metres beyond the agent's own motion on a frame that a believed object may move on that frame
    (None: no bound, a believed reading is taken as it is)."""

    def __post_init__(self) -> None:
        if not self.reach > 0:
            raise ValueError(f"reach must be > 0 metres, got {self.reach!r}")
        sizes = {_size(s) for s in (self.agent_xy, *self.objects_xy)}
        if len(sizes) != 1:
            raise ValueError("agent_xy, object_xy and others_xy must name positions of one size (all (x, y) "
                             f"or all (x, y, z)), got {self.agent_xy}, {self.objects_xy}")
        if not (isinstance(self.reacquire, int) and self.reacquire >= 0):
            raise ValueError(f"reacquire must be a whole number of frames >= 0 (0: never), got {self.reacquire!r}")
        if self.step_slack is not None and not self.step_slack >= 0:
            raise ValueError(f"step_slack must be >= 0 metres (None: no bound), got {self.step_slack!r}")
        if self.grasp_action is not None and self.grasp_action < 0:
            raise ValueError(f"grasp_action must index the action (>= 0), got {self.grasp_action}")
        if self.fingers is not None and (self.grasp_action is None or not self.hold_gap > 0
                                         or len(self.fingers) not in (1, 2) or min(self.fingers) < 0):
            raise ValueError("fingers needs a grasp_action, a hold_gap > 0 m and one or two agent_pos indices, got "
                             f"fingers={self.fingers}, hold_gap={self.hold_gap}, grasp_action={self.grasp_action}")

    @classmethod
    def from_probe(cls, probe: Any) -> ObjectTracking:
        """What a task probe (wmsuite.envs.probes.TaskProbe, which this package never imports) says the
        judges compare: its `tracked` slices, `reach`, `grasp_action`, `fingers`, `hold_gap`, `reacquire`
        and `step_slack`."""
        agent, (held, *others) = probe.tracked
        return cls(agent_xy=agent, object_xy=held, reach=probe.reach, others_xy=tuple(others),
                   grasp_action=probe.grasp_action, fingers=probe.fingers, hold_gap=probe.hold_gap,
                   reacquire=probe.reacquire, step_slack=probe.step_slack)

    @property
    def dims(self) -> int:
        """Entries of one tracked position: 2 for (x, y), 3 for (x, y, z)."""
        return _size(self.agent_xy)

    def opening(self, agent_pos: np.ndarray) -> np.ndarray:
        """agent_pos (..., D) -> (...) the fingers' opening in metres (needs `fingers`)."""
        first = agent_pos[..., self.fingers[0]]
        return first - agent_pos[..., self.fingers[1]] if len(self.fingers) == 2 else first

    @property
    def objects_xy(self) -> tuple[slice, ...]:
        """Every tracked object's slice, the manipulated object first."""
        return (self.object_xy, *self.others_xy)


def _size(positions: slice) -> int:
    """Entries a slice of a state vector picks (the vectors are far shorter than 2**16)."""
    return len(range(*positions.indices(1 << 16)))


class ObjectTracker:
    """Believed object positions of `num_envs` sub-envs under one judge ("tracked" or, with
    latch=True, "latched"; see the module docstring)."""

    def __init__(self, tracking: ObjectTracking, num_envs: int, latch: bool = False) -> None:
        if latch and tracking.grasp_action is None:
            raise ValueError("the latched judge needs ObjectTracking.grasp_action, the gripper command's index "
                             "in an action (the task probe's grasp_action)")
        self.tracking, self.latch = tracking, latch
        self.positions = np.zeros((num_envs, len(tracking.objects_xy), tracking.dims), np.float32)  # (n, O, dims)
        self.held = np.zeros(num_envs, bool)  # latched: the fingers hold the manipulated object
        self.offset = np.zeros((num_envs, tracking.dims), np.float32)  # held: object - agent, as last read within reach
        self.closed = np.zeros(num_envs, bool)  # the last command closed the gripper
        self.sighted = np.zeros((num_envs, len(tracking.objects_xy)), np.int64)  # (n, O) frames in a row read beside an agent out of reach
        self.agent = np.full((num_envs, tracking.dims), np.nan, np.float32)  # (n, dims) the agent on the last frame

    def reset(self, rows: np.ndarray, env_state: np.ndarray, agent_pos: np.ndarray | None = None) -> None:
        """Start `rows` (m,) from their real states env_state (m, E) and agent_pos (m, D) (read with
        `step_slack` alone; without it the first frame's agent motion counts as none): objects where they
        are, gripper open (every task starts with it open), nothing held."""
        self.positions[rows] = np.stack([env_state[:, xy] for xy in self.tracking.objects_xy], 1)
        known = agent_pos is not None and self.tracking.step_slack is not None  # only step_slack reads it
        self.agent[rows] = agent_pos[:, self.tracking.agent_xy] if known else np.nan
        self.held[rows] = self.closed[rows] = False
        self.sighted[rows] = 0

    def update(self, agent_pos: np.ndarray, env_state: np.ndarray,
               actions: np.ndarray | None = None) -> np.ndarray:
        """agent_pos (n, H, D) and env_state (n, H, E) as read frame by frame, actions (n, H, A) the chunk
        (frame h follows action h; the latched judge needs them) -> env_state (n, H, E) with every
        tracked object's slice replaced by its believed position. Advances the tracker."""
        trk, out = self.tracking, env_state.copy()
        if self.latch and actions is None:
            raise ValueError("the latched judge needs the chunk's actions (the gripper commands)")
        for h in range(env_state.shape[1]):
            agent = agent_pos[:, h, trk.agent_xy]  # (n, dims)
            if trk.step_slack is not None:  # the agent's motion on this frame bounds the objects'
                moved = np.nan_to_num(np.linalg.norm(agent - self.agent, axis=-1))  # (n,)
                self.agent = agent.astype(np.float32)
            if self.latch:
                closing = actions[:, h, trk.grasp_action] > 0  # (n,)
                if trk.fingers is not None:  # fingers closed on nothing hold nothing
                    closing &= trk.opening(agent_pos[:, h]) >= trk.hold_gap
                near = np.linalg.norm(agent - self.positions[:, 0], axis=-1) < trk.reach
                grab = closing & ~self.closed & near
                self.offset[grab] = self.positions[grab, 0] - agent[grab]
                self.held = (self.held | grab) & closing  # an opening command lets go
                self.closed = closing
            for o, xy in enumerate(trk.objects_xy):
                read = env_state[:, h, xy]  # (n, dims)
                near = np.linalg.norm(agent - self.positions[:, o], axis=-1) < trk.reach  # (n,)
                if trk.reacquire:  # read beside the agent on reacquire frames in a row: believed again
                    beside = ~near & (np.linalg.norm(read - agent, axis=-1) < trk.reach)
                    self.sighted[:, o] = np.where(beside, self.sighted[:, o] + 1, 0)
                    near |= self.sighted[:, o] >= trk.reacquire
                if trk.step_slack is not None:  # towards the reading, no faster than the agent plus the slack
                    step = np.where(near[:, None], read - self.positions[:, o], 0.0)  # (n, dims)
                    length = np.linalg.norm(step, axis=-1, keepdims=True)
                    read = self.positions[:, o] + step * np.minimum(
                        1.0, (moved[:, None] + trk.step_slack) / np.maximum(length, 1e-12))
                self.positions[:, o] = np.where(near[:, None], read, self.positions[:, o])
                if o == 0 and self.latch:  # held: the reading where it is within reach of the agent, else carried
                    in_hand = self.held & (np.linalg.norm(read - agent, axis=-1) < trk.reach)
                    self.offset[in_hand] = read[in_hand] - agent[in_hand]
                    self.positions[:, 0] = np.where(self.held[:, None], agent + self.offset, self.positions[:, 0])
                out[:, h, xy] = self.positions[:, o]
        return out


def track_episode(tracking: ObjectTracking, agent_pos: np.ndarray, env_state: np.ndarray, actions: np.ndarray,
                  latch: bool = False) -> np.ndarray:
    """One recorded episode through a judge's tracker: agent_pos (T+1, D), env_state (T+1, E) and actions
    (T, A), state t+1 following action t -> (T+1, E) env_state with the tracked objects where the judge
    believes them (the first state is the real start). How a rule is checked on a simulator's true
    states, where it must keep every real outcome."""
    tracker = ObjectTracker(tracking, 1, latch=latch)
    tracker.reset(np.zeros(1, int), env_state[:1], agent_pos[:1])
    believed = tracker.update(agent_pos[None, 1:], env_state[None, 1:], actions[None])[0]  # (T, E)
    return np.concatenate([env_state[:1], believed])


def dead_reckoned(advance: Callable[[np.ndarray, np.ndarray], np.ndarray], agent_pos: np.ndarray,
                  actions: np.ndarray) -> np.ndarray:
    """agent_pos (n, D), a chunk's actions (n, H, A) -> (n, H, D) the agent after each action, by
    `advance` ((n, D), (n, j, A) -> (n, d <= D): where the actions command the agent) from agent_pos."""
    out = np.repeat(np.asarray(agent_pos, np.float64)[:, None], actions.shape[1], axis=1)  # (n, H, D)
    for j in range(actions.shape[1]):
        moved = np.asarray(advance(agent_pos, actions[:, : j + 1]), np.float64)  # (n, d)
        out[:, j, : moved.shape[-1]] = moved
    return out


def anchored(tracking: ObjectTracking, env_state: np.ndarray, read_agent: np.ndarray,
             planned: np.ndarray) -> np.ndarray:
    """The tracked objects' positions the heads read off frames of a camera riding on the agent, moved
    by where the agent is (`planned`, dead-reckoned) less where the heads put it: such a frame shows an
    object's place relative to the camera, so the heads' readings of the agent and of an object are off
    by the same amount. env_state (n, H, E), read_agent and planned (n, H, D) -> (n, H, E)."""
    offset = planned[..., tracking.agent_xy] - read_agent[..., tracking.agent_xy]  # (n, H, d)
    out = env_state.copy()
    for sl in (tracking.object_xy, *tracking.others_xy):
        k = min(offset.shape[-1], len(range(out.shape[-1])[sl]))
        out[..., sl][..., :k] += offset[..., :k]
    return out
