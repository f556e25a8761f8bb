"""Every kind of policy satisfies the Policy contract and runs through the rollout engine against a
real simulator: trainable ones, the scripted experts, a user's module:attr policy and a wrapper."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.policies.conftest import TINY
from wmsuite.cli.common import resolve_policy
from wmsuite.policies import POLICY_KINDS, make_policy
from wmsuite.policy import Policy
from wmsuite.rollout import RolloutConfig, rollout

PUSH = "wmsuite/PushCube-v0"
PICK = "wmsuite/PickPlace-v0"
PUSH_STATS = {"action": {"min": [-1, -1], "max": [1, 1]}, "agent_pos": {"mean": [0, 0], "std": [0.1, 0.1]}}


def _vector_env(env_id: str, n: int = 2):
    import gymnasium as gym

    import wmsuite.envs  # noqa: F401  (registers the ids)

    fns = [lambda: gym.make(env_id, image_size=32) for _ in range(n)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.DISABLED)


def _learned(kind: str):
    torch.manual_seed(0)
    return make_policy(kind, {"action": 2, "agent_pos": 2, "environment_state": 6}, PUSH_STATS,
                       **{**TINY, "cameras": ("top",)})


CASES = {
    **{kind: (PUSH, lambda kind=kind: _learned(kind)) for kind in POLICY_KINDS},
    "expert-pushcube": (PUSH, lambda: resolve_policy("expert", env_id=PUSH, skill=1.0)),
    "expert-pickplace": (PICK, lambda: resolve_policy("expert", env_id=PICK, skill=1.0)),
    "user-module-attr": (PUSH, lambda: resolve_policy('tests.policies.user_policy:GoToOrigin{"horizon": 3}')),
    "action-offset": (PUSH, lambda: resolve_policy(
        "wmsuite.policies.wrappers:ActionOffset" + json.dumps(
            {"inner": 'tests.policies.user_policy:GoToOrigin{"horizon": 3}', "offset": [0.5, -2.0]}),
        trust_code=True)),  # nested code runs only when trusted
}


@pytest.mark.parametrize("name", list(CASES))
def test_policy_contract_in_real_env(name):
    env_id, build = CASES[name]
    policy = build()
    assert isinstance(policy, Policy)
    env = _vector_env(env_id)
    try:
        obs, _ = env.reset(seed=[0, 1])
        policy.reset()
        if hasattr(policy, "reset_envs"):
            policy.reset_envs(np.arange(2))
        chunk = policy.predict_action_chunk(obs)
        chunk = chunk.detach().numpy() if torch.is_tensor(chunk) else np.asarray(chunk)
        a = env.single_action_space.shape[0]
        assert chunk.ndim == 3 and chunk.shape[0] == 2 and chunk.shape[2] == a, chunk.shape
        assert np.isfinite(chunk).all()
        episodes = list(rollout(policy, env, RolloutConfig(episodes=2, seed=5, progress=False, record_frames=False)))
    finally:
        env.close()
    assert sorted(ep.meta["seed"] for ep in episodes) == [5, 6]
    for ep in episodes:
        assert ep.actions.shape[1] == a and ep.length >= 1
        assert (ep.actions >= -1).all() and (ep.actions <= 1).all()


def test_action_offset_adds_and_clips():
    inner = 'tests.policies.user_policy:GoToOrigin{"horizon": 3, "gain": 1.0}'
    wrapped = resolve_policy("wmsuite.policies.wrappers:ActionOffset" +
                             json.dumps({"inner": inner, "offset": [0.25, -2.0]}), trust_code=True)
    obs = {"agent_pos": np.array([[0.2, 0.4], [-0.1, 0.0]], np.float32)}
    base = -obs["agent_pos"]  # GoToOrigin with gain 1
    out = wrapped.predict_action_chunk(obs)
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out[:, 0, 0], base[:, 0] + 0.25, rtol=1e-6)
    np.testing.assert_allclose(out[:, :, 1], -1.0)  # clipped


@pytest.mark.parametrize("kind", list(POLICY_KINDS))
def test_select_action_replans_every_n_action_steps(kind):
    policy = _learned(kind)
    calls = []
    original = policy.predict_action_chunk

    def counting(obs, **kw):
        calls.append(1)
        return original(obs, noise=torch.zeros(len(obs["agent_pos"]), TINY["horizon"], 2))

    policy.predict_action_chunk = counting
    obs = {"pixels": {"top": np.zeros((2, 32, 32, 3), np.uint8)}, "agent_pos": np.zeros((2, 2), np.float32)}
    expected = original(obs, noise=torch.zeros(2, TINY["horizon"], 2)).numpy()
    policy.reset()
    actions = [policy.select_action(obs) for _ in range(5)]
    assert len(calls) == 3  # n_action_steps = 2: predict at steps 0, 2, 4
    np.testing.assert_allclose(actions[0], expected[:, 0], atol=1e-6)
    np.testing.assert_allclose(actions[1], expected[:, 1], atol=1e-6)
    np.testing.assert_allclose(actions[2], expected[:, 0], atol=1e-6)
    policy.reset()
    policy.select_action(obs)
    assert len(calls) == 4  # reset empties the queue
