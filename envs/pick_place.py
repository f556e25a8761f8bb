"""`wmsuite/PickPlace-v0`: pick up a red cube with a floating parallel gripper and place it on a green target.

Scene (assets/scenes/pick_place.xml): a 0.6 m x 0.6 m grey table with low walls; a 4 cm red cube
(free body); a green visual-only target disk of radius 4 cm (a mocap body); a blue gravity-compensated
gripper that slides in x, y, z under position servos, with two fingers closing along x (each finger
0 to 4.5 cm from the centre line). The hand frame's origin is at the bottom of the fingertips.
Cameras: "front", fixed at (0, -0.5, 0.55) looking obliquely at the table's centre (it sees the whole
reachable workspace), and "wrist", on the hand 8 cm behind the fingers, looking down and forward at
the fingertips.

Physics: 5 ms steps, 20 per control step, elliptic friction cones (impratio 10): with 10 ms steps
MuJoCo softens the 10 ms contacts and a grasped cube creeps out of the fingers.

Layout from the seed: cube centre uniform in [-0.12, 0.12]^2 with yaw in [-0.3, 0.3] rad, target
uniform in [-0.15, 0.15]^2 at least 10 cm from the cube, hand at (x, y) uniform in [-0.1, 0.1]^2 and
height uniform in [0.12, 0.2] m with the gripper open.

Action (4,) float32 in [-1, 1]: (dx, dy, dz) move the hand's servo targets to its current position
plus 4 cm times the action (10 Hz control); `gripper` sets the finger targets absolutely, -1 fully
open (9 cm between the fingers) to +1 closed. Values outside [-1, 1] saturate.

Observation:
    pixels["front"], pixels["wrist"]  (S, S, 3) uint8, S = image_size (64 by default)
    agent_pos          (4,) float32  hand (x, y, z) in metres and the opening between the fingers
    environment_state  (6,) float32  cube centre (x, y, z), target centre (x, y, z = 0)

Success: the cube rests on the table inside the target, |cube_xy - target_xy| < TARGET_RADIUS and
cube_z < CUBE_HALF + 5 mm (a cube lying on the table has z = 2 cm; a held cube counts once it is
lowered onto the table, one still in the air does not). Reward 1.0 on a successful step, 0.0 otherwise; the episode
terminates on success unless `terminate_on_success=False`. Time limit: 120 steps (12 s).
"""

from __future__ import annotations

import numpy as np

from wmsuite.envs.base import MujocoTaskEnv, detect_blob_xy, red_mask, sample_away

TARGET_RADIUS = 0.04  # m, the radius of the target disk in pick_place.xml
CUBE_HALF = 0.02  # m, half the cube's side
FINGER_OPEN = 0.045  # m, each finger's joint range is [0, FINGER_OPEN]
ACTION_SCALE = 0.04  # m of servo-target displacement per unit action
MAX_EPISODE_STEPS = 120
GRIPPER_ACTION = 3
"""Index of the gripper command in an action (> 0 counts as closing; the command sets the fingers' opening,
9 cm at -1 to none at +1)."""
OPENING = 3
"""agent_pos entry of the opening between the fingers (m)."""
HOLD_GAP = 0.02
"""m: fingers closed on the cube stay its width (4 cm) apart, closed on nothing they meet. The "latched"
judge holds a grasp only while they read at least this far apart (half the cube's width, not fitted)."""
TRACKED_REACH = 0.075
"""m between the hand and the cube's centre (x, y, z) within which the "tracked" judge believes a moving
cube (world_models/env.py): the smallest reach, in 5 mm steps, at which that rule on the true states
gives every episode of the shipped model's training data its real outcome
(experiments/world_models_journal.md)."""


def is_success_from_env_state(env_state: np.ndarray) -> np.ndarray:
    """(..., 6) environment_state -> (...) bool: does the cube rest on the table inside the target?"""
    env_state = np.asarray(env_state)
    if env_state.shape[-1:] != (6,):
        raise ValueError(f"PickPlace environment_state has 6 entries, got shape {env_state.shape}")
    inside = np.linalg.norm(env_state[..., 0:2] - env_state[..., 3:5], axis=-1) < TARGET_RADIUS
    return inside & (env_state[..., 2] < CUBE_HALF + 0.005)


def detect_cube_xy(frames: np.ndarray, camera: str = "front") -> np.ndarray:
    """World (x, y) of the cube from "front" camera frames by red-blob detection, NaN where not seen.

    frames: (H, W, 3) or (N, H, W, 3) uint8 at any size -> (2,) or (N, 2). Assumes the cube stands on
    the table: the centroid ray is cut with the plane through the cube's centre (z = 2 cm), which
    measured unbiased (the visible top and front faces balance); tests/envs/test_detect.py bounds the
    error with the gripper not in front of the cube. A lifted cube, or one partly hidden behind the
    gripper, reads wrong (by centimetres) or NaN.
    """
    if camera != "front":
        raise ValueError(f"PickPlace's cube detector works on the fixed 'front' camera, got {camera!r}")
    return detect_blob_xy(frames, "pick_place.xml", "front", CUBE_HALF, red_mask)


class PickPlaceEnv(MujocoTaskEnv):
    """See the module docstring. kwargs: image_size, cameras, render_mode, render_size, terminate_on_success."""

    SCENE = "pick_place.xml"
    CAMERAS = ("front", "wrist")
    RENDER_CAMERA = "front"
    TASK = "pick up the red cube and place it on the green target"
    ACTION_NAMES = ("dx", "dy", "dz", "gripper")
    # Joint ranges are [-0.25, 0.25] (x, y), [0, 0.25] (z), opening [0, 0.09]; margins for contact give.
    AGENT_POS_BOUNDS = ([-0.3, -0.3, -0.05, -0.01], [0.3, 0.3, 0.3, 0.1])
    ENV_STATE_BOUNDS = ([-0.35, -0.35, -0.05, -0.35, -0.35, -0.01], [0.35, 0.35, 0.5, 0.35, 0.35, 0.01])
    is_success_from_env_state = staticmethod(is_success_from_env_state)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._hand = self._joint_qpos("hand_x")  # hand_y, hand_z follow in qpos
        self._fingers = [self._joint_qpos("finger_left"), self._joint_qpos("finger_right")]
        self._cube = self._joint_qpos("cube")  # 3 position + 4 quaternion (w, x, y, z)
        self._target = int(self.model.body("target").mocapid[0])
        joints = [self.model.joint(n).id for n in ("hand_x", "hand_y", "hand_z")]
        self._hand_lo, self._hand_hi = self.model.jnt_range[joints].T
        self._hand_act = [self.model.actuator(n).id for n in ("hand_x", "hand_y", "hand_z")]
        self._finger_act = [self.model.actuator(n).id for n in ("finger_left", "finger_right")]

    def _randomize(self, rng: np.random.Generator) -> None:
        cube = rng.uniform(-0.12, 0.12, size=2)
        yaw = rng.uniform(-0.3, 0.3)
        target = sample_away(rng, 0.15, cube, 0.1)
        hand = np.array([*rng.uniform(-0.1, 0.1, size=2), rng.uniform(0.12, 0.2)])
        qpos = self.data.qpos
        qpos[self._hand : self._hand + 3] = hand
        qpos[self._fingers] = FINGER_OPEN
        qpos[self._cube : self._cube + 7] = [*cube, CUBE_HALF, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.ctrl[self._hand_act] = hand
        self.data.ctrl[self._finger_act] = FINGER_OPEN
        self.data.mocap_pos[self._target] = [*target, 0.0]

    def _apply_action(self, action: np.ndarray) -> None:
        hand = self.data.qpos[self._hand : self._hand + 3]
        self.data.ctrl[self._hand_act] = np.clip(hand + ACTION_SCALE * action[:3], self._hand_lo, self._hand_hi)
        self.data.ctrl[self._finger_act] = FINGER_OPEN * (1.0 - action[3]) / 2.0

    def _agent_pos(self) -> np.ndarray:
        opening = self.data.qpos[self._fingers].sum()
        return np.array([*self.data.qpos[self._hand : self._hand + 3], opening])

    def _env_state(self) -> np.ndarray:
        return np.array([*self.data.qpos[self._cube : self._cube + 3], *self.data.mocap_pos[self._target]])
