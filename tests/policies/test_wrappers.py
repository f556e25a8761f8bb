"""ActionNoise and ActionScale against their inner policy's actions, built from specs as a manifest names them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmsuite.cli.common import resolve_policy

EXPERT = 'wmsuite.envs.experts:make_expert{"env_id": "wmsuite/PushCube-v0", "skill": 1.0, "horizon": 4}'
OBS = {"agent_pos": np.array([[0.0, 0.0], [0.1, -0.1]], np.float32),
       "environment_state": np.array([[0.1, 0.0, 1, 0, -0.1, 0.1], [0.0, 0.1, 1, 0, 0.1, 0.1]], np.float32)}


def _wrapped(cls, **kwargs):
    spec = f"wmsuite.policies.wrappers:{cls}" + json.dumps({"inner": EXPERT, **kwargs})
    return resolve_policy(spec, env_id="wmsuite/PushCube-v0", seed=0, device="cpu", horizon=4, trusted=False)


def test_scale_multiplies_and_clips_per_dimension():
    inner = resolve_policy(EXPERT, env_id="wmsuite/PushCube-v0", seed=0, device="cpu", horizon=4, trusted=False)
    expected = inner.predict_action_chunk(OBS)  # (2, 4, 2)
    got = _wrapped("ActionScale", scale=[-2.0, 0.5]).predict_action_chunk(OBS)
    np.testing.assert_allclose(got, np.clip(expected * [-2.0, 0.5], -1, 1), atol=1e-6)


def test_noise_has_the_asked_spread_and_stays_in_bounds():
    np.random.seed(0)  # noqa: NPY002  (the wrapper draws from the global generator, as eval seeds it)
    policy = _wrapped("ActionNoise", std=0.1)
    zero = _wrapped("ActionNoise", std=0.0)
    diffs = [policy.predict_action_chunk(OBS) - zero.predict_action_chunk(OBS) for _ in range(200)]
    diffs = np.concatenate(diffs).ravel()
    inside = np.abs(diffs) < 0.5  # rows that the clip at +-1 leaves alone dominate
    assert abs(diffs[inside].std() - 0.1) < 0.02 and abs(diffs[inside].mean()) < 0.01
    assert np.abs(policy.predict_action_chunk(OBS)).max() <= 1.0
    with pytest.raises(ValueError, match="std must be >= 0"):
        _wrapped("ActionNoise", std=-1.0)
