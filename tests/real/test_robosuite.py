"""robosuite tasks as Gymnasium envs, the scripted Lift/Stack expert, and agreement with the Robomimic layout.

Needs the `sim` extra (robosuite 1.4.0); skipped without it. Cameras are small and rollouts short:
a two-camera 84 px step costs ~30 ms here, a state-only step ~5 ms.
"""

from __future__ import annotations

import json

import gymnasium as gym
import h5py
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("robosuite", reason="robosuite extra not installed: pip install 'wmsuite[sim]'")

from tests.core.helpers import check_expert_zoo  # noqa: E402
from wmsuite.data.readers import ROBOMIMIC_IMAGE, read_robomimic  # noqa: E402
from wmsuite.envs.robosuite_env import (  # noqa: E402
    PROPRIO_KEYS,
    TASKS,
    RobosuiteEnv,
    env_id,
    register_robosuite_envs,
)
from wmsuite.envs.robosuite_experts import FAILURE_MODES, RobosuiteExpert, make_robosuite_expert  # noqa: E402

pytestmark = pytest.mark.sim
IDS = register_robosuite_envs()


@pytest.mark.parametrize("eid", IDS)
def test_check_env_every_registered_id(eid):
    env = gym.make(eid, cameras=("agentview",), image_size=24)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=0)
        assert obs["pixels"]["agentview"].shape == (24, 24, 3) and obs["agent_pos"].shape == (9,)
        assert info["is_success"] is False and info["task"] and info["sim_state"].dtype == np.float64
        assert env.spec.max_episode_steps == 400
    finally:
        env.close()


def test_registry_and_bad_task():
    assert IDS == [env_id(t) for t in TASKS] and all(i in gym.registry for i in IDS)
    with pytest.raises(ValueError, match=r"unknown robosuite task 'Door'; registered tasks are \['Lift'"):
        RobosuiteEnv("Door")
    with pytest.raises(ValueError, match="no scripted robosuite expert for task 'PickPlaceCan'"):
        make_robosuite_expert(env_id("PickPlaceCan"))


@pytest.fixture(scope="module")
def lift():
    env = RobosuiteEnv("Lift", cameras=("agentview",), image_size=64)
    yield env
    env.close()


def test_soft_reset_is_seeded_and_leaves_numpys_generator_alone(lift):
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    _, a = lift.reset(seed=7)
    _, b = lift.reset(seed=8)
    _, c = lift.reset(seed=7)
    np.testing.assert_array_equal(a["sim_state"], c["sim_state"])
    assert not np.array_equal(a["sim_state"], b["sim_state"])  # the cube is placed elsewhere
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # noqa: NPY002


def test_frames_are_upright(lift):
    """The red cube appears where a pinhole projection of its world position says (rows top-down)."""
    obs, _ = lift.reset(seed=3)
    frame = obs["pixels"]["agentview"].astype(int)
    red = (frame[..., 0] > 100) & (frame[..., 0] > 2 * frame[..., 1]) & (frame[..., 0] > 2 * frame[..., 2])
    assert red.sum() > 3
    rows, cols = np.nonzero(red)
    sim = lift.sim
    cam = sim.model.camera_name2id("agentview")
    cube = obs["environment_state"][:3].astype(np.float64)
    rel = sim.data.cam_xmat[cam].reshape(3, 3).T @ (cube - sim.data.cam_xpos[cam])  # camera frame: looks along -z
    f = 0.5 * 64 / np.tan(np.deg2rad(sim.model.cam_fovy[cam]) / 2)
    want_row, want_col = 32 - f * rel[1] / -rel[2], 32 + f * rel[0] / -rel[2]
    assert abs(rows.mean() - want_row) < 3 and abs(cols.mean() - want_col) < 3


def test_sim_state_replays_the_observation(lift):
    obs, info = lift.reset(seed=1)
    states, agent = [info["sim_state"]], [obs["agent_pos"]]
    for _ in range(5):
        obs, _, _, _, info = lift.step(np.array([0.5, -0.3, 0.2, 0, 0, 0.1, 1.0], np.float32))
        states.append(info["sim_state"])
        agent.append(obs["agent_pos"])
    for k in (0, 3, 5):
        raw = lift.set_sim_state(states[k])
        np.testing.assert_array_equal(lift.get_sim_state(), states[k])
        got = np.concatenate([np.ravel(raw[key]) for key in PROPRIO_KEYS]).astype(np.float32)
        # robosuite samples observables inside its last physics substep (2 ms before the returned state)
        np.testing.assert_allclose(got, agent[k], atol=1e-3)
        assert k == 0 or np.abs(agent[k] - agent[0]).max() > 1e-2  # the arm did move


def test_robomimic_layout_of_an_env_rollout_reads_back_as_the_env_saw_it(tmp_path, lift):
    """Record raw robosuite observations as dataset_states_to_obs.py stores them; the reader gives our convention."""
    obs, _ = lift.reset(seed=2)
    raw = [lift.robosuite_env._get_observations()]
    ours, actions = [obs], []
    for t in range(4):
        a = np.array([0.2 * t, 0.1, -0.1, 0, 0, 0, -1], np.float32)
        obs, *_ = lift.step(a)
        raw.append(lift.robosuite_env._get_observations())  # what step() returned
        ours.append(obs)
        actions.append(a)
    path = tmp_path / "image.hdf5"
    with h5py.File(path, "w") as f:
        g = f.create_group("data/demo_0")
        for key in ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos"):
            series = np.stack([r[key] for r in raw])
            g["obs/" + key], g["next_obs/" + key] = series[:-1], series[1:]
        series = np.stack([r["object-state"] for r in raw])
        g["obs/object"], g["next_obs/object"] = series[:-1], series[1:]
        series = np.stack([r["agentview_image"][::-1] for r in raw])  # robomimic's wrapper flips the rows
        g["obs/agentview_image"], g["next_obs/agentview_image"] = series[:-1], series[1:]
        g["actions"], g["rewards"], g["dones"] = np.stack(actions), np.zeros(4), np.eye(1, 4, 3)[0]
        f["data"].attrs["env_args"] = '{"env_name": "Lift", "type": 1, "env_kwargs": {}}'
    key_map = ROBOMIMIC_IMAGE.__class__(**{**ROBOMIMIC_IMAGE.__dict__, "cameras": {"agentview": "agentview_image"}})
    (ep,) = read_robomimic(path, key_map=key_map)
    for t in range(5):
        np.testing.assert_array_equal(ep.obs["agentview"][t], ours[t]["pixels"]["agentview"])
        np.testing.assert_allclose(ep.state[t], ours[t]["agent_pos"], atol=1e-6)
        np.testing.assert_allclose(ep.env_state[t], ours[t]["environment_state"], atol=1e-6)


def run_expert(task: str, skill: float, episodes: int, seed0: int = 1000, force: str | None = None,
               horizon: int = 1) -> list[bool]:
    """Each episode's success, the expert's chunks of `horizon` actions played in full."""
    env = RobosuiteEnv(task, cameras=())
    expert = RobosuiteExpert(task, skill=skill, seed=0, force_failure=force, horizon=horizon)
    expert.reset()
    limit = gym.spec(env_id(task)).max_episode_steps
    results = []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed0 + ep)
            expert.reset_envs([0])
            for _ in range(0, limit, horizon):
                chunk = expert.predict_action_chunk({k: v[None] for k, v in obs.items()})  # (1, H, 7)
                assert chunk.shape == (1, horizon, 7) and np.all(np.abs(chunk) <= 1)
                for action in chunk[0]:
                    obs, _, terminated, _, info = env.step(action)
                    if terminated:
                        break
                if terminated:
                    break
            results.append(bool(info["is_success"]))
    finally:
        env.close()
    return results


@pytest.mark.parametrize("horizon", [1, 4])
def test_lift_expert_at_high_skill_succeeds(horizon):
    """Also when it plans a world model's chunk of 4 actions open loop from each observation."""
    results = run_expert("Lift", skill=1.0, episodes=20, horizon=horizon)
    assert np.mean(results) >= 0.9, results


def test_turn_yaw_turns_about_world_z():
    from wmsuite.envs.robosuite_experts import quat_yaw, turn_yaw

    q = np.array([0.1, -0.2, 0.3, 0.9])
    q /= np.linalg.norm(q)
    for angle in (0.3, -1.0):
        turned = turn_yaw(q, angle)
        assert np.isclose(np.linalg.norm(turned), 1.0)
        assert np.isclose(wrap_angle(quat_yaw(turned) - quat_yaw(q) - angle), 0.0, atol=1e-9)


def wrap_angle(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAILURE_MODES)
def test_each_failure_mode_fails(mode):
    assert not any(run_expert("Lift", skill=1.0, episodes=1, force=mode))


@pytest.mark.slow
def test_stack_expert_succeeds():
    assert np.mean(run_expert("Stack", skill=1.0, episodes=4)) >= 0.75


def test_collect_records_expert_demonstrations(tmp_path):
    """`wmsuite collect` with the robosuite expert writes real demonstrations that read back as episodes."""
    from wmsuite.cli import main as cli_main
    from wmsuite.data import read_episodes

    spec = 'wmsuite.envs.robosuite_experts:make_robosuite_expert{"env_id": "wmsuite/robosuite-Lift-v0", "skill": 1.0}'
    out = tmp_path / "lift.hdf5"
    assert cli_main(["collect", "--env", env_id("Lift"), "--policy", spec, "--num-envs", "1", "--episodes", "2",
                     "--image-size", "32", "--out", str(out)]) == 0
    eps = read_episodes(out)
    assert [ep.success for ep in eps] == [True, True] and eps[0].task == "lift the cube"
    assert eps[0].cameras == ["agentview", "robot0_eye_in_hand"] and eps[0].state.shape[1] == 9
    # the recorded simulator states replay the recorded proprioception
    env = RobosuiteEnv("Lift", cameras=())
    try:
        raw = env.set_sim_state(eps[1].sim_states[10])
        np.testing.assert_allclose(raw["robot0_eef_pos"], eps[1].state[10, :3], atol=1e-3)
    finally:
        env.close()


def test_eval_wm_on_lift_through_its_probe_at_84_px(tmp_path):
    """eval-wm on Lift episodes that collect records at robosuite's 84 px (#29): an untrained world
    model of Lift's sizes; the probe has no frame detector, so the object error comes from the state
    head, against the real cube position."""
    import torch

    from wmsuite.checkpoint import save_checkpoint
    from wmsuite.cli import main as cli_main
    from wmsuite.data import load_episodes
    from wmsuite.world_models import CodecConfig, LatentWorldModel, WorldModelConfig
    from wmsuite.world_models.train import state_stats

    data = tmp_path / "lift.hdf5"
    spec = ('wmsuite.envs.robosuite_experts:make_robosuite_expert{"env_id": "wmsuite/robosuite-Lift-v0", '
            '"skill": 1.0, "horizon": 4}')
    assert cli_main(["collect", "--env", env_id("Lift"), "--policy", spec, "--num-envs", "1", "--episodes", "2",
                     "--image-size", "84", "--out", str(data)]) == 0
    episodes = load_episodes(data)
    torch.manual_seed(0)
    model = LatentWorldModel(WorldModelConfig(camera="agentview", context=2, chunk=4, action_dim=7, state_dim=9,
                                              env_state_dim=episodes[0].env_state.shape[1], channels=(16, 16, 16),
                                              sampling_steps=1),
                             CodecConfig(kind="pixel", image_size=84), state_stats(episodes))
    save_checkpoint(tmp_path / "wm", model.state_dict(), model.config_dict())
    assert cli_main(["eval-wm", "--wm", str(tmp_path / "wm"), "--data", str(data), "--horizons", "4", "8",
                     "--out", str(tmp_path / "fid")]) == 0
    metrics = json.loads((tmp_path / "fid" / "metrics.json").read_text())
    assert metrics["env"] == env_id("Lift")
    for key in ("psnr", "state_error"):
        assert set(metrics[key]) == {"4", "8"} and all(np.isfinite(v) for v in metrics[key].values()), metrics[key]


def test_the_lift_zoo_spans_success_and_reads_as_a_manifest():
    """assets/zoo/lift.json (experiments/scripts/expert_zoo.py --task lift)."""
    check_expert_zoo("assets:zoo/lift.json", env_id("Lift"), rerun="expert-skill1", episodes=12)


def test_the_shipped_lift_model_reads_its_real_start_and_steps_with_the_latched_judge():
    """assets/wm/lift loads and steps robosuite Lift from real starts with its judge, the latched one:
    the cube's start is the real one, the state head reads it off the encoded real frame within a few
    centimetres, and a step reports every judge the probe allows."""
    import wmsuite.envs  # noqa: F401  (registers the ids)
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

    probe = get_probe("wmsuite/robosuite-Lift-v0")
    model = load_world_model("assets:wm/lift")
    assert model.cfg.camera == "agentview" and model.cfg.action_dim == probe.action_dim
    env = make_world_model_env(model, probe.env_id, 2, seed=0, judge=probe.auto_judge,
                               tracking=ObjectTracking.from_probe(probe),
                               success_fn=probe.success_from_env_state,
                               env_kwargs={"image_size": 64, "cameras": ("agentview",)})  # the model's frames
    try:
        obs, _ = env.reset(seed=[3, 4])
        read = model.predict_heads(env.state.context[:, -1])["environment_state"].detach().numpy()
        assert np.abs(read[:, :3] - obs["environment_state"][:, :3]).max() < 0.03  # the cube's xyz
        obs, _, terminated, _, info = env.step(np.zeros((2, *env.single_action_space.shape), np.float32))
        assert obs["pixels"]["agentview"].shape == (2, 64, 64, 3) and not terminated.any()  # nothing lifts it
        assert {"judge/head", "judge/state", "judge/tracked", "judge/latched"} <= set(info)
    finally:
        env.close()
