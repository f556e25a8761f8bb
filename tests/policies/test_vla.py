"""The VLA backbone: candidate chunks packed after one prefix equal separate sequences (and torch SDPA
on the replicated batch), the instruction decides the chunk, and a checkpoint acts as it was saved."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.policies.conftest import tiny_policy, window_batch
from wmsuite.policies import load_policy, save_policy
from wmsuite.policies.vla.model import instruction_tokens

VLA = {"backbone": "vla", "vla_dim": 32, "vla_layers": 2, "vla_heads": 2, "vla_patch": 8, "instruction_bytes": 12}


def _obs(episodes, tasks):
    ep = episodes[0]
    b = len(tasks)
    return {"pixels": {"top": np.repeat(ep.obs["top"][:1], b, 0)}, "agent_pos": np.repeat(ep.state[:1], b, 0),
            "environment_state": np.repeat(ep.env_state[:1], b, 0), "task": list(tasks)}


def test_instruction_bytes_are_cut_and_padded():
    ids = instruction_tokens(["ab", "héllo wörld, far too long"], 6)
    assert ids[0].tolist() == [98, 99, 0, 0, 0, 0]
    assert ids[1].tolist() == [b + 1 for b in "héllo wörld".encode()[:6]]


def test_candidates_packed_after_one_prefix_equal_separate_sequences_and_sdpa(episodes):
    policy = tiny_policy("flow", episodes, **VLA).double().eval()
    den = policy.head.backbone
    g = torch.Generator().manual_seed(0)
    b, n, h, a, p = 2, 3, 4, 2, 5
    prefix = torch.randn(b, p, 32, generator=g, dtype=torch.float64)
    x = torch.randn(b, n, h, a, generator=g, dtype=torch.float64)
    t = torch.tensor([100.0, 700.0], dtype=torch.float64)
    packed = den(x, t, prefix)  # (B, N, H, A): P + N*H tokens per observation
    alone = den(x.flatten(0, 1), t.repeat_interleave(n), prefix.repeat_interleave(n, 0))  # each chunk its own prefix
    torch.testing.assert_close(packed, alone.view(b, n, h, a), rtol=1e-10, atol=1e-10)
    # the oracle: every candidate as a plain sequence [prefix | chunk] through torch SDPA, with the mask the
    # layout means (the prefix sees the prefix, the chunk sees everything)
    seq = torch.cat([prefix.repeat_interleave(n, 0), den.suffix(x, t).flatten(0, 1)], dim=1)  # (B*N, P+H, C)
    mask = torch.ones(p + h, p + h, dtype=torch.bool)
    mask[:p, p:] = False
    pos = torch.arange(p + h).expand(b * n, -1)
    for block in den.blocks:
        seq = block.forward_replicated(seq, pos, mask.expand(b * n, -1, -1))
    oracle = den.out(den.norm(seq[:, p:])).view(b, n, h, a)
    torch.testing.assert_close(packed, oracle, rtol=1e-9, atol=1e-9)


def test_a_tiny_vla_learns_what_only_the_instruction_says(episodes):
    """One observation, two instructions, two different chunks: after training, each instruction's
    sampled chunks land on its own chunk, not the other's."""
    torch.manual_seed(0)
    policy = tiny_policy("flow", episodes, **VLA)
    one = window_batch(episodes, b=1)
    one["action_is_pad"] = torch.zeros_like(one["action_is_pad"])
    batch = {k: v.expand(32, *v.shape[1:]) if torch.is_tensor(v) else
             {c: f.expand(32, *f.shape[1:]) for c, f in v.items()} if isinstance(v, dict) else v * 32
             for k, v in one.items()}
    target = one["actions"][0]  # (H, A)
    other = -target  # the other instruction's chunk
    batch["actions"] = torch.stack([target if i % 2 == 0 else other for i in range(32)])
    batch["task"] = ["push left" if i % 2 == 0 else "push right" for i in range(32)]
    opt = torch.optim.Adam(policy.parameters(), lr=2e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(400):
        loss, _ = policy(batch, generator=gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    obs = _obs(episodes, ["push left"] * 4 + ["push right"] * 4)
    obs["pixels"]["top"] = one["context_frames"]["top"][:, -1].permute(0, 2, 3, 1).repeat(8, 1, 1, 1).numpy()
    obs["agent_pos"] = one["context_state"][:, -1].repeat(8, 1).numpy()
    chunks = torch.as_tensor(policy.predict_action_chunk(obs, generator=torch.Generator().manual_seed(1)))
    spread = float((target - other).abs().max())
    own = torch.stack([target] * 4 + [other] * 4)
    wrong = torch.stack([other] * 4 + [target] * 4)
    assert ((chunks - own).abs().flatten(1).max(1).values < 0.25 * spread).all()
    assert ((chunks - wrong).abs().flatten(1).max(1).values > 0.5 * spread).all()


@pytest.mark.parametrize("stem", ["patch", "conv"])
def test_save_load_gives_the_same_actions_and_a_missing_instruction_is_named(episodes, tmp_path, stem):
    policy = tiny_policy("diffusion", episodes, **VLA, vla_stem=stem).eval()
    side = 16 // (8 if stem == "patch" else 2 ** len(policy.cfg.channels))  # tokens per image side
    assert policy.encoder.tokens == VLA["instruction_bytes"] + side**2 + 1
    obs = _obs(episodes, ["push the red cube into the green goal", "x"])
    noise = torch.randn(2, 4, 2, generator=torch.Generator().manual_seed(3))
    before = policy.predict_action_chunk(obs, noise=noise)
    loaded = load_policy(save_policy(policy, tmp_path / "vla"))
    assert loaded.cfg.backbone == "vla"
    torch.testing.assert_close(torch.as_tensor(loaded.predict_action_chunk(obs, noise=noise)), torch.as_tensor(before))
    many = loaded.sample_candidates(obs, 5, generator=torch.Generator().manual_seed(0))
    assert many.shape == (2, 5, 4, 2) and not torch.allclose(many[:, 0], many[:, 1])
    with pytest.raises(KeyError, match="obs\\['task'\\]"):
        loaded.predict_action_chunk({k: v for k, v in obs.items() if k != "task"})
    with pytest.raises(ValueError, match="multiple of vla_patch"):
        tiny_policy("flow", episodes, **{**VLA, "vla_patch": 5})
    with pytest.raises(ValueError, match="conv stem"):
        tiny_policy("flow", episodes, **{**VLA, "vla_stem": "conv", "image_size": 24, "channels": (8, 8, 8, 8)})


def test_best_of_n_on_a_vla_scores_its_packed_candidates_and_keeps_the_best(episodes):
    policy = tiny_policy("flow", episodes, **VLA, critics=True).eval()
    obs = _obs(episodes, ["push left", "push right", "push left"])
    target = 0.3  # a hand-made critic: the closer a chunk's actions to +0.3 (env units), the better
    policy.critics.chunk_logit = lambda feats, unit: -(policy.normalizer.action_from_unit(unit) - target).abs().mean((1, 2))
    from wmsuite.policies.verifier import best_of_n

    chunk, conf = best_of_n(policy, obs, candidates=6, generator=torch.Generator().manual_seed(2))
    every = policy.sample_candidates(obs, 6, generator=torch.Generator().manual_seed(2))  # (3, 6, H, A) packed
    dist = (every - target).abs().mean((2, 3))  # (3, 6)
    torch.testing.assert_close(chunk, every[torch.arange(3), dist.argmin(1)])
    torch.testing.assert_close(conf, torch.sigmoid(-dist.min(1).values))
    # the critics read the prefix through the blocks: one vector per observation, the instruction in it
    feats = policy.features(policy.encode(obs))
    assert feats.shape == (3, 32) and torch.allclose(feats[0], feats[2]) and not torch.allclose(feats[0], feats[1])


def test_bench_candidates_writes_its_figures(tmp_path):
    import json

    from wmsuite.cli import main

    assert main(["bench", "candidates", "--candidates", "4", "--repeats", "1", "--out", str(tmp_path)]) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["speedup"] == pytest.approx(m["replicated_ms"] / m["packed_ms"])
    assert m["efficiency"] == pytest.approx(m["speedup"] / m["ideal_speedup"]) and m["ideal_speedup"] > 1


def test_the_training_pass_reads_the_prefix_features_the_critics_read(episodes):
    """The auxiliary target's features come off the training pass itself (no second pass through the
    blocks) and equal `features(cond)`, the prefix run alone through the packed op."""
    policy = tiny_policy("flow", episodes, **VLA, aux_state_weight=1.0)
    batch = window_batch(episodes, b=3)
    obs = policy.batch_obs(batch)
    cond = policy.encode(obs, channels_first=True)  # (B, P, C)
    actions = policy.normalizer.action_to_unit(batch["actions"])
    gen = torch.Generator().manual_seed(1)
    loss, per_sample, feats = policy.head.loss(cond, actions, generator=gen, with_features=True)
    plain, plain_per_sample = policy.head.loss(cond, actions, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(feats, policy.features(cond), rtol=1e-5, atol=1e-5)  # two kernels, float32
    torch.testing.assert_close((loss, per_sample), (plain, plain_per_sample), rtol=0, atol=0)
    with pytest.raises(ValueError, match="one chunk per observation"):
        policy.head.backbone(actions[:, None].expand(-1, 2, -1, -1), torch.ones(3), cond, with_features=True)
    mlp = tiny_policy("flow", episodes)  # the MLP head's features are the encoder's vector itself
    mcond = mlp.encode(mlp.batch_obs(batch), channels_first=True)
    assert mlp.head.loss(mcond, actions, with_features=True)[2] is mcond
