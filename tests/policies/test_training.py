"""The training objective: per-sample weights, the flow/diffusion losses against hand-computed
targets, and a tiny policy that overfits one chunk."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import default_collate

from tests.policies.conftest import tiny_policy, window_batch
from wmsuite.policies import POLICY_KINDS, PolicyConfig, load_policy, save_policy
from wmsuite.policies.improve import LabelledWindows, improvement_loss
from wmsuite.policies.model import _beta_sample

OVERFIT_STEPS = 500


def _grads(policy, batch, weight, seed=0):
    policy.zero_grad()
    loss, _ = policy(batch, weight=weight, generator=torch.Generator().manual_seed(seed))
    loss.backward()
    return torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])


@pytest.mark.parametrize("kind", list(POLICY_KINDS))
def test_per_sample_weights(kind, episodes):
    policy = tiny_policy(kind, episodes).eval()  # eval: no image augmentation, so only the generator is random
    batch = window_batch(episodes, b=4)
    g_ones = _grads(policy, batch, torch.ones(4))
    torch.testing.assert_close(g_ones, _grads(policy, batch, None))  # no weight == weight 1
    # weight 0: the sample's data contributes nothing
    w = torch.tensor([1.0, 0.0, 2.0, 0.5])
    g = _grads(policy, batch, w)
    corrupted = {**batch, "actions": batch["actions"].clone()}
    corrupted["actions"][1] = 5.0 * torch.randn_like(corrupted["actions"][1])
    torch.testing.assert_close(_grads(policy, corrupted, w), g)
    g_changed = _grads(policy, corrupted, torch.ones(4))
    assert not torch.allclose(g_changed, g_ones)  # ...while with weight 1 it does
    # gradients are linear in the weights: g(w) = sum_b w_b g(e_b)
    basis = [_grads(policy, batch, torch.eye(4)[b]) for b in range(4)]
    torch.testing.assert_close(g, sum(wb * gb for wb, gb in zip(w, basis)), atol=1e-6, rtol=1e-4)
    with pytest.raises(ValueError, match="weight must have shape"):
        policy(batch, weight=torch.ones(3))


def test_flow_loss_matches_hand_computed_target(episodes):
    policy = tiny_policy("flow", episodes).eval()
    batch = window_batch(episodes, b=4)
    loss, _ = policy(batch, generator=torch.Generator().manual_seed(3))
    # redo the same draws by hand: noise, then t ~ Beta(1.5, 1) (as X / (X + Y) of two Gammas)
    gen = torch.Generator().manual_seed(3)
    actions = policy.normalizer.action_to_unit(batch["actions"])
    noise = torch.randn(actions.shape, generator=gen)
    t = _beta_sample(1.5, 1.0, 4, gen, "cpu") * 0.999 + 0.001
    x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
    cond = policy.encode({"pixels": {"top": batch["context_frames"]["top"][:, -1]},
                          "agent_pos": batch["context_state"][:, -1]}, channels_first=True)
    with torch.no_grad():
        pred = policy.head.denoise(x_t, t, cond)
    mask = (~batch["action_is_pad"]).float()
    per = ((pred - (noise - actions)) ** 2).mean(-1)
    expected = ((per * mask).sum(-1) / mask.sum(-1)).mean()
    torch.testing.assert_close(loss.detach(), expected)


def test_beta_time_distribution_has_pi0_mean():
    t = _beta_sample(1.5, 1.0, 200_000, torch.Generator().manual_seed(0), "cpu")
    assert abs(float(t.mean()) - 0.6) < 0.005  # mean of Beta(a, b) = a / (a + b)
    assert abs(float(t.var()) - 1.5 / (2.5**2 * 3.5)) < 0.003


@pytest.mark.parametrize("kind,extra", [("flow", {}), ("diffusion", {"prediction_type": "sample"}),
                                        ("diffusion", {"prediction_type": "epsilon"}),
                                        ("flow", {"image_pool": "keypoints", "keypoints": 8})])
def test_tiny_policy_overfits_one_chunk(kind, extra, episodes):
    """500 Adam steps on one window: every sampled chunk lands within 10% of the action range."""
    torch.manual_seed(0)
    policy = tiny_policy(kind, episodes, **extra).eval()  # eval: no augmentation, one observation -> one chunk
    one = window_batch(episodes, b=1)
    one["action_is_pad"] = torch.zeros_like(one["action_is_pad"])
    batch = {k: v.expand(32, *v.shape[1:]) if torch.is_tensor(v) else v * 32 if isinstance(v, list) else
             {c: f.expand(32, *f.shape[1:]) for c, f in v.items()}
             for k, v in one.items()}  # the same window 32 times: many noise/time draws per step
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, OVERFIT_STEPS)
    gen = torch.Generator().manual_seed(0)
    first = None
    for _ in range(OVERFIT_STEPS):
        loss, _ = policy(batch, generator=gen)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    assert float(loss.detach()) < 0.15 * first
    obs = {"pixels": {"top": one["context_frames"]["top"][:, -1].permute(0, 2, 3, 1).repeat(8, 1, 1, 1).numpy()},
           "agent_pos": one["context_state"][:, -1].repeat(8, 1).numpy()}  # env layout, 8 noise draws
    chunks = policy.predict_action_chunk(obs, generator=torch.Generator().manual_seed(1))  # (8, H, A)
    target = one["actions"][0]  # (H, A)
    all_actions = torch.cat([torch.from_numpy(e.actions) for e in episodes])
    tolerance = 0.1 * float((all_actions.max(0).values - all_actions.min(0).values).min())
    err = (chunks - target).abs().flatten(1).max(1).values  # (8,)
    assert (err < tolerance).all(), (err, tolerance)


def test_aux_state_loss_is_the_features_error_on_the_standardised_state(episodes, tmp_path):
    """PolicyConfig.aux_state_weight: the loss is the head's plus weight x the MSE of a linear
    prediction of (env_state - mean) / std from the features, computed here by hand; its gradient
    reaches the image CNN; the layer survives save/load; the state as an input is refused."""
    policy = tiny_policy("flow", episodes, aux_state_weight=0.5).eval()  # eval: no image augmentation
    batch = window_batch(episodes)
    loss, logs = policy(batch, generator=torch.Generator().manual_seed(3))
    cond = policy.encode(policy.batch_obs(batch), channels_first=True)
    head, _ = policy.head.loss(cond, policy.normalizer.action_to_unit(batch["actions"]), ~batch["action_is_pad"], None,
                               torch.Generator().manual_seed(3))
    env = torch.cat([torch.from_numpy(e.env_state) for e in episodes])
    target = (batch["context_env_state"][:, -1] - env.mean(0)) / env.std(0, unbiased=False)
    aux = ((policy.aux_state(cond) - target) ** 2).mean()  # the MLP backbone's features are cond itself
    torch.testing.assert_close(loss, head + 0.5 * aux, rtol=1e-5, atol=1e-6)
    assert logs["loss/aux_state"] == pytest.approx(float(aux.detach()), rel=1e-5)

    conv = policy.encoder.cnns["top"].conv[0].weight
    policy.zero_grad()
    cond = policy.encode(policy.batch_obs(batch), channels_first=True)
    policy.add_aux_state(torch.zeros(()), cond, batch["context_env_state"][:, -1], {}).backward()
    assert conv.grad is not None and conv.grad.abs().sum() > 0

    data = LabelledWindows(episodes, [], 4, 2, ("top",))  # the improvement rounds' loss carries the same term
    _, logs = improvement_loss(policy, default_collate([data[i] for i in range(4)]), "bc", time_scale=12, weighted=False)
    assert logs["loss/aux_state"] > 0

    save_policy(policy, tmp_path / "aux")
    loaded = load_policy(tmp_path / "aux")
    assert loaded.cfg.aux_state_weight == 0.5 and torch.equal(loaded.aux_state.weight, policy.aux_state.weight)
    assert tiny_policy("flow", episodes).aux_state is None
    with pytest.raises(ValueError, match="use_env_state off"):
        PolicyConfig(aux_state_weight=1.0, use_env_state=True, cameras=("top",))
    with pytest.raises(ValueError, match="cameras"):
        PolicyConfig(aux_state_weight=1.0, cameras=())
    with pytest.raises(ValueError, match=">= 0"):
        PolicyConfig(aux_state_weight=-1.0)
    assert PolicyConfig(aux_state_weight=1.0).cameras is None  # the data's cameras, filled in by train-policy
