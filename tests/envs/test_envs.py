"""The built-in tasks against Gymnasium's checker, their own documented contracts, and MuJoCo itself."""

from __future__ import annotations

import copy
import importlib
import warnings

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import wmsuite.envs
from wmsuite.envs import ENV_IDS, make_env, pick_place, push_colors, push_cube, push_cube_ego, push_two_cubes
from wmsuite.envs.experts import make_expert

MODULES = {"wmsuite/PushCube-v0": push_cube, "wmsuite/PickPlace-v0": pick_place,
           "wmsuite/PushTwoCubes-v0": push_two_cubes, "wmsuite/PushCubeEgo-v0": push_cube_ego,
           "wmsuite/PushColors-v0": push_colors}
CAMERAS = {"wmsuite/PushCube-v0": ("top",), "wmsuite/PickPlace-v0": ("front", "wrist"),
           "wmsuite/PushTwoCubes-v0": ("top",), "wmsuite/PushCubeEgo-v0": ("ego", "top"), "wmsuite/PushColors-v0": ("top",)}
DIMS = {"wmsuite/PushCube-v0": (2, 2, 6), "wmsuite/PickPlace-v0": (4, 4, 6),  # action, agent_pos, env_state
        "wmsuite/PushTwoCubes-v0": (2, 2, 12), "wmsuite/PushCubeEgo-v0": (2, 2, 6), "wmsuite/PushColors-v0": (2, 2, 21)}
MAX_STEPS = {"wmsuite/PushCube-v0": 80, "wmsuite/PickPlace-v0": 120, "wmsuite/PushTwoCubes-v0": 200,
             "wmsuite/PushCubeEgo-v0": 160, "wmsuite/PushColors-v0": 100}
EXTRA_INFO = {"wmsuite/PushCubeEgo-v0": {"camera_pose"}}
"""info keys a task adds to {"is_success", "task", "sim_state"}."""


def test_registry_is_idempotent_and_complete():
    assert set(ENV_IDS) == set(MODULES)
    specs = {i: gym.spec(i) for i in ENV_IDS}
    importlib.reload(wmsuite.envs)  # importing again must neither fail nor re-register
    assert all(gym.spec(i) is specs[i] for i in ENV_IDS)
    for env_id in ENV_IDS:
        assert specs[env_id].max_episode_steps == MAX_STEPS[env_id] == MODULES[env_id].MAX_EPISODE_STEPS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_passes_without_warnings(env_id):
    env = gym.make(env_id, render_mode="rgb_array", image_size=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # includes the render check and a fresh env per render mode
    env.close()
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces_and_observations_are_as_documented(env_id):
    action_dim, pos_dim, state_dim = DIMS[env_id]
    env = make_env(env_id, image_size=24, render_mode="rgb_array", render_size=40)
    obs, info = env.reset(seed=0)
    assert env.action_space.shape == (action_dim,) and env.action_space.dtype == np.float32
    assert set(obs["pixels"]) == set(CAMERAS[env_id])
    for frame in obs["pixels"].values():
        assert frame.shape == (24, 24, 3) and frame.dtype == np.uint8
        assert frame.std() > 5  # a real picture, not a blank buffer
    assert obs["agent_pos"].shape == (pos_dim,) and obs["agent_pos"].dtype == np.float32
    assert obs["environment_state"].shape == (state_dim,) and obs["environment_state"].dtype == np.float32
    assert info["is_success"] is False and info["task"] == env.unwrapped.task and env.unwrapped.task
    np.testing.assert_array_equal(info["sim_state"], env.unwrapped.get_sim_state())
    assert env.render().shape == (40, 40, 3)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs in env.observation_space
    assert set(info) == {"is_success", "task", "sim_state"} | EXTRA_INFO.get(env_id, set())
    env.close()

    state_only = make_env(env_id, cameras=())
    obs, _ = state_only.reset(seed=0)
    assert "pixels" not in obs and "pixels" not in state_only.observation_space.spaces
    state_only.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_gives_byte_identical_observations(env_id):
    def rollout(seed):
        env = make_env(env_id, image_size=32, terminate_on_success=False)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(7)
        frames = [_obs_bytes(obs)]
        for _ in range(12):
            obs, *_ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            frames.append(_obs_bytes(obs))
        env.close()
        return frames

    first, again, other = rollout(5), rollout(5), rollout(6)
    assert first == again
    assert all(a != b for a, b in zip(first, other))


def _obs_bytes(obs) -> bytes:
    pixels = b"".join(obs["pixels"][cam].tobytes() for cam in sorted(obs["pixels"]))
    return pixels + obs["agent_pos"].tobytes() + obs["environment_state"].tobytes()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sim_state_replays_an_episode_exactly(env_id):
    env = make_env(env_id, image_size=32, terminate_on_success=False)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    states, actions, recorded = [env.unwrapped.get_sim_state()], [], [_obs_bytes(obs)]
    for _ in range(20):
        actions.append(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        obs, *_ = env.step(actions[-1])
        states.append(env.unwrapped.get_sim_state())
        recorded.append(_obs_bytes(obs))
    assert states[0].dtype == np.float64 and states[0].ndim == 1

    replay = make_env(env_id, image_size=32, terminate_on_success=False)
    replay.reset(seed=99)  # a different layout, overwritten by the stored state
    replay.unwrapped.set_sim_state(states[8])
    assert _obs_bytes(replay.unwrapped._observation()) == recorded[8]
    for t in range(8, 20):
        obs, *_ = replay.step(actions[t])
        assert _obs_bytes(obs) == recorded[t + 1]
        np.testing.assert_array_equal(replay.unwrapped.get_sim_state(), states[t + 1])
    with pytest.raises(ValueError, match="expects shape"):
        replay.unwrapped.set_sim_state(states[0][:-1])
    env.close()
    replay.close()


def test_bad_input_gets_a_clear_error():
    known = "known ids: wmsuite/PushCube-v0, wmsuite/PickPlace-v0, wmsuite/PushTwoCubes-v0, wmsuite/PushCubeEgo-v0, wmsuite/PushColors-v0"
    with pytest.raises(ValueError, match=known):
        make_env("wmsuite/PushBall-v0")
    env = make_env("wmsuite/PushCube-v0", cameras=())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        env.step(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(np.array([np.nan, 0.0], np.float32))
    with pytest.raises(ValueError, match="image_size"):
        make_env("wmsuite/PushCube-v0", image_size=3)
    with pytest.raises(ValueError, match="cameras"):
        make_env("wmsuite/PickPlace-v0", cameras=("top",))
    env.close()


def test_actions_move_the_agent_by_the_documented_scale():
    """A full +x action moves the pusher's servo target 4 cm; the pusher gets most of the way in 0.1 s."""
    env = make_env("wmsuite/PushCube-v0", cameras=())
    obs, _ = env.reset(seed=1)
    start = obs["agent_pos"].copy()
    obs, *_ = env.step(np.array([1.0, 0.0], np.float32))
    np.testing.assert_allclose(env.unwrapped.data.ctrl, [start[0] + push_cube.ACTION_SCALE, start[1]], atol=1e-6)
    assert 0.7 * push_cube.ACTION_SCALE < obs["agent_pos"][0] - start[0] <= 1.1 * push_cube.ACTION_SCALE
    assert abs(obs["agent_pos"][1] - start[1]) < 2e-3
    env.close()


def _oracle_success(env_id: str, env) -> bool:
    """Success recomputed from MuJoCo's own kinematics of the current state and the MJCF goal geometry."""
    model, data = env.unwrapped.model, copy.copy(env.unwrapped.data)
    mujoco.mj_kinematics(model, data)  # after mj_step, xpos lags qpos by one substep
    if env_id == "wmsuite/PushTwoCubes-v0":  # each cube in the goal disk of its colour
        inside = []
        for colour in ("red", "green"):
            cube, goal = data.xpos[model.body(f"cube_{colour}").id], model.geom(f"goal_{colour}")
            inside.append(np.linalg.norm(cube[:2] - data.geom_xpos[goal.id][:2]) < goal.size[0])
        return bool(all(inside))
    if env_id == "wmsuite/PushColors-v0":  # the cube and goal the instruction's words name
        words = env.unwrapped.task.split()
        cube, goal = data.xpos[model.body(f"cube_{words[2]}").id], model.geom(f"goal_{words[6]}")
        return bool(np.linalg.norm(cube[:2] - data.geom_xpos[goal.id][:2]) < goal.size[0])
    cube = data.xpos[model.body("cube").id]
    if env_id in ("wmsuite/PushCube-v0", "wmsuite/PushCubeEgo-v0"):
        goal = model.geom("goal")
        centre = data.geom_xpos[goal.id]
        return bool(np.linalg.norm(cube[:2] - centre[:2]) < goal.size[0])
    target = model.geom("target")
    centre = data.geom_xpos[target.id]
    resting = cube[2] < model.geom("cube").size[2] + 0.005
    return bool(np.linalg.norm(cube[:2] - centre[:2]) < target.size[0] and resting)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_success_from_env_state_agrees_with_info_and_the_simulator(env_id):
    module = MODULES[env_id]
    env = make_env(env_id, cameras=(), terminate_on_success=False)
    states, flags = [], []
    for ep in range(4):
        expert = make_expert(env_id, skill=1.0, seed=ep)
        obs, info = env.reset(seed=ep)
        for _ in range(60):
            states.append(obs["environment_state"])
            flags.append(info["is_success"])
            assert info["is_success"] == _oracle_success(env_id, env)
            obs, reward, terminated, truncated, info = env.step(expert.select_action(
                {k: v[None] for k, v in obs.items()})[0])
            assert reward == float(info["is_success"]) and not terminated
    env.close()
    flags = np.array(flags)
    assert flags.any() and not flags.all()  # both outcomes exercised
    np.testing.assert_array_equal(module.is_success_from_env_state(np.stack(states)), flags)  # batched
    with pytest.raises(ValueError, match=f"{DIMS[env_id][2]} entries"):
        module.is_success_from_env_state(np.zeros((3, 5)))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episode_terminates_on_success_by_default(env_id):
    env = make_env(env_id, cameras=())
    expert = make_expert(env_id, skill=1.0, seed=0)
    obs, _ = env.reset(seed=0)
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(expert.select_action(
            {k: v[None] for k, v in obs.items()})[0])
        steps += 1
    assert terminated and not truncated and info["is_success"] and reward == 1.0
    assert steps < MAX_STEPS[env_id] // 2  # the expert finishes well inside the time limit
    env.close()


def test_scene_has_no_shadows_reflections_or_multisampling():
    for env_id in ENV_IDS:
        env = make_env(env_id, cameras=())
        model = env.unwrapped.model
        assert model.vis.quality.shadowsize == 0 and model.vis.quality.offsamples == 0
        assert not model.light_castshadow.any()
        assert model.nmat == 0 or not model.mat_reflectance.any()
        assert env.unwrapped.frame_skip * model.opt.timestep == pytest.approx(0.1)  # 10 Hz control
        assert isinstance(model, mujoco.MjModel)
        env.close()


def test_two_cubes_succeed_only_with_each_cube_in_the_goal_of_its_colour():
    env = make_env("wmsuite/PushTwoCubes-v0", cameras=())
    env.reset(seed=3)
    sim = env.unwrapped
    goals = {c: sim.data.mocap_pos[sim.model.body(f"goal_{c}").mocapid[0], :2].copy() for c in ("red", "green")}

    def place(red, green) -> bool:
        for colour, xy in (("red", red), ("green", green)):
            q = sim.model.joint(f"cube_{colour}").qposadr[0]
            sim.data.qpos[q : q + 2] = xy
        mujoco.mj_forward(sim.model, sim.data)
        return bool(push_two_cubes.is_success_from_env_state(sim._env_state().astype(np.float32)))

    far = np.array([0.25, 0.25])
    assert not place(goals["red"], far) and not place(far, goals["green"])  # one push is half the task
    assert not place(goals["green"], goals["red"] + [0.0, 0.0])  # each in the other's goal: no
    assert place(goals["red"] + [0.03, 0.0], goals["green"] - [0.0, 0.03])  # both inside their disks
    env.close()
