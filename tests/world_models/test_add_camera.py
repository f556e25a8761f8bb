"""A warm start that adds a camera (world_models/add_camera.py): the widened model must compute exactly
what its one-camera source computed on the source's camera, whatever the new camera shows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tests.world_models.conftest import moving_square_episode, tiny_config, tiny_model
from wmsuite.world_models.add_camera import added_cameras, widen, widened_codec
from wmsuite.world_models.data import episode_frames
from wmsuite.world_models.model import FORWARD
from wmsuite.world_models.train import build_model, warm_start


@pytest.fixture(scope="module")
def two_cameras():
    """The moving-square episodes with a second camera that sees the scene mirrored and dimmed."""
    out = []
    for seed in range(4):
        ep = moving_square_episode(seed=seed)
        out.append(dataclasses.replace(ep, obs={"top": ep.obs["top"], "side": ep.obs["top"][:, ::-1] // 2 + 20}))
    return out


@pytest.mark.parametrize("prediction", ["edm", "sample"])
def test_a_widened_model_equals_its_source_on_the_source_camera(two_cameras, prediction):
    source = tiny_model(two_cameras, camera="top", prediction=prediction).eval()
    for p in source.parameters():  # every weight nonzero, so a misplaced block would show
        p.data.add_(0.01 * torch.randn_like(p))
    frames = torch.cat(episode_frames(two_cameras, "top+side"))  # (N, 6, S, S)
    codec = widened_codec(source.codec, 2, frames)
    model = build_model(two_cameras, tiny_config(camera="top+side", prediction=prediction), codec).eval()
    note = warm_start(model, source, "source")
    assert "fresh: none" in note, note  # every tensor copied or widened
    c = source.codec.latent_channels
    assert model.codec.latent_channels == 2 * c
    # the codec: the source's statistics on the source's camera, the new camera's fitted (not the source's)
    lat = model.codec.encode(frames[:8])  # (8, 2C, s, s)
    torch.testing.assert_close(lat[:, :c], source.codec.encode(frames[:8, :3]))
    assert not torch.allclose(model.codec.latent_mean[c:], source.codec.latent_mean)
    torch.manual_seed(1)
    b, k, h, s = 3, source.cfg.context, source.cfg.chunk, source.codec.latent_size
    ctx, noisy = torch.randn(b, k, 2 * c, s, s), torch.randn(b, h, 2 * c, s, s)  # the new camera's slots random
    actions, sigma = torch.randn(b, h, 2), torch.full((b,), 0.7)
    direction, ctx_noise = torch.full((b,), FORWARD), torch.zeros(b)
    with torch.no_grad():
        wide = model.denoise(noisy, sigma, ctx, actions, direction, ctx_noise)  # (B, H, 2C, s, s)
        alone = source.denoise(noisy[:, :, :c], sigma, ctx[:, :, :c], actions, direction, ctx_noise)
        torch.testing.assert_close(wide[:, :, :c], alone, atol=1e-5, rtol=1e-5)
        heads, heads_alone = model.predict_heads(ctx[:, 0]), source.predict_heads(ctx[:, 0, :c])
        for key in heads:
            torch.testing.assert_close(heads[key], heads_alone[key], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model.inverse_dynamics(ctx[:, 0], noisy),
                                   source.inverse_dynamics(ctx[:, 0, :c], noisy[:, :, :c]), atol=1e-5, rtol=1e-5)
    if prediction == "sample":  # a zero output row: the new camera is drawn at its latent mean until trained
        assert torch.count_nonzero(wide[:, :, c:]) == 0


def test_widen_places_the_source_at_each_frames_first_slots_and_refuses_what_it_cannot_read():
    theirs = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3 * 2)  # 3 frames of 2 channels on dim 1
    wide = widen(theirs, torch.Size((2, 3 * 5)), 2, 5)
    assert wide is not None
    for f in range(3):
        torch.testing.assert_close(wide[:, 5 * f : 5 * f + 2], theirs[:, 2 * f : 2 * f + 2])
        assert torch.count_nonzero(wide[:, 5 * f + 2 : 5 * f + 5]) == 0
    bias = widen(torch.ones(4), torch.Size((10,)), 2, 5)  # an output bias: 2 frames on dim 0
    assert bias is not None and bias.tolist() == [1, 1, 0, 0, 0, 1, 1, 0, 0, 0]
    assert widen(theirs, torch.Size((3, 15)), 2, 5) is None  # differs on another axis too
    assert widen(theirs, torch.Size((2, 7)), 2, 5) is None  # not whole frames
    assert added_cameras("top", "top+side") == 1 and added_cameras("top", "top") == 0
    assert added_cameras("top", "ego") == 0  # another camera, as many: the source's weights read it (a plain warm start)
    with pytest.raises(ValueError, match="must start with the warm start's cameras"):
        added_cameras("top", "side+top")
    with pytest.raises(ValueError, match="must start with the warm start's cameras"):
        added_cameras("top+side", "top")


def test_widened_codec_needs_more_cameras(two_cameras):
    source = tiny_model(two_cameras, camera="top")
    frames = torch.from_numpy(np.concatenate([ep.obs["top"] for ep in two_cameras]).transpose(0, 3, 1, 2).copy())
    with pytest.raises(ValueError, match="more cameras"):
        widened_codec(source.codec, 1, frames)
