"""Task probes: what generic code may know about a task, in one registry keyed by env id.

    from wmsuite.envs import get_probe
    probe = get_probe("wmsuite/PickPlace-v0")
    probe.object_xy_from_env_state(episode.env_state)  # (T+1, E) -> (T+1, 2) metres
    probe.object_xy_from_frames(frames)                # (N, S, S, 3) uint8 from probe.camera -> (N, 2), NaN unseen

The generic layers (`eval_harness/`, `world_models/`, the core) name no task. Where they need the
manipulated object's position, the agent's position, success from `environment_state`, a detector that
reads the object off a generated frame, or a way to nudge the object at an episode's start, the
composer (`eval_harness/`, the CLI) looks the task's probe up here and hands it, or its plain
callables, down. `world_models/` never imports this module.

Every built-in id in `wmsuite.envs.ENV_IDS` has a probe (tests/envs/test_probes.py fails on one
without); wrapped tasks have one where it can be defined without importing their simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmsuite.envs import pick_place, push_colors, push_cube, push_cube_ego, push_two_cubes, robosuite_env


@dataclass(frozen=True)
class TaskProbe:
    """What generic code may know about one task (see the module docstring)."""

    env_id: str
    """The registered Gymnasium id the probe describes."""
    camera: str
    """The camera whose frames `object_xy_from_frames` reads."""
    action_dim: int
    """A: size of an action."""
    agent_dim: int
    """D: size of `agent_pos`."""
    env_state_dim: int
    """E: size of `environment_state`."""
    agent_xy: slice
    """agent_pos[..., agent_xy] is the agent's (x, y) in metres (pusher, hand or end effector)."""
    object_xy: slice
    """environment_state[..., object_xy] is the manipulated object's (x, y) in metres."""
    success_from_env_state: Callable[[np.ndarray], np.ndarray]
    """(..., E) environment_state -> (...) bool: the task's success rule, the one info["is_success"] applies."""
    object_xy_from_frames: Callable[[np.ndarray], np.ndarray] | None
    """(N, S, S, 3) uint8 frames of `camera` -> (N, 2) object (x, y) in metres, NaN where not seen; None
    where the task has no detector (figures that need one are then left out)."""
    perturb_start: Callable[[Any, tuple[float, float, float]], None] | None
    """(unwrapped env, (dx m, dy m, dyaw rad)) -> None: shift the object in place and turn it about the
    vertical; takes effect at the next forward pass. None where the task defines no such nudge."""
    reach: float | None = None
    """Metres between the agent's and the object's (x, y) (or the positions `tracked_agent` and
    `tracked_object` name) within which the agent can move the object in one step: for the pushing tasks
    and Lift, contact distance plus one step of the agent's motion plus a centimetre of reading error;
    PickPlace's is fitted on its training files' true states (pick_place.TRACKED_REACH).
    The learned simulator's "tracked" judge holds the object still wherever the agent is farther away
    (world_models/env.py); None where the task defines none."""
    auto_judge: str = "head"
    """The judge `wmsuite eval --judge auto` stands for on this task: the one of lower mean |error| on
    its zoo's validation split ("tracked" needs `reach`, "latched" also `grasp_action`). The pushing
    tasks' is "tracked" (chosen on PushCube's families zoo), PickPlace's and Lift's "latched" (their model
    cards; experiments/world_models_journal.md)."""
    tracked_agent: slice | None = None
    """agent_pos slice the "tracked" judge measures the reach from (None: agent_xy). Lift's and
    PickPlace's are the hand's (x, y, z): their success needs a height, so the judge must hold the
    cube's height too."""
    tracked_object: slice | None = None
    """environment_state slice of the object's position the "tracked" judge holds (None: object_xy); the
    same length as the agent's."""
    grasp_action: int | None = None
    """Index of the gripper command in an action (> 0 closes): with it and `reach`, the "latched" judge
    (the tracked judge that carries a grasped object with the agent until the gripper opens) can run.
    Lift's is robosuite's gripper entry, PickPlace's its last; None where the agent has no gripper command."""
    fingers: tuple[int, ...] | None = None
    """agent_pos entries that give the fingers' opening in metres (two finger positions, their difference;
    or one opening): with it the "latched" judge holds a grasp only while the fingers read at least
    `hold_gap` apart (an object between them). None: the grasp holds until the gripper command opens."""
    hold_gap: float = 0.0
    """Metres the fingers read apart while they hold the object (with `fingers`)."""
    reacquire: int = 0
    """Frames in a row on which the "tracked" judge must read the object within `reach` of an agent that
    is out of reach of where it believes the object, to believe that reading (0: never;
    world_models/tracking.py). Chosen on the task's zoo's validation split where it is not 0."""
    step_slack: float | None = None
    """Metres beyond the agent's own motion that the "tracked" judge lets a believed object move on one
    frame (None: no bound; world_models/tracking.py). Chosen on the task's zoo's validation split where set."""
    others_xy: tuple[slice, ...] = ()
    """environment_state slices of the other objects the agent moves, each an (x, y) in metres
    (PushTwoCubes' green cube): the "tracked" judge follows them as it follows the object."""
    others_xy_from_frames: Callable[[np.ndarray], np.ndarray] | None = None
    """(N, S, S, 3) uint8 frames of `camera` -> (N, len(others_xy), 2) the other objects' (x, y), NaN
    where not seen; None where the task moves no other object or has no detector for them."""
    static_state: slice | None = None
    """environment_state entries the task keeps fixed through an episode (a goal's position): the
    learned simulator holds them at their real start values instead of reading them off generated
    frames (world_models/env.py); None where the task keeps none fixed."""
    moving_camera: str | None = None
    """A camera that moves with the agent (PushCubeEgo's "ego"), whose geometry the spatial memory
    needs; None where every camera is fixed."""
    moving_camera_fovy: float | None = None
    """The moving camera's vertical field of view in degrees (square images)."""
    moving_camera_pose: Callable[[np.ndarray], np.ndarray] | None = None
    """(..., D) agent_pos -> (..., 4, 4) the moving camera's camera-to-world pose (OpenCV convention)."""
    moving_camera_advance: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    """(..., D) agent_pos, (..., H, A) actions -> (..., D) where the actions command the agent, so that
    the spatial memory can draw the view a chunk is heading for; None: the memory draws the newest view."""
    map_camera: str | None = None
    """A fixed camera that sees the whole scene from above (PushCubeEgo's "top"), whose start frame a
    world model with start_map reads as a map of what the moving camera has not seen yet; None: none."""
    map_camera_fovy: float | None = None
    """The map camera's vertical field of view in degrees (square images)."""
    map_camera_pose: np.ndarray | None = None
    """(4, 4) the map camera's camera-to-world pose (OpenCV convention)."""
    moving_threshold: float = 0.01
    """Metres the object must travel over a chunk for the window to count as one where it moves (contact
    figures, moving-window sampling): above the detector's error, below a push's travel."""
    head_on_offset: float = 0.01
    """A contact window is head-on when the object's centre starts less than this many metres off the
    agent's line of motion."""
    glancing_offset: float = 0.03
    """A contact window is glancing when the object's centre starts at least this many metres off the
    agent's line of motion (the object turns and slides off more than it is carried)."""
    agent_moving_threshold: float = 0.005
    """Metres the agent must move over a chunk for its line of motion (and the object-to-agent
    displacement ratio) to be defined."""

    def __post_init__(self) -> None:
        for name in ("action_dim", "agent_dim", "env_state_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.env_id}: {name} must be >= 1, got {getattr(self, name)}")
        for name, dim, xy in (("agent_xy", self.agent_dim, self.agent_xy), *(
                ("object_xy", self.env_state_dim, xy) for xy in self.objects_xy)):
            if len(range(dim)[xy]) != 2:
                raise ValueError(f"{self.env_id}: {name} must pick 2 of the {dim} entries, got {xy}")
        if self.auto_judge not in ("head", "state", "both", "tracked", "latched") or \
                (self.auto_judge in ("tracked", "latched") and self.reach is None) or \
                (self.auto_judge == "latched" and self.grasp_action is None):
            raise ValueError(f"{self.env_id}: auto_judge must be head, state, both, tracked or latched (tracked "
                             f"needs a reach, latched a reach and a grasp_action), got {self.auto_judge!r}")
        if self.grasp_action is not None and not 0 <= self.grasp_action < self.action_dim:
            raise ValueError(f"{self.env_id}: grasp_action must index the {self.action_dim}-d action, "
                             f"got {self.grasp_action}")
        if self.fingers is not None and (self.grasp_action is None or not self.hold_gap > 0 or not all(
                0 <= f < self.agent_dim for f in self.fingers) or len(self.fingers) not in (1, 2)):
            raise ValueError(f"{self.env_id}: fingers needs a grasp_action, a hold_gap > 0 m and one or two agent_pos "
                             f"entries (< {self.agent_dim}), got fingers={self.fingers}, hold_gap={self.hold_gap}")
        if (self.tracked_agent is None) != (self.tracked_object is None) or (self.tracked_agent is not None and (
                len(range(self.agent_dim)[self.tracked_agent]) != len(range(self.env_state_dim)[self.tracked_object]))):
            raise ValueError(f"{self.env_id}: tracked_agent and tracked_object go together and pick positions "
                             f"of one size, got {self.tracked_agent}, {self.tracked_object}")
        if (self.moving_camera is None) != (self.moving_camera_fovy is None) or \
                (self.moving_camera is None) != (self.moving_camera_pose is None):
            raise ValueError(f"{self.env_id}: moving_camera, moving_camera_fovy and moving_camera_pose go together")
        if (self.map_camera is None) != (self.map_camera_fovy is None) or \
                (self.map_camera is None) != (self.map_camera_pose is None):
            raise ValueError(f"{self.env_id}: map_camera, map_camera_fovy and map_camera_pose go together")
        if not 0 < self.head_on_offset <= self.glancing_offset:
            raise ValueError(f"{self.env_id}: need 0 < head_on_offset <= glancing_offset, got "
                             f"{self.head_on_offset}, {self.glancing_offset}")
        if self.moving_threshold <= 0 or self.agent_moving_threshold <= 0:
            raise ValueError(f"{self.env_id}: thresholds must be positive, got moving_threshold "
                             f"{self.moving_threshold}, agent_moving_threshold {self.agent_moving_threshold}")

    @property
    def objects_xy(self) -> tuple[slice, ...]:
        """Every moved object's (x, y) slice of environment_state, the probe's object first."""
        return (self.object_xy, *self.others_xy)

    @property
    def tracked(self) -> tuple[slice, tuple[slice, ...]]:
        """What the "tracked" judge compares: (the agent_pos slice, the environment_state slices of every
        tracked object, the probe's object first): `tracked_agent` / `tracked_object` where set, else
        agent_xy / object_xy."""
        agent = self.tracked_agent if self.tracked_agent is not None else self.agent_xy
        held = self.tracked_object if self.tracked_object is not None else self.object_xy
        return agent, (held, *self.others_xy)

    @property
    def detected_xy(self) -> tuple[slice, ...]:
        """The objects_xy whose position the probe's detectors read off frames."""
        return self.objects_xy if self.others_xy_from_frames is not None else (self.object_xy,)

    def objects_xy_from_frames(self, frames: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) uint8 -> (N, O, 2): the (x, y) of each object in `detected_xy` read off the frames,
        NaN where not seen. Needs `object_xy_from_frames`."""
        if self.object_xy_from_frames is None:
            raise ValueError(f"{self.env_id} has no object detector")
        xy = self.object_xy_from_frames(frames)[:, None]  # (N, 1, 2)
        if self.others_xy_from_frames is not None:
            xy = np.concatenate([xy, self.others_xy_from_frames(frames)], axis=1)
        return xy

    def object_xy_from_env_state(self, env_state: np.ndarray) -> np.ndarray:
        """(..., E) environment_state -> (..., 2) the object's (x, y) in metres."""
        return np.asarray(env_state)[..., self.object_xy]

    def agent_xy_from_agent_pos(self, agent_pos: np.ndarray) -> np.ndarray:
        """(..., D) agent_pos -> (..., 2) the agent's (x, y) in metres."""
        return np.asarray(agent_pos)[..., self.agent_xy]


def _nudge_cube(env: Any, nudge: tuple[float, float, float]) -> None:
    """`perturb_start` of the built-in tasks: their envs shift and turn the cube with `nudge_cube`."""
    env.nudge_cube(nudge[:2], nudge[2])


PUSHER_REACH = push_cube.CUBE_HALF * 1.42 + push_cube.PUSHER_RADIUS + push_cube.ACTION_SCALE + 0.01
"""The pushing tasks' reach (see TaskProbe.reach): a cube's half-diagonal, the pusher's radius, one
step of its servo target, a centimetre of reading error."""


def _probes(*probes: TaskProbe) -> dict[str, TaskProbe]:
    return {p.env_id: p for p in probes}


PROBES: dict[str, TaskProbe] = _probes(
    # agent_pos (2,) pusher xy; environment_state (6,) cube xy, cos/sin 4*yaw, goal xy (push_cube.py)
    TaskProbe(env_id="wmsuite/PushCube-v0", camera="top", action_dim=2, agent_dim=2, env_state_dim=6,
              agent_xy=slice(0, 2), object_xy=slice(0, 2),
              success_from_env_state=push_cube.is_success_from_env_state,
              object_xy_from_frames=push_cube.detect_cube_xy, perturb_start=_nudge_cube,
              reach=PUSHER_REACH, auto_judge="tracked",
              static_state=slice(4, 6)),
    # agent_pos (4,) hand xyz, finger opening; environment_state (6,) cube xyz, target xyz (pick_place.py)
    TaskProbe(env_id="wmsuite/PickPlace-v0", camera="front", action_dim=4, agent_dim=4, env_state_dim=6,
              agent_xy=slice(0, 2), object_xy=slice(0, 2),
              success_from_env_state=pick_place.is_success_from_env_state,
              object_xy_from_frames=pick_place.detect_cube_xy, perturb_start=_nudge_cube,
              static_state=slice(3, 6), reach=pick_place.TRACKED_REACH, tracked_agent=slice(0, 3),
              tracked_object=slice(0, 3), grasp_action=pick_place.GRIPPER_ACTION, fingers=(pick_place.OPENING,),
              hold_gap=pick_place.HOLD_GAP, auto_judge="latched"),
    # agent_pos (2,) pusher xy; environment_state (12,) red cube xy, cos/sin 4*yaw, green cube the same,
    # red goal xy, green goal xy (push_two_cubes.py). The probe's object is the red cube, the green one
    # the other object; PushCube's reach (the same cubes, pusher and action)
    TaskProbe(env_id="wmsuite/PushTwoCubes-v0", camera="top", action_dim=2, agent_dim=2, env_state_dim=12,
              agent_xy=slice(0, 2), object_xy=slice(0, 2), others_xy=(slice(4, 6),),
              success_from_env_state=push_two_cubes.is_success_from_env_state,
              object_xy_from_frames=push_two_cubes.detect_red_cube_xy,
              others_xy_from_frames=push_two_cubes.detect_green_cube_xy, perturb_start=_nudge_cube,
              reach=PUSHER_REACH, auto_judge="tracked",
              static_state=slice(8, 12)),
    # PushCube's spaces on the large table (push_cube_ego.py); the detector reads the fixed top camera
    TaskProbe(env_id="wmsuite/PushCubeEgo-v0", camera="top", action_dim=2, agent_dim=2, env_state_dim=6,
              agent_xy=slice(0, 2), object_xy=slice(0, 2),
              success_from_env_state=push_cube.is_success_from_env_state,
              object_xy_from_frames=push_cube_ego.detect_cube_xy, perturb_start=_nudge_cube,
              reach=PUSHER_REACH, auto_judge="tracked",
              static_state=slice(4, 6), reacquire=4, moving_camera="ego", moving_camera_fovy=push_cube_ego.EGO_FOVY,
              moving_camera_pose=push_cube_ego.ego_pose, moving_camera_advance=push_cube_ego.ego_advance,
              map_camera="top", map_camera_fovy=push_cube_ego.TOP_FOVY, map_camera_pose=push_cube_ego.top_pose()),
    # agent_pos (2,) pusher xy; environment_state (21,) red, yellow, purple cube (x, y, cos/sin 4*yaw), green
    # and white goal xy, the instruction's one-hots (push_colors.py). The probe's object is the red cube,
    # the others the yellow and purple ones; the goals and the instruction stay fixed through an episode
    TaskProbe(env_id="wmsuite/PushColors-v0", camera="top", action_dim=2, agent_dim=2, env_state_dim=21,
              agent_xy=slice(0, 2), object_xy=slice(0, 2), others_xy=(slice(4, 6), slice(8, 10)),
              success_from_env_state=push_colors.is_success_from_env_state,
              object_xy_from_frames=push_colors.detect_red_cube_xy,
              others_xy_from_frames=push_colors.detect_other_cubes_xy, perturb_start=_nudge_cube,
              reach=PUSHER_REACH, auto_judge="tracked",
              static_state=slice(12, 21)),
    # agent_pos (9,) eef pos, eef quat, fingers; environment_state (10,) robosuite's Lift object-state
    # (cube pos, cube quat, gripper-to-cube); OSC_POSE actions (6) + gripper (robosuite_env.py)
    TaskProbe(env_id=robosuite_env.env_id("Lift"), camera="agentview", action_dim=7, agent_dim=9,
              env_state_dim=robosuite_env.LIFT_ENV_STATE_DIM, agent_xy=slice(0, 2),
              object_xy=robosuite_env.LIFT_CUBE_XY,
              success_from_env_state=robosuite_env.lift_success_from_env_state,
              object_xy_from_frames=None, perturb_start=None, reach=robosuite_env.LIFT_REACH,
              tracked_agent=robosuite_env.LIFT_EEF_XYZ, tracked_object=robosuite_env.LIFT_CUBE_XYZ,
              grasp_action=robosuite_env.GRIPPER_ACTION, auto_judge="latched"),
)
"""env id -> its probe: the one registry; tests sweep it."""


def get_probe(env_id: str) -> TaskProbe:
    """The probe of `env_id`; an unknown id is a ValueError that lists the known ones."""
    try:
        return PROBES[env_id]
    except KeyError:
        raise ValueError(f"no task probe for env id {env_id!r}; probes exist for: {', '.join(PROBES)} "
                         "(add one to wmsuite/envs/probes.py)") from None
