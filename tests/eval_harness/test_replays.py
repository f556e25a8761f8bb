"""The real-simulator replays behind eval-wm's success_agreement_ceiling, checked on real PushCube episodes:
a replay from an episode's own start gives its frame and outcome back, a nudge the frame shows is not
counted, one it cannot show is, and the ceiling follows from the counted outcomes. The nudge is the task
probe's start perturbation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from wmsuite.envs import get_probe
from wmsuite.eval_harness.replays import agreement_bounds, frame_identical_outcomes, nudge_grid, replay

PROBE = get_probe("wmsuite/PushCube-v0")


@pytest.fixture(scope="module")
def env():
    from wmsuite.envs import make_env

    env = make_env("wmsuite/PushCube-v0", cameras=()).unwrapped
    env.reset(seed=0)
    yield env
    env.close()


def test_nudge_grid_is_every_combination_but_none():
    grid = nudge_grid([-1.0, 0.0, 1.0], [0.0, 2.0])
    assert len(grid) == 3 * 3 * 2 - 1 and (0.0, 0.0, 0.0) not in grid
    assert (0.001, -0.001, pytest.approx(np.radians(2.0))) in grid


def test_agreement_bounds_by_hand():
    # a success that 1 of its 4 frame-identical starts gives, a success all give, a failure half give
    got = agreement_bounds(np.array([0.25, 1.0, 0.5]), np.array([True, True, False]))
    assert got["success_agreement_ceiling"] == pytest.approx((0.75 + 1.0 + 0.5) / 3)
    assert got["success_agreement_sampler"] == pytest.approx((0.625 + 1.0 + 0.5) / 3)  # p^2 + (1 - p)^2
    assert got["success_agreement_sampler_episodes"] == pytest.approx((0.25 + 1.0 + 0.5) / 3)
    assert got["success_agreement_mode_episodes"] == pytest.approx((0.0 + 1.0 + 0.5) / 3)  # the tie counts a half


def test_own_start_replays_exactly_and_visible_nudges_are_not_counted(pushed_episodes, env):
    ep = pushed_episodes[0]
    own = replay(env, ep, (0.0, 0.0, 0.0), PROBE, "top")
    assert (own.same, own.success) == (True, ep.success)
    np.testing.assert_array_equal(own.env_state, ep.env_state[-1])  # the recorded end, bit for bit
    # 3 cm is three pixels of the 64 px frame: the frame shows it, so it is no start to mistake for the episode's
    assert replay(env, ep, (0.03, 0.0, 0.0), PROBE, "top").same is False
    out = frame_identical_outcomes(env, pushed_episodes, [(0.03, 0.0, 0.0), (0.0, -0.03, 0.5)], PROBE)
    assert out["replay_identical_starts"].tolist() == [0] * len(pushed_episodes)
    assert out["replay_p_success"].tolist() == [float(e.success) for e in pushed_episodes]
    assert out["success_agreement_ceiling"] == out["success_agreement_sampler"] == 1.0
    assert out["success_agreement_sampler_episodes"] == out["success_agreement_mode_episodes"] == 1.0
    assert out["replay_flip_rate_successes"] is None and out["replay_end_shift_median"] is None


def test_invisible_nudges_are_replayed_and_set_the_ceiling(pushed_episodes, env):
    nudges = [(1e-6, 0.0, 0.0), (0.0, 0.0, 1e-5)]  # a micrometre, a thousandth of a degree: no pixel changes
    out = frame_identical_outcomes(env, pushed_episodes, nudges, PROBE)
    assert out["replay_identical_starts"].tolist() == [2] * len(pushed_episodes)
    p = out["replay_p_success"]
    same_outcome, shifts = [], []  # per episode, the share of its 3 starts that end as it did
    for ep, share in zip(pushed_episodes, p):  # (own outcome + the two replays' successes) / 3
        replays = [replay(env, ep, n, PROBE) for n in nudges]  # the probe's camera, "top"
        outcomes = [r.success for r in replays]
        assert share == pytest.approx((ep.success + sum(outcomes)) / 3)
        same_outcome.append((1 + sum(o == ep.success for o in outcomes)) / 3)
        shifts += [np.hypot(*(r.env_state[:2] - ep.env_state[-1][:2])) for r in replays]
    assert out["replay_end_shift_median"] == pytest.approx(np.median(shifts))
    assert out["success_agreement_sampler_episodes"] == pytest.approx(np.mean(same_outcome))
    assert out["success_agreement_mode_episodes"] == pytest.approx(np.mean([s > 0.5 for s in same_outcome]))
    assert out["success_agreement_ceiling"] == pytest.approx(np.mean(np.maximum(p, 1 - p)))
    assert out["success_agreement_sampler"] == pytest.approx(np.mean(p**2 + (1 - p) ** 2))


def test_episodes_that_cannot_be_replayed_are_refused(pushed_episodes, env):
    bare = dataclasses.replace(pushed_episodes[0], sim_states=np.zeros((pushed_episodes[0].length + 1, 0)))
    with pytest.raises(ValueError, match="simulator states"):
        frame_identical_outcomes(env, [bare], [], PROBE)
    frames = pushed_episodes[0].obs["top"].copy()
    frames[0] = 255 - frames[0]  # a first frame the recorded state does not render
    other = dataclasses.replace(pushed_episodes[0], obs={"top": frames})
    with pytest.raises(RuntimeError, match="did not give back"):
        frame_identical_outcomes(env, [other], [], PROBE)


def test_a_task_without_a_start_perturbation_or_another_tasks_probe_is_refused(pushed_episodes, env):
    with pytest.raises(ValueError, match=r"wmsuite/robosuite-Lift-v0's task probe defines no start perturbation"):
        frame_identical_outcomes(env, pushed_episodes, [], get_probe("wmsuite/robosuite-Lift-v0"))
    with pytest.raises(ValueError, match="wmsuite/PickPlace-v0"):
        frame_identical_outcomes(env, pushed_episodes, [], get_probe("wmsuite/PickPlace-v0"))
