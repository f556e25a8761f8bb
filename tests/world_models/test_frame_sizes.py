"""Frames of any side (#29): robomimic's 84 px and LIBERO's 128 px through the codec, the model and
`WorldModelEnv`; the codec pads to a multiple of its downsampling and the denoiser to its UNet's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.world_models.conftest import moving_square_episode, tiny_config
from wmsuite.world_models.codec import make_codec
from wmsuite.world_models.config import CodecConfig
from wmsuite.world_models.contexts import EpisodeContext
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.train import state_stats


@pytest.mark.parametrize(("size", "downsample", "latent"), [(84, 4, 21), (84, 8, 11), (128, 4, 32), (20, 8, 3)])
def test_pixel_codec_pads_repeating_the_edge_and_crops_back_losslessly(size, downsample, latent):
    codec = make_codec(CodecConfig(kind="pixel", image_size=size, downsample=downsample))
    frames = torch.randint(0, 256, (5, 3, size, size), dtype=torch.uint8)
    codec.fit_latent_stats(frames)
    padded = codec.pad(frames)
    assert padded.shape[-1] == latent * downsample == codec.padded_size
    assert torch.equal(padded[..., :size, :size], frames)
    assert torch.equal(padded[..., size:, :size], frames[..., -1:, :].expand(-1, -1, padded.shape[-1] - size, -1))
    assert torch.equal(padded[..., :, size:], padded[..., :, size - 1 : size].expand(-1, -1, -1, padded.shape[-1] - size))
    z = codec.encode(frames)
    assert z.shape == (5, 3 * downsample**2, latent, latent)
    assert torch.equal(codec.decode(z), frames)


@pytest.mark.parametrize("kind", ["patch", "autoencoder_kl"])
def test_learned_codecs_take_an_84_px_frame(kind):
    codec = make_codec(CodecConfig(kind=kind, image_size=84, downsample=8, width=16, blocks=1))
    frames = torch.randint(0, 256, (2, 3, 84, 84), dtype=torch.uint8)
    assert codec.encode(frames).shape == (2, codec.latent_channels, 11, 11)
    assert codec.decode(codec.encode(frames)).shape == frames.shape


def test_codec_names_a_frame_of_the_wrong_size():
    codec = make_codec(CodecConfig(kind="pixel", image_size=84))
    with pytest.raises(ValueError, match="84x84 frames"):
        codec.encode(torch.zeros((1, 3, 64, 64), dtype=torch.uint8))


@pytest.mark.parametrize("size", [84, 128])
def test_model_and_env_at_robomimic_and_libero_frame_sizes(size):
    episodes = [moving_square_episode(t=8, size=size, seed=s) for s in range(2)]
    torch.manual_seed(0)
    # three UNet levels halve the latent twice: 21 latents are padded to 24 inside the denoiser
    model = LatentWorldModel(tiny_config(channels=(16, 16, 16)), CodecConfig(kind="pixel", image_size=size),
                             state_stats(episodes))
    s = size // 4
    assert model.unet_pad == -s % 4
    frames = torch.cat(episode_frames(episodes, "top"))
    model.codec.fit_latent_stats(frames)
    data = LatentWindows(episodes, encode_episodes(model.codec, episode_frames(episodes, "top")), 2, 2)
    batch = data.batch(range(3))
    loss, _ = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    lat = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(0))
    assert lat.shape == (3, 2, model.codec.latent_channels, s, s)

    env = WorldModelEnv(model.eval(), EpisodeContext(episodes), num_envs=2, horizon=2, seed=0)
    obs, _ = env.reset(seed=[0, 1])
    assert obs["pixels"]["top"].shape == (2, size, size, 3)
    np.testing.assert_array_equal(obs["pixels"]["top"][1], episodes[1].obs["top"][0])  # lossless codec
    obs, *_ = env.step(np.zeros((2, 2, 2), np.float32))
    assert env.observation_space.contains(obs)
