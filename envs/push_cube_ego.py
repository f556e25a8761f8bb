"""`wmsuite/PushCubeEgo-v0`: PushCube on a table larger than the view of a camera that rides on the pusher.

What it is for: a world model that sees only its last few frames forgets what left the view, and
here everything does. The camera ("ego") moves with the agent, so the goal, the cube and six
landmarks leave the view and come back; a world model that remembers places (world_models/memory.py)
should draw a place the same when the camera returns to it.

Scene (assets/scenes/push_cube_ego.xml): a 1.0 m x 1.0 m grey table with low walls; PushCube's red 5
cm cube, green goal disk (radius 5 cm) and blue pusher (radius 2 cm, the same servos); six flat,
visual-only landmarks of distinct colours and shapes. The "ego" camera sits 35 cm above the pusher
and looks straight down (fovy 50 degrees: about 35 cm x 35 cm of table, an eighth of it); the fixed
"top" camera sees the whole table (videos, the cube detector).

Layout from the seed: cube centre uniform in [-0.3, 0.3]^2 with a random yaw; goal uniform in
[-0.35, 0.35]^2 at least 35 cm from the cube (never in one ego view with it); pusher uniform in
[-0.4, 0.4]^2 at least 10 cm from the cube; landmarks uniform in [-0.42, 0.42]^2, 18 cm or more
apart and 10 cm or more from the cube and the goal.

Action (2,) float32 in [-1, 1]: as PushCube's, (dx, dy) moves the pusher's servo target by 4 cm times
the action.

Observation:
    pixels["ego"]      (S, S, 3) uint8  the riding camera
    pixels["top"]      (S, S, 3) uint8  the whole table
    agent_pos          (2,) float32     pusher (x, y) in metres; with the fixed mount it is the ego pose
    environment_state  (6,) float32     as PushCube's: cube (x, y, cos 4*yaw, sin 4*yaw), goal (x, y)

Geometry (`info`, every reset and step): `camera_pose` {camera: (4, 4) float32}, camera-to-world in
the OpenCV convention (`MujocoTaskEnv.camera_geometry`; the intrinsics come from the same method); with
`depth=True` also `depth` {camera: (S, S) float32}, metres along each camera's axis. `ego_pose` gives
the ego pose from agent positions alone (what imagination has), `top_pose` the fixed top camera's.

Success: PushCube's rule (cube centre inside the goal disk); reward 1.0 on a successful step;
terminates on success unless `terminate_on_success=False`. Time limit: 160 steps (16 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmsuite.envs import push_cube
from wmsuite.envs.base import detect_blob_xy, red_mask, sample_away
from wmsuite.envs.push_cube import CUBE_HALF, PushCubeEnv

MAX_EPISODE_STEPS = 160
N_LANDMARKS = 6
EGO_HEIGHT = 0.022 + 0.35  # m, the ego camera above the table: pusher body height plus the mount
EGO_FOVY = 50.0  # degrees, push_cube_ego.xml's ego camera
TOP_HEIGHT = 1.4  # m, push_cube_ego.xml's fixed top camera above the table centre, looking straight down
TOP_FOVY = 43.0  # degrees, the top camera's
HALF_TABLE = 0.5  # m, inside the walls
PUSHER_RANGE = 0.47  # m, push_cube_ego.xml's pusher joints' range (either axis)
is_success_from_env_state = push_cube.is_success_from_env_state
"""(..., 6) environment_state -> (...) bool: PushCube's rule, the cube's centre inside the goal disk."""


def ego_pose(agent_pos: np.ndarray) -> np.ndarray:
    """(..., 2) pusher (x, y) -> (..., 4, 4) the ego camera's camera-to-world pose (OpenCV convention,
    looking straight down: x along world +x, y along world -y, z along world -z)."""
    xy = np.asarray(agent_pos, np.float64)[..., :2]
    pose = np.zeros((*xy.shape[:-1], 4, 4))
    pose[..., :3, :3] = np.diag([1.0, -1.0, -1.0])
    pose[..., :2, 3] = xy
    pose[..., 2, 3] = EGO_HEIGHT
    pose[..., 3, 3] = 1.0
    return pose


def top_pose() -> np.ndarray:
    """(4, 4) the fixed top camera's camera-to-world pose (OpenCV convention; oriented as the ego
    camera), which the spatial memory's map (world_models/latent_memory.map_slot) is redrawn from."""
    pose = ego_pose(np.zeros(2))
    pose[2, 3] = TOP_HEIGHT
    return pose


def ego_advance(agent_pos: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """(..., 2) pusher (x, y), (..., H, 2) actions -> (..., 2) where the actions command the pusher: each
    moves the servo target ACTION_SCALE times the saturated action on from the pusher, within the
    joints' range (the ego camera's carrier; what blocks the pusher, a cube, is not modelled)."""
    step = push_cube.ACTION_SCALE * np.clip(np.asarray(actions, np.float64), -1.0, 1.0).sum(-2)
    return np.clip(np.asarray(agent_pos, np.float64)[..., :2] + step, -PUSHER_RANGE, PUSHER_RANGE)


def detect_cube_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """World (x, y) of the cube from "top" camera frames by red-blob detection, NaN where not seen.
    (H, W, 3) or (N, H, W, 3) uint8 -> (2,) or (N, 2); PushCube's detector on this scene's camera."""
    if camera != "top":
        raise ValueError(f"PushCubeEgo's cube detector works on the fixed 'top' camera, got {camera!r}")
    return detect_blob_xy(frames, "push_cube_ego.xml", "top", 1.4 * CUBE_HALF, red_mask)


class PushCubeEgoEnv(PushCubeEnv):
    """See the module docstring. kwargs: depth (bool, False: also render depth into info), image_size,
    cameras, render_mode, render_size, terminate_on_success."""

    SCENE = "push_cube_ego.xml"
    CAMERAS = ("ego", "top")
    RENDER_CAMERA = "top"
    TASK = "find the green goal and push the red cube into it"
    AGENT_POS_BOUNDS = ([-0.5, -0.5], [0.5, 0.5])
    ENV_STATE_BOUNDS = ([-0.55, -0.55, -1, -1, -0.55, -0.55], [0.55, 0.55, 1, 1, 0.55, 0.55])

    def __init__(self, depth: bool = False, **kwargs: Any) -> None:
        self.depth = bool(depth)
        super().__init__(**kwargs)
        self._landmarks = [int(self.model.body(f"landmark_{i}").mocapid[0]) for i in range(N_LANDMARKS)]

    def _randomize(self, rng: np.random.Generator) -> None:
        cube = rng.uniform(-0.3, 0.3, size=2)
        yaw = rng.uniform(-np.pi, np.pi)
        goal = sample_away(rng, 0.35, cube, 0.35)
        pusher = sample_away(rng, 0.4, cube, 0.10)
        placed: list[np.ndarray] = []
        while len(placed) < N_LANDMARKS:
            xy = rng.uniform(-0.42, 0.42, size=2)
            if min(np.linalg.norm(xy - p) for p in (cube, goal)) >= 0.10 and \
                    all(np.linalg.norm(xy - p) >= 0.18 for p in placed):
                placed.append(xy)
        qpos = self.data.qpos
        qpos[self._pusher : self._pusher + 2] = pusher
        qpos[self._cube : self._cube + 7] = [*cube, CUBE_HALF, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.ctrl[:] = pusher
        self.set_goal(goal)
        for mocap, xy in zip(self._landmarks, placed):
            self.data.mocap_pos[mocap] = [*xy, 0.0]

    def _info(self, obs: dict[str, Any]) -> dict[str, Any]:
        info = super()._info(obs)
        info["camera_pose"] = {cam: self.camera_geometry(cam, self.image_size)[1].astype(np.float32)
                               for cam in self.cameras}
        if self.depth:
            info["depth"] = {cam: self.render_depth(cam, self.image_size) for cam in self.cameras}
        return info

    def landmarks_xy(self) -> np.ndarray:
        """(N_LANDMARKS, 2) the landmarks' (x, y) in metres, as the seed placed them."""
        return self.data.mocap_pos[self._landmarks, :2].copy()
