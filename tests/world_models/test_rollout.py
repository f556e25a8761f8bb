"""`rollout` and `WorldModelState`: the one autoregressive shift, bit for bit the chunk-by-chunk loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.world_models.conftest import tiny_model
from wmsuite.world_models.model import BACKWARD, FORWARD
from wmsuite.world_models.rollout import WorldModelState, rollout


@pytest.fixture(scope="module")
def model(episodes):
    # context noise at evaluation makes every chunk draw twice from the generator (context, then x)
    return tiny_model(episodes, context=3, chunk=2, context_noise_eval=0.1).eval()


def _state(model, b=3, seed=0):
    k, c, s = model.cfg.context, model.codec.latent_channels, model.codec.latent_size
    return WorldModelState(torch.randn(b, k, c, s, s, generator=torch.Generator().manual_seed(seed)))


def _manual(model, context, actions, direction, seed):
    """N `model.generate` calls, each on the newest K latents: the loop every caller used to write."""
    k, h = model.cfg.context, model.cfg.chunk
    gen = torch.Generator().manual_seed(seed)
    out = []
    for r in range(actions.shape[1] // h):
        lat = model.generate(context, actions[:, r * h : (r + 1) * h], direction, None, gen)
        out.append(lat)
        context = torch.cat([context, lat], dim=1)[:, -k:]
    return torch.cat(out, dim=1), context


@pytest.mark.parametrize("direction", [FORWARD, BACKWARD])
def test_rollout_is_the_chunk_loop_bit_for_bit(model, direction):
    state = _state(model)
    before = state.context.clone()
    actions = torch.rand(3, 4 * model.cfg.chunk, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1  # N = 4
    latents, after = rollout(model, state, actions, direction, generator=torch.Generator().manual_seed(7))
    want, want_ctx = _manual(model, state.context, actions, direction, seed=7)
    assert latents.shape == (3, 8, *state.context.shape[2:])
    assert torch.equal(latents, want) and torch.equal(after.context, want_ctx)
    assert torch.equal(after.context, latents[:, -model.cfg.context :])  # N*H >= K: only generated frames left
    assert torch.equal(state.context, before)  # the input state is not changed


def test_direction_reaches_the_model(model):
    state, actions = _state(model), torch.zeros(3, 2, 2)
    fwd, _ = rollout(model, state, actions, FORWARD, generator=torch.Generator().manual_seed(0))
    bwd, _ = rollout(model, state, actions, BACKWARD, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(fwd, bwd)


def test_one_chunk_keeps_the_older_context_and_chunks_can_be_rolled_one_at_a_time(model):
    k, h = model.cfg.context, model.cfg.chunk  # 3, 2: one chunk leaves the newest real frame in the context
    state = _state(model)
    actions = torch.rand(3, 3 * h, 2, generator=torch.Generator().manual_seed(2))
    lat, one = rollout(model, state, actions[:, :h], generator=torch.Generator().manual_seed(4))
    assert torch.equal(one.context, torch.cat([state.context[:, -(k - h) :], lat], dim=1))
    gen = torch.Generator().manual_seed(5)
    steps, s = [], state
    for r in range(3):
        lat, s = rollout(model, s, actions[:, r * h : (r + 1) * h], generator=gen)
        steps.append(lat)
    whole, end = rollout(model, state, actions, generator=torch.Generator().manual_seed(5))
    assert torch.equal(torch.cat(steps, 1), whole) and torch.equal(s.context, end.context)


def test_rollout_checks_its_inputs_and_zero_chunks_is_a_no_op(model):
    state = _state(model)
    with pytest.raises(ValueError, match="N\\*H"):
        rollout(model, state, torch.zeros(3, 3, 2))  # 3 actions are not whole chunks of 2
    with pytest.raises(ValueError, match="N\\*H"):
        rollout(model, state, torch.zeros(2, 2, 2))  # batch mismatch
    with pytest.raises(ValueError, match="context frames"):
        rollout(model, WorldModelState(state.context[:, 1:]), torch.zeros(3, 2, 2))
    lat, same = rollout(model, state, torch.zeros(3, 0, 2))
    assert lat.shape == (3, 0, *state.context.shape[2:]) and same is state


def test_from_frames_repeats_the_oldest_frame(model, episodes):
    k = model.cfg.context
    frames = [episodes[0].obs["top"][:1], episodes[1].obs["top"][:3], episodes[2].obs["top"][2:4]]  # K' = 1, 3, 2
    state = WorldModelState.from_frames(model, frames)
    c, s = model.codec.latent_channels, model.codec.latent_size
    assert state.context.shape == (3, k, c, s, s)
    for row, f in enumerate(frames):
        filled = np.concatenate([np.repeat(f[:1], k - len(f), 0), f])  # (K, S, S, 3), by hand
        pix = torch.from_numpy(filled).permute(0, 3, 1, 2)
        # the pixel codec is lossless: decoding gives the frames back exactly
        np.testing.assert_array_equal(model.codec.decode(state.context[row]).numpy(), pix.numpy())
    same = WorldModelState.from_frames(model, np.stack([episodes[0].obs["top"][:2], episodes[3].obs["top"][:2]]))
    assert torch.equal(same.context[0], WorldModelState.from_frames(model, [episodes[0].obs["top"][:2]]).context[0])
    with pytest.raises(ValueError, match="1 <= K'"):
        WorldModelState.from_frames(model, [episodes[0].obs["top"][: k + 1]])
    with pytest.raises(ValueError, match="image size"):
        WorldModelState.from_frames(model, [np.zeros((1, 8, 8, 3), np.uint8)])


def test_from_latents_fills_the_context(model):
    lat = _state(model).context[:, :2]  # (B, 2, C, s, s)
    ctx = WorldModelState.from_latents(lat, 3).context
    assert torch.equal(ctx[:, 0], lat[:, 0]) and torch.equal(ctx[:, 1:], lat)


def test_assign_touches_only_its_rows(model):
    state, other = _state(model, b=4, seed=0), _state(model, b=2, seed=1)
    old = state.context.clone()
    state.assign(np.array([3, 1]), other)
    assert torch.equal(state.context[3], other.context[0]) and torch.equal(state.context[1], other.context[1])
    assert torch.equal(state.context[[0, 2]], old[[0, 2]])
    assert state.newest.shape == (4, *old.shape[2:])
    state.assign([], WorldModelState(old[:0]))  # nothing to reset
    assert torch.equal(state.context[0], old[0])
