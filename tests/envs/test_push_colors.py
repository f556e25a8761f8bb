"""PushColors: the instruction decides the task, in every way a user can give it."""

from __future__ import annotations

import numpy as np
import pytest

from wmsuite.envs import make_env
from wmsuite.envs.experts import make_expert, run_expert
from wmsuite.envs.push_colors import INSTRUCTIONS, NAMED, is_success_from_env_state, parse_instruction


def test_each_seed_draws_an_instruction_and_options_or_the_constructor_replace_it_on_the_same_layout():
    env = make_env("wmsuite/PushColors-v0", cameras=())
    drawn = {env.reset(seed=s)[1]["task"] for s in range(40)}
    assert drawn == set(INSTRUCTIONS)  # all six tasks come up
    obs, info = env.reset(seed=7)
    for text in INSTRUCTIONS:
        other, other_info = env.reset(seed=7, options={"instruction": text})
        assert other_info["task"] == text == env.unwrapped.task
        np.testing.assert_array_equal(other["environment_state"][:16], obs["environment_state"][:16])  # same layout
        cube, goal = parse_instruction(text)
        assert other["environment_state"][NAMED].tolist() == [float(i == cube) for i in range(3)] + [
            float(i == goal) for i in range(2)]
    with pytest.raises(ValueError, match="does not know the instruction 'push the blue cube"):
        env.reset(seed=7, options={"instruction": "push the blue cube into the green goal"})
    env.close()
    fixed = make_env("wmsuite/PushColors-v0", cameras=(), instruction=INSTRUCTIONS[3])
    assert {fixed.reset(seed=s)[1]["task"] for s in range(5)} == {INSTRUCTIONS[3]}
    fixed.close()
    with pytest.raises(ValueError, match="it knows"):
        make_env("wmsuite/PushColors-v0", instruction="go")


def test_success_follows_the_named_cube_and_goal_only():
    state = np.zeros(21, np.float32)
    state[0:2], state[4:6], state[8:10] = (0.1, 0.1), (-0.1, 0.1), (0.0, -0.1)  # red, yellow, purple
    state[12:14], state[14:16] = (0.1, 0.1), (0.0, -0.1)  # green goal on red, white goal on purple
    rows = []
    for text in INSTRUCTIONS:
        cube, goal = parse_instruction(text)
        s = state.copy()
        s[16 + cube], s[19 + goal] = 1.0, 1.0
        rows.append(s)
    # red->green and purple->white are in; every other pairing is not
    assert is_success_from_env_state(np.stack(rows)).tolist() == [True, False, False, False, False, True]


def test_an_expert_that_pushes_the_wrong_cube_never_succeeds_and_a_competent_one_always_does():
    assert all(r["success"] for r in run_expert("wmsuite/PushColors-v0", 1.0, 12, seed=0))
    env = make_env("wmsuite/PushColors-v0", cameras=())
    expert = make_expert("wmsuite/PushColors-v0", skill=0.0, seed=3, failure_modes=["wrong_cube"])
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        expert.reset()
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(expert.select_action({k: v[None] for k, v in obs.items()})[0])
            done = terminated or truncated
        assert not info["is_success"] and expert.modes() == ["wrong_cube"]
    env.close()


class _Listener:
    """A policy that records the instructions it is shown and stands still."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs):
        self.seen.append(list(obs["task"]))
        return np.zeros((len(obs["agent_pos"]), 1, 2), np.float32)


def test_the_rollout_engine_shows_each_sub_env_its_own_instruction_and_records_it():
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    env = make_vector_env("wmsuite/PushColors-v0", 2, asynchronous=False,
                          env_kwargs={"cameras": (), "max_episode_steps": 3})
    policy = _Listener()
    episodes = list(rollout(policy, env, RolloutConfig(episodes=4, seed=0, progress=False)))
    env.close()
    truth = [make_env("wmsuite/PushColors-v0", cameras=()).reset(seed=s)[1]["task"] for s in range(4)]
    assert sorted(e.task for e in episodes) == sorted(truth)
    assert {e.meta["seed"]: e.task for e in episodes} == dict(enumerate(truth))
    assert policy.seen[0] == truth[:2] and all(len(rows) == 2 for rows in policy.seen)


def test_another_instruction_reaches_the_policy_and_the_env_keeps_judging_its_own(tmp_path):
    import json

    from wmsuite.cli import main
    from wmsuite.policies.wrappers import Instructed
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    text = "push the purple cube into the green goal"
    listener = _Listener()
    env = make_vector_env("wmsuite/PushColors-v0", 2, asynchronous=False,
                          env_kwargs={"cameras": (), "max_episode_steps": 2})
    episodes = list(rollout(Instructed(listener, text), env, RolloutConfig(episodes=4, seed=0, progress=False)))
    env.close()
    assert all(rows == [text, text] for rows in listener.seen)  # what the policy was told
    truth = {s: make_env("wmsuite/PushColors-v0", cameras=()).reset(seed=s)[1]["task"] for s in range(4)}
    assert {e.meta["seed"]: e.task for e in episodes} == truth  # what the env asked for and recorded
    # the command: a language-blind expert is not swayed; the figure says what it was told
    assert main(["eval-policy", "--env", "wmsuite/PushColors-v0", "--episodes", "4", "--videos", "0",
                 "--instruction", text, "--out", str(tmp_path / "a")]) == 0
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["instruction"] == text and metrics["success_rate"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "a" / "episodes.jsonl").read_text().splitlines()]
    assert {r["seed"]: r["task"] for r in rows} == truth  # each row names the env's own task
    differing = [s for s, task in truth.items() if task != text]
    assert metrics["other_task"]["episodes"] == len(differing) and metrics["other_task"]["success_rate"] == 1.0
    with pytest.raises(ValueError, match="non-empty string"):
        Instructed(listener, " ")
