"""The cycle objective: its curriculum by hand, its loss against an exactly reversible toy, and where
its gradient goes in a real model."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from tests.world_models.conftest import tiny_config, tiny_model
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames
from wmsuite.world_models.model import BACKWARD, FORWARD
from wmsuite.world_models.objectives import cycle_chunks, cycle_loss, dynamics_loss, min_cycle_chunks

K, H, A, C, S = 4, 4, 2, 2, 3  # context, chunk, action size, latent channels, latent side


def test_the_curriculum_by_hand():
    cfg = tiny_config(context=4, chunk=4, objective="cycle", p_backward=0.5, cycle_horizon=8, cycle_min_real=1,
                      cycle_stage_steps=10)
    # T = 8: stage 0 keeps all 8 real (no cycle), stage 1 keeps 8 // 4 = 2, stage 2 on keeps p_min = 1
    assert [cycle_chunks(cfg, s) for s in (0, 9, 10, 19, 20, 1000)] == [0, 0, 6, 6, 7, 7]
    short = replace(cfg, cycle_horizon=2)  # 2 - 1 = 1 chunk would not hold the last chunk's context
    assert min_cycle_chunks(short) == 2 and cycle_chunks(short, 10) == 2
    assert cycle_chunks(replace(cfg, objective="noise", p_backward=0.0), 100) == 0
    with pytest.raises(ValueError, match="p_backward > 0"):
        tiny_config(objective="cycle")
    with pytest.raises(ValueError, match="objective 'chained'"):
        tiny_config(self_forcing=0.5)


class Integrator:
    """Exactly reversible dynamics on latents: frame j+1 = frame j + P(a_j) (+ `drift` per forward
    frame); backward, frame j = frame j+1 - P(a_j). Its 'denoiser' answers with what the dynamics
    say, so its denoising loss is the squared error of that answer: 0 wherever the context is true."""

    def __init__(self, drift: float = 0.0) -> None:
        self.cfg = SimpleNamespace(context=K, chunk=H, objective="cycle")
        self.drift, self.calls = drift, []
        self.pattern = torch.randn(A, C, S, S, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def generate(self, context, actions, direction=FORWARD, steps=None, generator=None, instruction=None):
        self.calls.append((int(direction), torch.is_grad_enabled()))
        x, out = context[:, -1], []
        for j in range(actions.shape[1]):
            push = torch.einsum("ba,acxy->bcxy", actions[:, j], self.pattern)
            x = x + push + self.drift if direction == FORWARD else x - push
            out.append(x)
        return torch.stack(out, dim=1)

    def diffusion_loss(self, context, target, actions, direction, pad, weight_context=None, instruction=None):
        assert bool((direction == BACKWARD).all()) and not pad.any()
        self.weight_context = weight_context
        pred = self.generate(context, actions, BACKWARD)
        return ((pred - target) ** 2).mean(), pred, context


def _toy_batch(b: int = 3, r: int = 5, seed: int = 1) -> dict:
    """A real episode of the integrator, cut as LatentWindows.batch cuts it for a cycle of r chunks
    from t0 = K - 1: history (frames 0 .. t0), the r*H actions from t0, the real frames t0 .. t0+H+K-1."""
    gen = torch.Generator().manual_seed(seed)
    t0, n = K - 1, K - 1 + r * H
    actions = torch.rand(b, n, A, generator=gen, dtype=torch.float64) * 2 - 1
    frames = [torch.randn(b, C, S, S, generator=gen, dtype=torch.float64)]
    toy = Integrator()
    for i in range(n):
        frames.append(frames[-1] + torch.einsum("ba,acxy->bcxy", actions[:, i], toy.pattern))
    frames = torch.stack(frames, dim=1)  # (B, n+1, C, s, s)
    return {"history": frames[:, t0 - K + 1 : t0 + 1], "history_actions": actions[:, t0 : t0 + r * H],
            "history_target": frames[:, t0 : t0 + H + K], "history_valid": torch.tensor([True] * (b - 1) + [False])}


@pytest.mark.parametrize("r", [2, 3, 5])
def test_an_exact_model_comes_back_to_the_real_start_and_a_drifting_one_does_not(r):
    batch = _toy_batch(r=r)
    exact = Integrator()
    loss, logs = cycle_loss(exact, batch)
    assert loss.item() == pytest.approx(0.0, abs=1e-20) and logs["cycle"] == pytest.approx(0.0, abs=1e-20)
    # r chunks forward, then back to frame H in whole chunks, then the one chunk that is scored
    back = max(0, -(-(r * H - K + 1 - H) // H))
    assert [c[0] for c in exact.calls] == [FORWARD] * r + [BACKWARD] * (back + 1)
    # the scored chunk's motion weights compare the target with the real frames H+K-1 .. H, not the imagined ones
    real = batch["history_target"][:2]
    torch.testing.assert_close(exact.weight_context, real[:, H : H + K].flip(1))
    losses = [cycle_loss(Integrator(drift), batch)[0].item() for drift in (0.01, 0.02, 0.05)]
    assert losses[0] > 1e-6 and losses[0] < losses[1] < losses[2]  # the forward drift is what comes back
    with pytest.raises(ValueError, match="at least 2 chunks"):
        cycle_loss(exact, {**batch, "history_actions": batch["history_actions"][:, :H]})


def test_only_the_last_backward_chunk_carries_gradient(episodes):
    model = tiny_model(episodes, context=2, chunk=2, objective="cycle", p_backward=0.5, sampling_steps=2,
                       cycle_stage_steps=1, cycle_horizon=4)
    r = cycle_chunks(model.cfg, 1)
    lat = encode_episodes(model.codec, episode_frames(episodes, "top"))
    batch = LatentWindows(episodes, lat, 2, 2).batch(range(6, 30, 4), history_chunks=r)
    assert batch["history_valid"].any() and batch["history_target"].shape[1] == 2 + 2  # H + K
    grad_calls = []
    hook = model.denoiser.register_forward_hook(lambda *_: grad_calls.append(torch.is_grad_enabled()))
    loss, logs = dynamics_loss(model, batch)
    hook.remove()
    # the joint loss's one denoiser pass and the cycle's last chunk have gradient; the rollouts do not
    assert grad_calls.count(True) == 2 and grad_calls.count(False) >= r * 2
    assert "cycle" in logs and logs["loss"] == pytest.approx(loss.item())
    loss.backward()
    assert all(p.grad is not None for p in model.denoiser.parameters() if p.requires_grad)
