"""Play data generators and the zoo's scripted non-experts, checked in the real PushCube simulator."""

from __future__ import annotations

import numpy as np
import pytest

from wmsuite.envs import make_env
from wmsuite.envs.behaviours import make_behaviour
from wmsuite.envs.play import PushCubePlay, make_play
from wmsuite.envs.push_cube import GOAL_RADIUS


def _run(policy, seeds, env=None):
    """(final obs, info, cube start) per episode of `policy` in the real env, one env step per action."""
    env = env or make_env("wmsuite/PushCube-v0", cameras=())
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        policy.reset()
        start, done = obs["environment_state"][:2].copy(), False
        while not done:
            action = policy.select_action({k: v[None] for k, v in obs.items()})[0]
            obs, _, term, trunc, info = env.step(action)
            done = term or trunc
        out.append((obs, info, start))
    env.close()
    return out


def test_park_puts_the_agent_on_the_goal_and_never_moves_the_cube():
    """The counterfactual negative the play data exists for: agent on the goal, object elsewhere, no success."""
    for obs, info, start in _run(make_play(modes=["park"], seed=3), range(6)):
        assert np.linalg.norm(obs["agent_pos"] - obs["environment_state"][4:6]) < GOAL_RADIUS
        assert np.linalg.norm(obs["environment_state"][:2] - start) < 0.005
        assert not info["is_success"]


def test_every_mode_runs_and_poke_moves_the_cube():
    moved = {}
    for mode in PushCubePlay.DEFAULT_MODES:
        runs = _run(make_play(modes=[mode], seed=1), range(4))
        moved[mode] = np.mean([np.linalg.norm(o["environment_state"][:2] - s) > 0.01 for o, _, s in runs])
    assert moved["poke"] == 1.0 and moved["approach_leave"] == 0.0 and moved["park"] == 0.0


def test_play_episodes_are_a_function_of_their_index():
    """reset_envs(episodes=) draws each episode's mode from its index alone (resumable collection)."""
    a, b = make_play(seed=5), make_play(seed=5)
    obs = {"agent_pos": np.zeros((3, 2), np.float32), "environment_state": np.zeros((3, 6), np.float32)}
    a.reset_envs([0, 1, 2], episodes=[7, 8, 9])
    b.reset_envs([0, 1, 2], episodes=[9, 8, 7])
    a.predict_action_chunk(obs), b.predict_action_chunk(obs)
    assert a.modes() == b.modes()[::-1]


def test_bad_play_and_behaviour_arguments_are_refused():
    with pytest.raises(ValueError, match="failure_modes"):
        make_play(modes=["teleport"])
    with pytest.raises(ValueError, match="PushCube"):
        make_play("wmsuite/PickPlace-v0")
    with pytest.raises(ValueError, match="kind must be one of"):
        make_behaviour("dance")
    with pytest.raises(ValueError, match="speed"):
        make_behaviour("chaser", speed=0.0)


def test_goal_sitter_sits_on_the_goal_and_orbit_keeps_its_radius():
    for obs, info, _ in _run(make_behaviour("goal_sitter", speed=1.0), range(4)):
        # it stops on the goal unless the cube was in the way and got pushed in (then it succeeded)
        assert info["is_success"] or np.linalg.norm(obs["agent_pos"] - obs["environment_state"][4:6]) < 0.01
    orbit = make_behaviour("orbit_goal", radius=0.1, speed=0.5)
    for obs, _, _ in _run(orbit, [0, 1]):
        assert abs(np.linalg.norm(obs["agent_pos"] - obs["environment_state"][4:6]) - 0.1) < 0.03
    chunk = make_behaviour("chaser", horizon=4).predict_action_chunk(
        {"agent_pos": np.zeros((2, 2)), "environment_state": np.tile([0.2, 0, 1, 0, 0, 0], (2, 1))})
    assert chunk.shape == (2, 4, 2) and np.allclose(chunk[..., 0], 0.6) and np.allclose(chunk[..., 1], 0.0)
