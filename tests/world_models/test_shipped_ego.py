"""The shipped PushCubeEgo pair (assets/wm/pushcubeego with spatial memory and its start map, -nomem
without): one recipe that differs only in the memory, and the memory model as a learned simulator of the task, its memory
kept per sub-environment and reset with the episode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "wm"


def test_the_pair_differs_only_in_the_memory_and_its_map():
    with_memory = json.loads((ASSETS / "pushcubeego" / "config.json").read_text())
    without = json.loads((ASSETS / "pushcubeego-nomem" / "config.json").read_text())
    assert with_memory["env_id"] == without["env_id"] == "wmsuite/PushCubeEgo-v0"
    assert with_memory["world_model"]["memory_frames"] == 2 and without["world_model"]["memory_frames"] == 0
    differ = {k for k in with_memory["world_model"] if with_memory["world_model"][k] != without["world_model"].get(k)}
    assert "memory_frames" in differ and differ <= {"memory_frames", "start_map", "map_unseen"}
    assert with_memory["world_model"]["camera"] == "ego" and with_memory["step"] == without["step"]
    assert with_memory["codec"] == without["codec"] and with_memory["heads_steps"] == without["heads_steps"]


def test_the_shipped_memory_model_steps_the_task_and_resets_its_memory_per_episode():
    """assets/wm/pushcubeego under its task's judge: the real env's observation format, the real start
    frame as each sub-environment's first keyframe, one frame per generated step in the memory, and a
    reset of one sub-environment that starts its memory over and leaves the other's alone."""
    import wmsuite.envs  # noqa: F401  (registers the id)
    from wmsuite.cli.common import memory_geometry
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

    probe = get_probe("wmsuite/PushCubeEgo-v0")
    model = load_world_model("assets:wm/pushcubeego")
    env = make_world_model_env(model, probe.env_id, 2, seed=0, judge=probe.auto_judge,
                               success_fn=probe.success_from_env_state, tracking=ObjectTracking.from_probe(probe),
                               static_state=probe.static_state, memory_geometry=memory_geometry(probe.env_id, "ego"))
    obs, _ = env.reset(seed=[0, 1])
    assert obs["pixels"]["ego"].shape == (2, 64, 64, 3)
    assert [list(m.keyframes) for m in env.memory.bank.memories] == [[0], [0]]
    for _ in range(2):
        obs, _, _, _, info = env.step(np.full((2, *env.single_action_space.shape), 0.5, np.float32))
    assert env.memory.t.tolist() == [2 * model.cfg.chunk] * 2 and "judge/tracked" in info
    assert np.isfinite(obs["agent_pos"]).all() and obs["pixels"]["ego"].dtype == np.uint8
    kept = len(env.memory.bank[1])
    env.reset(seed=[5, 6], options={"reset_mask": np.array([True, False])})
    assert env.memory.t.tolist() == [0, 2 * model.cfg.chunk] and list(env.memory.bank[0].keyframes) == [0]
    assert len(env.memory.bank[1]) == kept
    env.close()


def test_the_learned_simulator_dead_reckons_the_agent_the_riding_camera_cannot_show():
    """With the probe's moving_camera_advance, the imagined agent is where the actions command it, which
    is within a few centimetres of the real pusher under the same actions, and the tracked cube is the
    heads' cube relative to the heads' agent, placed at the dead-reckoned agent (or held where the agent
    is out of reach)."""
    import gymnasium as gym

    import wmsuite.envs  # noqa: F401  (registers the id)
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

    probe = get_probe("wmsuite/PushCubeEgo-v0")
    model = load_world_model("assets:wm/pushcubeego-nomem")
    env = make_world_model_env(model, probe.env_id, 1, seed=0, judge="tracked", success_fn=probe.success_from_env_state,
                               tracking=ObjectTracking.from_probe(probe), static_state=probe.static_state,
                               agent_advance=probe.moving_camera_advance)
    real = gym.make(probe.env_id)
    obs, _ = env.reset(seed=[3])
    real_obs, _ = real.reset(seed=3)
    np.testing.assert_array_equal(obs["agent_pos"][0], real_obs["agent_pos"])
    rng = np.random.default_rng(0)
    for _ in range(3):
        chunk = rng.uniform(-1, 1, env.single_action_space.shape).astype(np.float32)  # (H, 2)
        expected = probe.moving_camera_advance(obs["agent_pos"][0], chunk)
        obs, _, _, _, info = env.step(chunk[None])
        for action in chunk:
            real_obs, *_ = real.step(action)
        np.testing.assert_allclose(obs["agent_pos"][0], expected, atol=1e-6)  # the commanded motion, exactly
        assert np.linalg.norm(obs["agent_pos"][0] - real_obs["agent_pos"]) < 0.05
    with torch.no_grad():
        read = model.predict_heads(env.state.context[:, -1:])  # the newest frame's readings, (1, 1, ...)
    cube = read["environment_state"][0, 0, :2].numpy() - read["agent_pos"][0, 0, :2].numpy() + obs["agent_pos"][0]
    if np.linalg.norm(cube - env._trackers["tracked"].positions[0, 0]) > 1e-5:  # held: the agent was out of reach
        assert np.linalg.norm(obs["agent_pos"][0] - env._trackers["tracked"].positions[0, 0]) > probe.reach
    real.close()
    env.close()
