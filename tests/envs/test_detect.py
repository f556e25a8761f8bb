"""Colour-blob cube detectors against the simulator's true cube position, on real rendered frames."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from wmsuite.envs import make_env, pick_place, push_cube
from wmsuite.envs.experts import make_expert


def _frames(env_id: str, camera: str, size: int, episodes: int):
    """Frames of a camera with the true state, from skill-0.7 expert episodes (cube pushed to and fro)."""
    env = make_env(env_id, image_size=size, cameras=(camera,))
    expert = make_expert(env_id, skill=0.7, seed=0)
    frames, env_states, agent_pos = [], [], []
    for ep in range(episodes):
        obs, _ = env.reset(seed=100 + ep)
        expert.reset()
        done = False
        while not done:
            frames.append(obs["pixels"][camera])
            env_states.append(obs["environment_state"])
            agent_pos.append(obs["agent_pos"])
            action = expert.select_action({k: v[None] for k, v in obs.items() if k != "pixels"})[0]
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    env.close()
    return np.stack(frames), np.stack(env_states), np.stack(agent_pos)


@pytest.mark.parametrize("size, max_err, median_err", [(64, 0.010, 0.004), (128, 0.010, 0.003)])
def test_push_cube_top_camera_detector_error(size, max_err, median_err):
    frames, env_state, _ = _frames("wmsuite/PushCube-v0", "top", size, episodes=6)
    xy = push_cube.detect_cube_xy(frames)  # (N, 2), batched
    err = np.linalg.norm(xy - env_state[:, :2], axis=1)
    assert len(err) > 100 and not np.isnan(err).any()
    assert err.max() < max_err and np.median(err) < median_err
    np.testing.assert_array_equal(push_cube.detect_cube_xy(frames[3]), xy[3])  # single frame (2,)


def test_pick_place_front_camera_detector_error_when_the_cube_is_visible():
    """Random layouts with the hand moved behind the cube (farther from the camera at y = -0.5), where it
    cannot hide it. With the hand in front, errors of a few cm are expected and documented."""
    env = make_env("wmsuite/PickPlace-v0", image_size=64, cameras=())
    sim = env.unwrapped
    rng = np.random.default_rng(0)
    frames, truth = [], []
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        cube = obs["environment_state"][:3]
        hand = sim.model.joint("hand_x").qposadr[0]
        sim.data.qpos[hand : hand + 3] = [rng.uniform(-0.2, 0.2), min(cube[1] + rng.uniform(0.05, 0.12), 0.25),
                                          rng.uniform(0.0, 0.2)]
        mujoco.mj_forward(sim.model, sim.data)
        frames.append(sim.render_camera("front", 64))
        truth.append(cube[:2])
    env.close()
    err = np.linalg.norm(pick_place.detect_cube_xy(np.stack(frames)) - np.stack(truth), axis=1)
    assert err.max() < 0.010 and np.median(err) < 0.003  # measured over 300 layouts: max 8 mm, median 2 mm


def test_detector_returns_nan_without_a_cube_and_rejects_bad_frames():
    env = make_env("wmsuite/PushCube-v0", image_size=64)
    obs, _ = env.reset(seed=0)
    model = env.unwrapped.model
    model.geom_rgba[model.geom("cube").id] = [0.62, 0.62, 0.62, 1.0]  # paint the cube like the table
    blank = env.unwrapped.render_camera("top", 64)
    env.close()
    assert np.isnan(push_cube.detect_cube_xy(blank)).all()
    assert not np.isnan(push_cube.detect_cube_xy(obs["pixels"]["top"])).any()
    with pytest.raises(ValueError, match="uint8"):
        push_cube.detect_cube_xy(obs["pixels"]["top"].astype(np.float32))
    with pytest.raises(ValueError, match="'top' camera"):
        push_cube.detect_cube_xy(obs["pixels"]["top"], camera="front")
