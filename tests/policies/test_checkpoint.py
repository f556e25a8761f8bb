"""Checkpoints: save/load round trip gives identical actions for the same noise; normalisation
statistics are required; `assets:` specs resolve against the installed package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import wmsuite.assets
from tests.policies.conftest import obs_batch, tiny_policy
from wmsuite.policies import POLICY_KINDS, ChunkPolicy, PolicyConfig, load_policy, resolve_path, save_policy
from wmsuite.policies.normalize import Normalizer


@pytest.mark.parametrize("kind", list(POLICY_KINDS))
def test_save_load_same_actions_for_same_noise(kind, episodes, tmp_path):
    policy = tiny_policy(kind, episodes)
    obs = obs_batch(episodes)
    noise = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(1))
    before = policy.predict_action_chunk(obs, noise=noise)
    save_policy(policy, tmp_path / "ckpt")
    loaded = load_policy(tmp_path / "ckpt")
    after = loaded.predict_action_chunk(obs, noise=noise)
    assert torch.equal(before, after)
    other = loaded.predict_action_chunk(obs, noise=torch.randn(3, 4, 2))
    assert not torch.allclose(before, other)  # the noise matters, so equality above is not vacuous
    # fp16 shipping copy: close, not identical
    save_policy(policy, tmp_path / "half", dtype=torch.float16)
    half = load_policy(tmp_path / "half").predict_action_chunk(obs, noise=noise)
    assert (tmp_path / "half" / "model.safetensors").stat().st_size < (tmp_path / "ckpt" / "model.safetensors").stat().st_size
    torch.testing.assert_close(half, before, atol=0.05, rtol=0)


def test_keypoint_encoder_round_trips_and_bad_pools_are_refused(episodes, tmp_path):
    policy = tiny_policy("flow", episodes, image_pool="keypoints", keypoints=4)
    assert policy.encoder.cnns["top"].attention.out_channels == 4
    obs = obs_batch(episodes)
    noise = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(1))
    save_policy(policy, tmp_path / "kp")
    loaded = load_policy(tmp_path / "kp")
    assert loaded.cfg.image_pool == "keypoints"
    assert torch.equal(policy.predict_action_chunk(obs, noise=noise), loaded.predict_action_chunk(obs, noise=noise))
    with pytest.raises(ValueError, match="image_pool"):
        PolicyConfig(image_pool="mean")
    with pytest.raises(ValueError, match="image_pool"):  # the VLA has no CNN readout to pool
        PolicyConfig(backbone="vla", image_pool="keypoints")


def test_missing_normalisation_stats_raise(episodes, tmp_path):
    policy = tiny_policy("flow", episodes)
    save_policy(policy, tmp_path / "ckpt")
    cfg_file = tmp_path / "ckpt" / "config.json"
    config = json.loads(cfg_file.read_text())
    del config["normalization"]
    cfg_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="normalization"):
        load_policy(tmp_path / "ckpt")
    # one stat missing (the action range) is an error too, at construction
    stats = dict(policy.normalizer.stats)
    del stats["action"]
    with pytest.raises(ValueError, match="'action'"):
        ChunkPolicy(policy.cfg, policy.dims, stats)
    # a policy that conditions on environment_state needs its stats as well
    cfg = PolicyConfig(**{**vars(policy.cfg), "use_env_state": True})
    with pytest.raises(ValueError, match="environment_state"):
        ChunkPolicy(cfg, policy.dims, policy.normalizer.stats)
    with pytest.raises(ValueError, match="shape"):
        Normalizer({"action": {"min": [0.0], "max": [1.0]}, "agent_pos": {"mean": [0, 0], "std": [1, 1]}},
                   False, {"action": 2, "agent_pos": 2})


def test_normalizer_round_trip_and_range(episodes):
    policy = tiny_policy("flow", episodes)
    acts = torch.from_numpy(episodes[1].actions)
    unit = policy.normalizer.action_to_unit(acts)
    all_actions = torch.cat([torch.from_numpy(e.actions) for e in episodes])
    assert unit.min() >= -1 - 1e-6 and unit.max() <= 1 + 1e-6
    torch.testing.assert_close(policy.normalizer.action_from_unit(policy.normalizer.action_to_unit(all_actions)),
                               all_actions)
    extremes = policy.normalizer.action_to_unit(torch.stack([all_actions.min(0).values, all_actions.max(0).values]))
    torch.testing.assert_close(extremes, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]))


def test_assets_prefix_resolves_to_package_folder():
    root = Path(wmsuite.assets.__file__).parent
    assert resolve_path("assets:policies/flow-pushcube") == root / "policies" / "flow-pushcube"
    assert resolve_path("runs/x") == Path("runs/x")
    with pytest.raises(FileNotFoundError, match="not a wmsuite checkpoint"):
        load_policy("assets:policies/does-not-exist")
