"""Scripted experts: the Policy contract, per-env memory, and success that rises with skill."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.core.helpers import check_expert_zoo
from wmsuite.envs import ENV_IDS, make_env
from wmsuite.envs.experts import EXPERTS, make_expert, run_expert
from wmsuite.policy import Policy, load_object


def test_every_task_has_an_expert():
    assert set(EXPERTS) == set(ENV_IDS)
    with pytest.raises(ValueError, match="experts exist for"):
        make_expert("wmsuite/Nope-v0")
    with pytest.raises(ValueError, match="skill must be"):
        make_expert("wmsuite/PushCube-v0", skill=1.5)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_success_rises_with_skill(env_id):
    """30 episodes each (env seeds 0-29), state-only envs; measured: 0.0 -> ~0%, 0.5 -> ~50%, 1.0 -> 100%."""
    rates = {}
    for skill in (0.0, 0.5, 1.0):
        records = run_expert(env_id, skill, episodes=30, seed=0)
        rates[skill] = np.mean([r["success"] for r in records])
        if skill == 0.0:  # every episode has a failure mode, and they differ
            assert len({r["mode"] for r in records}) >= 3 and "competent" not in {r["mode"] for r in records}
        if skill == 1.0:
            assert {r["mode"] for r in records} == {"competent"}
    assert rates[0.0] <= 0.1, rates
    assert 0.25 <= rates[0.5] <= 0.75, rates
    assert rates[1.0] >= 0.95, rates
    assert rates[0.0] + 0.2 < rates[0.5] < rates[1.0] - 0.2, rates


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_policy_contract_on_a_batch(env_id):
    envs = [make_env(env_id, cameras=()) for _ in range(3)]
    obs = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
    batch = {k: np.stack([o[k] for o in obs]) for k in obs[0]}  # (B, D), (B, E)
    expert = make_expert(env_id, skill=0.6, seed=1)
    assert isinstance(expert, Policy)
    chunk = expert.predict_action_chunk(batch)
    assert chunk.shape == (3, 1, envs[0].action_space.shape[0]) and chunk.dtype == np.float32
    assert np.all(np.abs(chunk) <= 1.0)
    twin = make_expert(env_id, skill=0.6, seed=1)  # same seed: same personalities, same actions
    np.testing.assert_array_equal(twin.predict_action_chunk(batch), chunk)
    np.testing.assert_array_equal(twin.select_action(batch), expert.select_action(batch))
    assert expert.select_action(batch).shape == (3, envs[0].action_space.shape[0])
    modes = expert.modes()
    expert.reset_envs([1])
    assert expert.modes()[0] == modes[0] and expert.modes()[1] is None
    expert.predict_action_chunk(batch)
    assert expert.modes()[1] is not None  # row 1 got a new episode memory

    with pytest.raises(ValueError, match="call reset"):
        expert.predict_action_chunk({k: v[:2] for k, v in batch.items()})
    expert.reset()
    assert expert.predict_action_chunk({k: v[:2] for k, v in batch.items()}).shape[0] == 2
    with pytest.raises(ValueError, match="leading batch axis"):
        expert.predict_action_chunk(obs[0])
    with pytest.raises(KeyError, match="environment_state"):
        expert.predict_action_chunk({"agent_pos": batch["agent_pos"]})
    for env in envs:
        env.close()


def test_expert_loads_from_a_cli_spec():
    expert = load_object('wmsuite.envs.experts:make_expert{"env_id": "wmsuite/PickPlace-v0", "skill": 0.5}')
    assert type(expert).__name__ == "PickPlaceExpert" and expert.skill == 0.5


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_expert_drives_a_gymnasium_vector_env_with_autoreset(env_id):
    """Rows are independent episodes: after an env ends, `reset_envs` gives that row a fresh memory."""
    envs = gym.vector.SyncVectorEnv([lambda: make_env(env_id, cameras=())] * 3)
    expert = make_expert(env_id, skill=1.0, seed=0)
    obs, _ = envs.reset(seed=[0, 1, 2])
    ended, succeeded = 0, 0
    autoreset = np.zeros(3, bool)  # Gymnasium's next-step autoreset: the next step resets these envs
    # two pushes take twice as long, and so does going to look at the goal first on the large table
    for _ in range(160 if env_id in ("wmsuite/PushTwoCubes-v0", "wmsuite/PushCubeEgo-v0") else 70):
        obs, _, terminated, truncated, info = envs.step(expert.select_action(obs))
        expert.reset_envs(np.flatnonzero(autoreset))  # those rows now hold a first observation
        done = (terminated | truncated) & ~autoreset
        ended += done.sum()
        succeeded += (done & info["is_success"]).sum()
        autoreset = terminated | truncated
    envs.close()
    assert ended >= 6 and succeeded == ended


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_chunked_expert_plans_open_loop(env_id):
    """horizon=4: the expert plans 4 actions from one observation and still solves its task when they
    run open-loop (the protocol a world model that steps 4-action chunks imposes); PickPlace's plan
    carries the grasped cube with the hand (planned as left behind, the expert let go of it every time)."""
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    env = make_vector_env(env_id, 4, asynchronous=False, env_kwargs={"cameras": ()})
    expert = make_expert(env_id, skill=1.0, seed=0, horizon=4)
    chunk = expert.predict_action_chunk(env.reset(seed=0)[0])
    assert chunk.shape == (4, 4, env.single_action_space.shape[0])
    expert.reset()
    eps = list(rollout(expert, env, RolloutConfig(episodes=12, seed=500, act_every=4, record_frames=False,
                                                  progress=False)))
    env.close()
    assert sum(e.success for e in eps) >= 11
    with pytest.raises(ValueError, match="horizon must be an int >= 1"):
        make_expert(env_id, horizon=0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_bias_adds_one_constant_offset_per_episode(env_id):
    env = make_env(env_id, cameras=())
    # skill 1: no noise draws, so both experts see the same random stream after the bias draw
    plain, biased = make_expert(env_id, skill=1.0, seed=4), make_expert(env_id, skill=1.0, seed=4, bias=0.6)
    env.action_space.seed(0)  # unseeded, some draws left every step's action clipped (all-NaN offsets)
    offsets = []
    for t in range(30):  # the same observations for both
        obs, _ = env.reset(seed=t % 3) if t % 10 == 0 else env.step(env.action_space.sample())[:2]
        batch = {k: np.asarray(v)[None] for k, v in obs.items() if k != "pixels"}
        a, b = plain.predict_action_chunk(batch)[0, 0], biased.predict_action_chunk(batch)[0, 0]
        assert plain.modes() == biased.modes()
        unclipped = (np.abs(a) < 1.0) & (np.abs(b) < 1.0)
        offsets.append(np.where(unclipped, b - a, np.nan))
    motion = type(plain).MOTION_DIM
    offsets = np.array(offsets)[:, :motion]  # (T, motion) over one episode
    bias = np.nanmedian(offsets, axis=0)
    assert 0 < np.linalg.norm(bias) <= 0.6 + 1e-6
    np.testing.assert_allclose(offsets[np.isfinite(offsets).all(1)], np.broadcast_to(bias, offsets.shape)[
        np.isfinite(offsets).all(1)], atol=1e-5)
    with pytest.raises(ValueError, match="bias must be a number in"):
        make_expert(env_id, bias=1.5)


def test_hover_mode_stays_near_the_cube_without_pushing_it():
    """PushCube's extra failure mode, asked for by name: the pusher goes round to the cube and stays
    1-5 cm short of touching it; measured on the real simulator (skill 1 inside the mode: no noise)."""
    from wmsuite.envs.experts import PushCubeExpert

    assert "hover" not in PushCubeExpert.FAILURE_MODES  # never drawn unless asked for
    env = make_env("wmsuite/PushCube-v0", cameras=())
    expert = PushCubeExpert(skill=0.0, seed=2, failure_modes=["hover"])
    expert.NOISE, expert.HESITATE = 0.0, 0.0  # the mode's own motion, without skill-0 jitter
    touching = PushCubeExpert.CONTACT + 0.002
    for ep in range(6):
        obs, _ = env.reset(seed=ep)
        expert.reset()
        cube0, dists, path = obs["environment_state"][:2].copy(), [], 0.0
        for _ in range(80):
            before = obs["agent_pos"].copy()
            obs, _, terminated, truncated, info = env.step(expert.select_action(
                {k: v[None] for k, v in obs.items() if k != "pixels"})[0])
            path += float(np.linalg.norm(obs["agent_pos"] - before))
            dists.append(float(np.linalg.norm(obs["agent_pos"] - obs["environment_state"][:2])))
            assert not terminated
        assert expert.modes() == ["hover"]
        late = np.array(dists[30:])  # after going round to the cube
        assert late.min() > touching and np.median(late) < PushCubeExpert.CONTACT + 0.06, (ep, late.min())
        assert np.linalg.norm(obs["environment_state"][:2] - cube0) < 0.005  # the cube never moved
        assert path > 0.3  # it keeps moving about the cube rather than freezing
        assert not info["is_success"]
    env.close()
    with pytest.raises(ValueError, match="failure_modes must be a non-empty list drawn from"):
        make_expert("wmsuite/PushCube-v0", failure_modes=["nope"])
    with pytest.raises(ValueError, match="failure_modes must be"):
        make_expert("wmsuite/PushCube-v0", failure_modes="hover")
    default = make_expert("wmsuite/PushCube-v0", skill=0.0, seed=0)
    assert default.failure_modes == PushCubeExpert.FAILURE_MODES


def test_poke_mode_pushes_the_cube_from_many_sides():
    """PushCube's other extra mode: strokes through the cube from random sides, so within one episode
    the real cube is pushed in several directions (a competent expert pushes it one way, to the goal)."""
    from wmsuite.envs.experts import PushCubeExpert

    assert "poke" not in PushCubeExpert.FAILURE_MODES
    env = make_env("wmsuite/PushCube-v0", cameras=())
    expert = PushCubeExpert(skill=0.0, seed=5, failure_modes=["poke"])
    expert.NOISE, expert.HESITATE = 0.0, 0.0
    for ep in range(3):
        obs, _ = env.reset(seed=ep)
        expert.reset()
        quadrants, moving = set(), 0
        for _ in range(80):
            before = obs["environment_state"][:2].copy()
            obs, _, terminated, truncated, _ = env.step(expert.select_action(
                {k: v[None] for k, v in obs.items() if k != "pixels"})[0])
            move = obs["environment_state"][:2] - before
            if np.linalg.norm(move) > 0.002:
                moving += 1
                quadrants.add(int((np.arctan2(move[1], move[0]) + np.pi) // (np.pi / 2)) % 4)
            if terminated or truncated:
                break
        assert expert.modes() == ["poke"]
        assert moving >= 10 and len(quadrants) >= 3, (ep, moving, quadrants)
    env.close()


def test_the_pushtwocubes_zoo_spans_success_and_reads_as_a_manifest():
    """assets/zoo/pushtwocubes.json (experiments/scripts/expert_zoo.py --task pushtwocubes)."""
    check_expert_zoo("assets:zoo/pushtwocubes.json", "wmsuite/PushTwoCubes-v0", rerun="expert-skill0.5")


def test_the_pickplace_zoo_spans_success_and_reads_as_a_manifest():
    """assets/zoo/pickplace.json (experiments/scripts/expert_zoo.py --task pickplace): experts, wrapped
    experts and the shipped learned policies, with splits."""
    check_expert_zoo("assets:zoo/pickplace.json", "wmsuite/PickPlace-v0", rerun="expert-skill0.6")
    import json

    from wmsuite.specs import resolve_asset

    families = {p["family"] for p in json.loads(resolve_asset("assets:zoo/pickplace.json").read_text())["policies"]}
    assert families == {"expert", "wrapper", "learned"}
