"""`wmsuite/PushCube-v0`: push a red cube into a green goal disk with a blue round pusher.

Scene (assets/scenes/push_cube.xml): a 0.6 m x 0.6 m grey table with low walls; a 5 cm red cube
(free body); a green visual-only goal disk of radius 5 cm (a mocap body); a blue cylinder pusher of
radius 2 cm that slides in x and y under position servos. One fixed camera, "top", looks straight
down from 0.9 m and sees the whole table.

Physics: 10 ms steps, 10 per control step; the pusher's servos are stiff and critically damped, so
it reaches most of a commanded displacement within one step.

Layout from the seed: cube centre uniform in [-0.15, 0.15]^2 with a random yaw, goal centre uniform
in [-0.2, 0.2]^2 at least 12 cm from the cube, pusher uniform in [-0.22, 0.22]^2 at least 8 cm from
the cube.

Action (2,) float32 in [-1, 1]: (dx, dy) moves the pusher's servo target to its current position
plus 4 cm times the action (control at 10 Hz, so at most 0.4 m/s); values outside [-1, 1] saturate.

Observation:
    pixels["top"]      (S, S, 3) uint8, S = image_size (64 by default)
    agent_pos          (2,) float32  pusher (x, y) in metres
    environment_state  (6,) float32  cube (x, y, cos 4*yaw, sin 4*yaw), goal (x, y); the cube looks
                                     the same after a quarter turn, so its yaw enters modulo 90 degrees

Scene variants (`variant=`, for out-of-distribution studies: a world model trained on the default
scene has never seen them; physics, layout, observation and success rule are unchanged except where
named): see VARIANTS.

Success: the cube's centre lies inside the goal disk, |cube_xy - goal_xy| < GOAL_RADIUS. The reward
is 1.0 on a successful step and 0.0 otherwise; the episode terminates on success unless
`terminate_on_success=False`. Time limit: 80 steps (8 s).
"""

from __future__ import annotations

import mujoco
import numpy as np

from wmsuite.envs.base import MujocoTaskEnv, detect_blob_xy, red_mask, sample_away, scene_path
from wmsuite.types import Episode

GOAL_RADIUS = 0.05  # m, the radius of the goal disk in push_cube.xml
CUBE_HALF = 0.025  # m, half the cube's side
PUSHER_RADIUS = 0.02  # m, the pusher cylinder's radius in push_cube.xml
ACTION_SCALE = 0.04  # m of servo-target displacement per unit action
MAX_EPISODE_STEPS = 80
VARIANTS = {
    "": "the training scene",
    # the test variants (OOD_SPLITS["test"]): the figures reported for trust
    "cube_color": "a yellow cube instead of the red one",
    "cube_size": "a 7 cm cube instead of a 5 cm one (heavier in proportion)",
    "table_color": "a brown table instead of the grey one",
    "distractor": "a purple visual-only disk of radius 4 cm at (-0.2, 0.2) on the table",
    "camera_shift": "the top camera moved 5 cm along x and 3 cm along y",
    # the validation variants (OOD_SPLITS["validation"]): one of each kind, to tune trust's settings on
    "cube_orange": "an orange cube instead of the red one",
    "cube_small": "a 4 cm cube instead of a 5 cm one (lighter in proportion)",
    "table_dark": "a dark grey table instead of the light grey one",
    "distractor_box": "a white visual-only 3 cm box at (0.2, -0.2) on the table",
    "camera_raise": "the top camera 8 cm higher",
    "light_dim": "the lights at half their strength",
}
"""PushCube's scene variants, by `variant=` value."""
OOD_SPLITS = {
    "validation": ("cube_orange", "cube_small", "table_dark", "distractor_box", "camera_raise", "light_dim"),
    "test": ("cube_color", "cube_size", "table_color", "distractor", "camera_shift"),
}
"""Variants to tune out-of-distribution settings on, and the ones reported: never tune on "test"."""
CUBE_HALVES = {"cube_size": 0.035, "cube_small": 0.02}
"""m, the cube's half side in the variants that change it (CUBE_HALF elsewhere); mass scales with volume."""


def is_success_from_env_state(env_state: np.ndarray) -> np.ndarray:
    """(..., 6) environment_state -> (...) bool: is the cube's centre inside the goal disk?"""
    env_state = np.asarray(env_state)
    if env_state.shape[-1:] != (6,):
        raise ValueError(f"PushCube environment_state has 6 entries, got shape {env_state.shape}")
    return np.linalg.norm(env_state[..., 0:2] - env_state[..., 4:6], axis=-1) < GOAL_RADIUS


def detect_cube_xy(frames: np.ndarray, camera: str = "top") -> np.ndarray:
    """World (x, y) of the cube from "top" camera frames by red-blob detection, NaN where not seen.

    frames: (H, W, 3) or (N, H, W, 3) uint8 at any size -> (2,) or (N, 2). The blob is the cube's top
    face plus the sliver of side face the perspective shows; its centroid ray is cut with the plane
    z = 3.5 cm, where that mix measured unbiased (the top face's plane, 5 cm, biases it inward);
    tests/envs/test_detect.py bounds the error.
    """
    if camera != "top":
        raise ValueError(f"PushCube's cube detector works on the 'top' camera, got {camera!r}")
    return detect_blob_xy(frames, "push_cube.xml", "top", 1.4 * CUBE_HALF, red_mask)


class PusherEnv(MujocoTaskEnv):
    """What the pushing tasks share: a cylinder pusher sliding in x and y under position servos (joints
    pusher_x, pusher_y), whose servo target an action moves by ACTION_SCALE times the action, within
    the joints' range; agent_pos is its (x, y), seen by one top camera."""

    CAMERAS = ("top",)
    RENDER_CAMERA = "top"
    ACTION_NAMES = ("dx", "dy")
    # Positions are kept inside the walls (|x|, |y| < 0.3); the bounds leave room for contact give.
    AGENT_POS_BOUNDS = ([-0.3, -0.3], [0.3, 0.3])

    def _init_pusher(self) -> None:
        self._pusher = self._joint_qpos("pusher_x")  # pusher_y follows it in qpos
        joints = [self.model.joint(n).id for n in ("pusher_x", "pusher_y")]
        self._pusher_lo, self._pusher_hi = self.model.jnt_range[joints].T

    def _apply_action(self, action: np.ndarray) -> None:
        pusher = self.data.qpos[self._pusher : self._pusher + 2]
        self.data.ctrl[:] = np.clip(pusher + ACTION_SCALE * action, self._pusher_lo, self._pusher_hi)

    def _agent_pos(self) -> np.ndarray:
        return self.data.qpos[self._pusher : self._pusher + 2].copy()

    def _cubes_and_goals(self) -> list[float]:
        """Per cube of `self._cubes` (qpos indices) its (x, y, cos 4*yaw, sin 4*yaw), then per goal of
        `self._goals` (mocap ids) its (x, y): environment_state of the tasks with several cubes."""
        out: list[float] = []
        for index in self._cubes:
            x, y = self.data.qpos[index : index + 2]
            yaw = yaw_from_quat(self.data.qpos[index + 3 : index + 7])
            out += [x, y, np.cos(4 * yaw), np.sin(4 * yaw)]
        for mocap in self._goals:
            out += list(self.data.mocap_pos[mocap, :2])
        return out


class PushCubeEnv(PusherEnv):
    """See the module docstring. `variant`: a key of VARIANTS ('' is the training scene); other kwargs:
    image_size, cameras, render_mode, render_size, terminate_on_success."""

    SCENE = "push_cube.xml"
    TASK = "push the red cube into the green goal region"
    ENV_STATE_BOUNDS = ([-0.35, -0.35, -1, -1, -0.35, -0.35], [0.35, 0.35, 1, 1, 0.35, 0.35])
    is_success_from_env_state = staticmethod(is_success_from_env_state)

    def __init__(self, variant: str = "", **kwargs) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"PushCubeEnv: variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        self.variant = variant
        self._cube_half = CUBE_HALVES.get(variant, CUBE_HALF)
        super().__init__(**kwargs)
        self._init_pusher()
        self._cube = self._joint_qpos("cube")  # 3 position + 4 quaternion (w, x, y, z)
        self._goal = int(self.model.body("goal").mocapid[0])

    def _load_model(self) -> mujoco.MjModel:
        if not self.variant:
            return super()._load_model()  # the training scene exactly as the XML compiles
        spec = mujoco.MjSpec.from_file(str(scene_path(self.SCENE)))
        geom = {g.name: g for g in spec.geoms}
        if self.variant in ("cube_color", "cube_orange"):
            geom["cube"].rgba = [0.95, 0.8, 0.1, 1.0] if self.variant == "cube_color" else [0.95, 0.5, 0.1, 1.0]
        elif self.variant in CUBE_HALVES:
            geom["cube"].size = [self._cube_half] * 3
            geom["cube"].mass = 0.1 * (self._cube_half / CUBE_HALF) ** 3
        elif self.variant in ("table_color", "table_dark"):
            geom["table"].rgba = [0.55, 0.4, 0.25, 1.0] if self.variant == "table_color" else [0.4, 0.4, 0.4, 1.0]
        elif self.variant == "distractor":
            spec.worldbody.add_geom(name="distractor", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.04, 0.001, 0],
                                    pos=[-0.2, 0.2, 0.001], rgba=[0.6, 0.2, 0.8, 1.0], contype=0, conaffinity=0)
        elif self.variant == "distractor_box":
            spec.worldbody.add_geom(name="distractor", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.015] * 3,
                                    pos=[0.2, -0.2, 0.015], rgba=[0.95, 0.95, 0.95, 1.0], contype=0, conaffinity=0)
        elif self.variant in ("camera_shift", "camera_raise"):
            cam = next(c for c in spec.cameras if c.name == "top")
            dx, dy, dz = (0.05, 0.03, 0.0) if self.variant == "camera_shift" else (0.0, 0.0, 0.08)
            cam.pos = [cam.pos[0] + dx, cam.pos[1] + dy, cam.pos[2] + dz]
        elif self.variant == "light_dim":
            spec.visual.headlight.ambient = [0.225] * 3
            spec.visual.headlight.diffuse = [0.25] * 3
            next(lt for lt in spec.lights if lt.name == "sun").diffuse = [0.175] * 3
        return spec.compile()

    def _randomize(self, rng: np.random.Generator) -> None:
        cube = rng.uniform(-0.15, 0.15, size=2)
        yaw = rng.uniform(-np.pi, np.pi)
        goal = random_goal(rng, cube)
        pusher = sample_away(rng, 0.22, cube, 0.08)
        qpos = self.data.qpos
        qpos[self._pusher : self._pusher + 2] = pusher
        qpos[self._cube : self._cube + 7] = [*cube, self._cube_half, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        self.data.ctrl[:] = pusher  # servos hold the pusher where it starts
        self.set_goal(goal)

    def set_goal(self, goal: np.ndarray) -> None:
        """Place the goal disk's centre at `goal` (x, y); takes effect at the next forward pass or step."""
        self.data.mocap_pos[self._goal] = [*goal, 0.0]

    def _env_state(self) -> np.ndarray:
        x, y = self.data.qpos[self._cube : self._cube + 2]
        quat = self.data.qpos[self._cube + 3 : self._cube + 7]
        yaw = yaw_from_quat(quat)
        goal = self.data.mocap_pos[self._goal, :2]
        return np.array([x, y, np.cos(4 * yaw), np.sin(4 * yaw), *goal])


def relabel_goal(env: PushCubeEnv, episode: Episode, goal: np.ndarray) -> Episode:
    """The same recorded motion with the goal disk moved to `goal` (2,): every frame re-rendered from
    the episode's simulator states, environment_state, rewards and outcome recomputed.

    The goal is visual only, so the physics is the episode's own; what changes is where the goal is
    drawn relative to the pushes. The experts always push towards the goal, so a world model trained
    on their episodes can read the push direction off the goal's position instead of the contact;
    relabelled copies break that correlation. As the env would, the new episode ends at the first
    frame whose cube lies in the new goal (success, terminated); otherwise it keeps every step and is
    marked truncated, since its end is not an outcome of the new goal. With the episode's own goal the
    frames come back bit for bit (tests/envs/test_relabel.py).
    """
    if episode.sim_states.shape[1] == 0:
        raise ValueError("relabel_goal needs the episode's simulator states (sim_states); record it with "
                         "`wmsuite collect`, which stores them")
    goal = np.asarray(goal, np.float64).reshape(2)
    env_state = episode.env_state.copy()  # (T+1, 6)
    env_state[:, 4:6] = goal
    reached = is_success_from_env_state(env_state)  # (T+1,)
    end = int(np.argmax(reached[1:])) + 1 if reached[1:].any() else episode.length
    success = bool(reached[end])
    frames = {cam: np.empty((end + 1, *f.shape[1:]), np.uint8) for cam, f in episode.obs.items()}
    sim_states = np.empty((end + 1, episode.sim_states.shape[1]), np.float64)
    for t in range(end + 1):
        env.set_sim_state(episode.sim_states[t])
        env.set_goal(goal)
        mujoco.mj_forward(env.model, env.data)
        sim_states[t] = env.get_sim_state()
        for cam, f in frames.items():
            f[t] = env.render_camera(cam, f.shape[1])
    return Episode(
        obs=frames, state=episode.state[: end + 1], actions=episode.actions[:end],
        rewards=reached[1 : end + 1].astype(np.float32), success=success, terminated=success,
        truncated=not success, env_state=env_state[: end + 1], intervention=episode.intervention[:end],
        sim_states=sim_states, task=episode.task,
        meta={**episode.meta, "relabelled_goal": [float(goal[0]), float(goal[1])]},
    )


def random_goal(rng: np.random.Generator, cube_xy: np.ndarray) -> np.ndarray:
    """A goal drawn as `PushCubeEnv.reset` draws one: uniform in [-0.2, 0.2]^2, 12 cm or more from the cube."""
    return sample_away(rng, 0.2, np.asarray(cube_xy), 0.12)


def yaw_from_quat(quat: np.ndarray) -> float:
    """Rotation about world z of a (w, x, y, z) quaternion."""
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, quat)
    return float(np.arctan2(mat[3], mat[0]))
