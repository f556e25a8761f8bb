"""WorldModelEnv's success judges: the head, the task's rule on the environment_state head, both; every
judge reported per step, the chosen one ending episodes, and clear errors."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from tests.world_models.conftest import tiny_model
from wmsuite.rollout import RolloutConfig
from wmsuite.rollout import rollout as run_policy
from wmsuite.world_models.contexts import EpisodeContext
from wmsuite.world_models.env import WorldModelEnv


class _Zeros:
    def reset(self):
        pass

    def predict_action_chunk(self, obs):
        return np.zeros((len(obs["agent_pos"]), 2, 2), np.float32)


def _env(episodes, success_fn=None, judge="head", n=4):
    model = tiny_model(episodes, camera="top")
    return WorldModelEnv(model, EpisodeContext(episodes), num_envs=n, horizon=3, seed=0, success_fn=success_fn,
                         judge=judge)


def _x_above(threshold):
    """A success rule on environment_state (..., 4): the square's x reading above `threshold`."""
    return lambda env_state: np.asarray(env_state)[..., 0] > threshold


def test_state_judge_follows_the_rule_on_the_env_state_head(episodes):
    """With judge 'state' an episode ends exactly when the task's rule holds on the environment_state head
    of one of the chunk's frames, and the observation is the first such frame; the head judge is still
    reported beside it."""
    seen = []

    def rule(env_state):
        seen.append(np.array(env_state))
        return np.asarray(env_state)[..., 0] > np.median(seen[0][..., 0])  # fires on some frames, not all

    env = _env(episodes, rule, "state")
    env.reset(seed=[0, 1, 2, 3])
    _, _, term, _, info = env.step(np.zeros((4, 2, 2), np.float32))
    states = seen[0]  # (n, H, E): what the heads read on every generated frame
    fired = states[..., 0] > np.median(states[..., 0])
    np.testing.assert_array_equal(term, fired.any(1))
    np.testing.assert_array_equal(info["judge/state"], fired.any(1).astype(np.float32))
    assert set(info) >= {"judge/head", "judge/state", "judge/both"}
    np.testing.assert_array_equal(info["judge/both"], (info["judge/head"] > 0) & fired.any(1))
    obs = env._env_state  # the observation's environment_state: the first firing frame where one fired
    first = np.where(fired.any(1), fired.argmax(1), 1)
    np.testing.assert_allclose(obs, states[np.arange(4), first], rtol=1e-6)


def test_judges_that_never_and_always_fire(episodes):
    never = _env(episodes, lambda s: np.zeros(np.shape(s)[:-1], bool), "state")
    always = _env(episodes, lambda s: np.ones(np.shape(s)[:-1], bool), "state")
    for env, expect in ((never, False), (always, True)):
        env.reset(seed=[0, 1, 2, 3])
        _, _, term, trunc, info = env.step(np.zeros((4, 2, 2), np.float32))
        assert (term == expect).all() and (info["is_success"] == expect).all() and not trunc.any()


def test_the_engine_keeps_judge_steps_in_episode_meta(episodes):
    """The rollout engine records every judge's value per step (meta['judge']), so an evaluation can say
    which judge fired when."""
    env = _env(episodes, _x_above(1e9), "state")  # never fires: every episode runs its 3 steps
    eps = list(run_policy(_Zeros(), env, RolloutConfig(episodes=4, seed=0, progress=False)))
    for ep in eps:
        assert set(ep.meta["judge"]) == {"judge/head", "judge/state", "judge/both"}
        assert ep.meta["judge"]["judge/state"] == [0.0, 0.0, 0.0]
        assert not ep.success and ep.truncated


def test_bad_judge_settings_are_refused(episodes):
    with pytest.raises(ValueError, match="judge must be one of"):
        _env(episodes, _x_above(0), "oracle")
    with pytest.raises(ValueError, match="needs success_fn"):
        _env(episodes, None, "state")
    env = _env(episodes)  # the head alone: no state judge reported
    env.reset(seed=[0, 1, 2, 3])
    with torch.no_grad():
        info = env.step(np.zeros((4, 2, 2), np.float32))[-1]
    assert "judge/head" in info and "judge/state" not in info


def test_tracked_judge_moves_the_object_only_within_reach_of_the_agent(episodes):
    """The tracked object position follows the state head's reading only on frames where the agent (as
    its head reads it) is within reach of where the object was; elsewhere it stays put. The observation
    then carries the tracked position, and the rule is judged on it."""
    from wmsuite.world_models.tracking import ObjectTracking

    tracking = ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=1.0)
    env = WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=2, horizon=3,
                        seed=0, success_fn=_x_above(1e9), judge="tracked", tracking=tracking)
    env.reset(seed=[0, 1])
    start = env._trackers["tracked"].positions[:, 0].copy()  # (2, 2): one tracked object per sub-env
    np.testing.assert_array_equal(start, np.stack([episodes[0].env_state[0, :2], episodes[1].env_state[0, :2]]))
    agent = np.zeros((2, 3, 2), np.float32)
    agent[0] = start[0]  # row 0: the agent sits on the object on every frame; row 1: far away
    agent[1] = start[1] + 100.0
    read = np.broadcast_to(np.array([5.0, 6.0, 7.0, 7.0], np.float32), (2, 3, 4)).copy()
    tracked = env._trackers["tracked"].update(agent, read)
    np.testing.assert_array_equal(tracked[0, :, :2], np.tile([5.0, 6.0], (3, 1)))  # followed the reading
    np.testing.assert_array_equal(tracked[1, :, :2], np.tile(start[1], (3, 1)))  # held still, untouched
    np.testing.assert_array_equal(tracked[..., 2:], read[..., 2:])  # the rest of the state as read
    with pytest.raises(ValueError, match="needs tracking"):
        _env(episodes, _x_above(0), "tracked")
    with pytest.raises(ValueError, match="reach must be > 0"):
        ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=0.0)
    env.step(np.zeros((2, 2, 2), np.float32))  # a full step runs the tracker on the heads' readings
    assert np.isfinite(env._env_state).all()


def test_tracked_judge_in_three_dimensions_holds_an_object_the_agent_is_above(episodes):
    """Tracking (x, y, z) (Lift, whose success is a height): fingers right above the object, beside it in
    height only, are out of reach, so a reading that lifts the object is not believed; fingers on it
    are followed. Positions of different sizes are refused."""
    from wmsuite.world_models.tracking import ObjectTracking

    tracking = ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 3), reach=1.0)
    assert tracking.dims == 3
    env = WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=2, horizon=3,
                        seed=0, success_fn=_x_above(1e9), judge="tracked", tracking=tracking)
    env.reset(seed=[0, 1])
    start = env._trackers["tracked"].positions[:, 0].copy()  # (2, 3)
    np.testing.assert_array_equal(start[0], episodes[0].env_state[0, :3])
    agent = np.zeros((2, 3, 3), np.float32)
    agent[0] = start[0]  # on the object
    agent[1] = start[1] + [0.0, 0.0, 5.0]  # the same (x, y), 5 above: a 2-D tracker would follow
    read = np.broadcast_to(np.array([5.0, 6.0, 9.0, 7.0], np.float32), (2, 3, 4)).copy()
    tracked = env._trackers["tracked"].update(agent, read)
    np.testing.assert_array_equal(tracked[0, :, :3], np.tile([5.0, 6.0, 9.0], (3, 1)))
    np.testing.assert_array_equal(tracked[1, :, :3], np.tile(start[1], (3, 1)))
    with pytest.raises(ValueError, match="one size"):
        ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 2), reach=1.0)


def test_latched_judge_carries_what_the_fingers_closed_on_and_nothing_else():
    """The latched tracker, by hand: fingers that close within reach carry the object as they rise, even
    where the read object lags behind them, and let go when they open; fingers that close out of reach
    carry nothing, though a reading puts the object in them; an already closed gripper that reaches the
    object does not grasp it. The plain tracker refuses the lagging reading."""
    from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking

    tracking = ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 3), reach=0.03, grasp_action=1)
    cube = np.array([0.0, 0.0, 0.8], np.float32)
    # rows: 0 grasps at the cube; 1 closes 5 cm beside it; 2 closes 5 cm above it, then comes down
    agent = np.stack([np.stack([cube + [0, 0, dz] for dz in (0.0, 0.0, 0.05, 0.10, 0.10)]),
                      np.stack([cube + [0.05, 0, dz] for dz in (0.0, 0.0, 0.05, 0.10, 0.10)]),
                      np.stack([cube + [0, 0, dz] for dz in (0.05, 0.0, 0.05, 0.10, 0.10)])])  # (3, 5, 3)
    grip = np.array([[-1, 1, 1, 1, -1], [-1, 1, 1, 1, -1], [1, 1, 1, 1, 1]], np.float32)  # (3, 5)
    actions = np.stack([np.zeros_like(grip), grip], -1)  # (3, 5, 2): the gripper command at index 1
    read = np.tile(np.r_[cube, 0.0], (3, 5, 1)).astype(np.float32)  # (3, 5, 4): the reading stays on the table
    read[1, 2:, :3] = agent[1, 2:]  # row 1: the model draws the cube in the empty fingers
    latched = ObjectTracker(tracking, 3, latch=True)
    latched.reset(np.arange(3), read[:, 0])
    out = latched.update(agent, read, actions)
    np.testing.assert_allclose(out[0, :4, :3], agent[0, :4])  # carried up, though read on the table
    np.testing.assert_allclose(out[0, 4, :3], cube)  # opened: let go, the reading (within reach) believed again
    assert not latched.held[0]
    np.testing.assert_allclose(out[1, :, :3], np.tile(cube, (5, 1)))  # closed out of reach: stays put
    np.testing.assert_allclose(out[2, 2:, :3], np.tile(cube, (3, 1)))  # closed before it came: not grasped
    plain = ObjectTracker(tracking, 3)
    plain.reset(np.arange(3), read[:, 0])
    np.testing.assert_allclose(plain.update(agent, read)[0, 2:, :3], np.tile(cube, (3, 1)))  # the lag refused
    with pytest.raises(ValueError, match="grasp_action"):
        ObjectTracker(ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 3), reach=0.03), 1, latch=True)
    with pytest.raises(ValueError, match="actions"):
        latched.update(agent, read)


def test_latched_judge_with_fingers_lets_go_when_they_close_on_nothing():
    """With the fingers named, a grasp holds only while they read the hold gap apart: fingers that close
    on the object (gap stays wide) carry it up; fingers that close to nothing (the object slipped) let
    go at once, and the object stays where it was last believed, though the command stays closed."""
    from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking

    tracking = ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 3), reach=0.03, grasp_action=1,
                              fingers=(3, 4), hold_gap=0.02)
    cube = np.array([0.0, 0.0, 0.8], np.float32)
    lift = np.stack([cube + [0, 0, dz] for dz in (0.0, 0.0, 0.04, 0.07, 0.10)])  # (5, 3)
    held, slipped = [0.04, 0.02, 0.02, 0.02, 0.02], [0.04, 0.02, 0.005, 0.005, 0.005]  # finger joints (+/-)
    agent = np.stack([np.concatenate([lift, np.stack([f, [-x for x in f]], 1)], 1) for f in (held, slipped)])  # (2, 5, 5)
    grip = np.array([[-1, 1, 1, 1, 1]] * 2, np.float32)  # (2, 5): closes at frame 1 and stays closed
    actions = np.stack([np.zeros_like(grip), grip], -1)  # (2, 5, 2)
    read = np.tile(cube, (2, 5, 1)).astype(np.float32)  # the reading stays on the table
    latched = ObjectTracker(tracking, 2, latch=True)
    latched.reset(np.arange(2), read[:, 0])
    out = latched.update(agent.astype(np.float32), read, actions)
    np.testing.assert_allclose(out[0, 1:], lift[1:])  # held 4 cm apart: carried up
    np.testing.assert_allclose(out[1, 2:], np.tile(cube, (3, 1)))  # 1 cm apart: nothing held, stays put
    assert latched.held.tolist() == [True, False]
    with pytest.raises(ValueError, match="hold_gap"):
        ObjectTracking(agent_xy=slice(0, 3), object_xy=slice(0, 3), reach=0.03, grasp_action=1, fingers=(3, 4))


def test_tracked_judge_moves_each_object_only_within_reach_of_the_agent(episodes):
    """With two tracked objects (a task that moves two cubes), each follows the reading only where the
    agent is within reach of that object: the one the agent pushes moves, the other stays put."""
    from wmsuite.world_models.tracking import ObjectTracking

    tracking = ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=1.0, others_xy=(slice(2, 4),))
    assert tracking.objects_xy == (slice(0, 2), slice(2, 4))
    env = WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=2, horizon=3,
                        seed=0, success_fn=_x_above(1e9), judge="tracked", tracking=tracking)
    env.reset(seed=[0, 1])
    start = env._trackers["tracked"].positions.copy()  # (2 sub-envs, 2 objects, 2)
    np.testing.assert_array_equal(start[:, 1], [[7.0, 7.0], [7.0, 7.0]])  # the second object: env_state[2:4]
    agent = np.zeros((2, 3, 2), np.float32)
    agent[0] = start[0, 0]  # row 0: on the first object; row 1: on the second
    agent[1] = start[1, 1]
    read = np.broadcast_to(np.array([0.5, 0.5, 7.5, 7.25], np.float32), (2, 3, 4)).copy()
    tracked = env._trackers["tracked"].update(agent, read)
    far = np.linalg.norm(start[0, 0] - start[0, 1]) > 1.0 and np.linalg.norm(start[1, 0] - start[1, 1]) > 1.0
    assert far  # the episodes start their square away from the fixed point
    np.testing.assert_array_equal(tracked[0, :, :2], np.tile([0.5, 0.5], (3, 1)))  # pushed: followed
    np.testing.assert_array_equal(tracked[0, :, 2:], np.tile(start[0, 1], (3, 1)))  # out of reach: held
    np.testing.assert_array_equal(tracked[1, :, :2], np.tile(start[1, 0], (3, 1)))
    np.testing.assert_array_equal(tracked[1, :, 2:], np.tile([7.5, 7.25], (3, 1)))


def test_static_state_is_held_at_its_start_value_for_the_observation_and_the_rule(episodes):
    """The entries a task keeps fixed (a goal) come from the real start, not from generated frames: the
    observation carries them unchanged over steps, and the success rule sees them on every frame."""
    seen = []

    def rule(env_state):
        seen.append(np.array(env_state))
        return np.zeros(np.shape(env_state)[:-1], bool)

    model = tiny_model(episodes, camera="top")
    starts = [copy.deepcopy(ep) for ep in episodes]  # real starts whose fixed entries the heads never saw
    for i, ep in enumerate(starts):
        ep.env_state[:, 2:4] = [-3.0 - i, 5.0 + i]
    env = WorldModelEnv(model, EpisodeContext(starts), num_envs=4, horizon=3, seed=0, success_fn=rule,
                        judge="state", static_state=slice(2, 4))
    obs, _ = env.reset(seed=[0, 1, 2, 3])
    start = np.stack([starts[s % len(starts)].env_state[0] for s in range(4)])[:, 2:4]  # real (n, 2)
    np.testing.assert_allclose(obs["environment_state"][:, 2:4], start, rtol=1e-6)
    for _ in range(2):
        obs, *_ = env.step(np.zeros((4, 2, 2), np.float32))
        np.testing.assert_allclose(obs["environment_state"][:, 2:4], start, rtol=1e-6)
    for states in seen:  # (n, H, E) per step: the static entries on every frame
        np.testing.assert_allclose(states[..., 2:4], np.broadcast_to(start[:, None], states[..., 2:4].shape),
                                   rtol=1e-6)
    free = WorldModelEnv(model, EpisodeContext(starts), num_envs=4, horizon=3, seed=0)
    free.reset(seed=[0, 1, 2, 3])
    moved, *_ = free.step(np.zeros((4, 2, 2), np.float32))
    assert not np.allclose(moved["environment_state"][:, 2:4], start), "the heads alone do not hold them"
    with pytest.raises(ValueError, match="static_state"):
        WorldModelEnv(model, EpisodeContext(episodes), num_envs=1, static_state=slice(9, 12))


def test_tracked_judge_reacquires_an_object_read_beside_the_agent_on_k_frames_in_a_row():
    """With reacquire = k, an agent out of reach of the believed object takes the reading that puts the
    object beside it only on the k-th such frame in a row (one stray frame, or a streak a far reading
    breaks, moves nothing); with reacquire = 0 it never does. Positions checked by hand."""
    from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking

    def run(k, beside):  # beside: (T,) bool, the frame reads the object at the agent (else far from both)
        tracker = ObjectTracker(ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=0.1,
                                               reacquire=k), 1)
        tracker.reset(np.zeros(1, int), np.zeros((1, 2), np.float32))  # believed at the origin
        agent = np.tile(np.array([1.0, 1.0], np.float32), (1, len(beside), 1))  # (1, T, 2): far from it
        read = np.where(np.asarray(beside)[None, :, None], agent + np.float32(0.02), np.float32(5.0))  # (1, T, 2)
        return tracker.update(agent, read)[0]  # (T, 2)

    origin, pushed = [0.0, 0.0], [1.02, 1.02]
    np.testing.assert_allclose(run(3, [True, True, True, True]), [origin, origin, pushed, pushed])
    np.testing.assert_allclose(run(3, [True, True, False, True, True]), [origin] * 5)  # the streak broke
    np.testing.assert_allclose(run(1, [False, True]), [origin, pushed])
    np.testing.assert_allclose(run(0, [True] * 6), [origin] * 6)  # never, as before
    with pytest.raises(ValueError, match="reacquire must be a whole number"):
        ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=0.1, reacquire=-1)


def test_step_slack_moves_a_believed_object_no_farther_than_the_agent_moved_plus_the_slack():
    """With step_slack = s, a believed reading moves the object towards it by at most the agent's motion
    on that frame plus s (a reading nearer than that is taken as it is); the first frame's motion counts
    from the agent given at reset. Positions checked by hand."""
    from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking, track_episode

    tracking = ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=0.2, step_slack=0.01)
    tracker = ObjectTracker(tracking, 1)
    tracker.reset(np.zeros(1, int), np.zeros((1, 2), np.float32), np.array([[-0.1, 0.0]], np.float32))
    agent = np.array([[[-0.07, 0.0], [-0.07, 0.0], [-0.03, 0.0]]], np.float32)  # (1, 3, 2): moves 3, 0, 4 cm
    read = np.array([[[0.0, 0.12], [0.0, 0.035], [0.0, -0.1]]], np.float32)  # (1, 3, 2)
    believed = tracker.update(agent, read)[0]  # (3, 2)
    # 12 cm away, the agent moved 3: 4 cm of it; 0.5 cm away, within the 0 + 1 cm: taken; 13.5 cm, moved 4: 5 cm
    np.testing.assert_allclose(believed, [[0.0, 0.04], [0.0, 0.035], [0.0, -0.015]], atol=1e-6)
    with pytest.raises(ValueError, match="step_slack must be >= 0"):
        ObjectTracking(agent_xy=slice(0, 2), object_xy=slice(0, 2), reach=0.1, step_slack=-0.01)
    unbounded = dataclasses.replace(tracking, step_slack=None)  # as before: the reading as it is
    states = np.concatenate([np.zeros((1, 2)), read[0]]).astype(np.float32)  # (4, 2)
    agents = np.concatenate([[[-0.1, 0.0]], agent[0]]).astype(np.float32)
    np.testing.assert_allclose(track_episode(unbounded, agents, states, np.zeros((3, 2)))[1:], read[0])
