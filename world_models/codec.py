"""Frame codecs: the one interface between camera pixels and the space the dynamics model works in.

    codec = make_codec(CodecConfig(kind="pixel"))
    z = codec.encode(frames)     # (N, 3, S, S) uint8 -> (N, C, s, s) float, ~ N(0, sigma_data^2) per channel
    x = codec.decode(z)          # (N, C, s, s) -> (N, 3, S, S) uint8

`PixelCodec` (the default) is lossless space-to-depth: 64x64x3 -> 16x16x48, decoded by a pixel
shuffle; only per-channel statistics are fitted. `PatchCodec` is a variational autoencoder built from diffusers' `ResnetBlock2D` that
works only at latent resolution: a strided patch convolution in, a pixel shuffle out (64x64x3 ->
16x16x4). `KLCodec` wraps a small diffusers `AutoencoderKL` (convolutions at full resolution: better
in principle, slower to decode on a CPU). Both are trained on our own frames (`codec_loss`);
the posterior mean is the latent, normalised per channel by statistics measured on the training
frames (`fit_latent_stats`).

Frames of any side S: the codec pads them at the bottom and right, repeating the last row and
column, to P, the next multiple of `downsample` (s = P / f), and crops decoded frames back to S (an
84-px robomimic frame at f = 4 is 21x21 latents; at f = 8, padded to 88, 11x11). The denoiser pads
latent frames the same way to the multiple its UNet needs (model.py); nothing else sees padding.
Reconstruction quality is measured separately from prediction quality (`reconstruction_psnr`).

Several cameras (`CodecConfig.cameras` = N): a step's frames are stacked on the channel axis, (3 N, S,
S), in the world model's camera order (`stack_cameras`); each camera's frame is encoded alone by the
same codec and the latents stacked likewise, (N C, s, s), each channel with its own statistics. The
dynamics model sees all cameras of a step at once; `split_cameras` hands decoded frames back per camera.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL
from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
from diffusers.models.resnet import ResnetBlock2D
from torch import nn

from wmsuite.world_models.config import CodecConfig, camera_names


class FrameCodec(nn.Module):
    """Base: frames (N, 3 M, S, S) uint8 <-> latents (N, M C, s, s) float32 for M = cfg.cameras,
    normalised per channel to std `sigma_data` by statistics measured on training frames
    (`fit_latent_stats`).

    Subclasses define `raw_encode(frames) -> z` and `raw_decode(z) -> x in [-1, 1]` on one camera's
    frames, (N, 3, P, P) <-> (N, C, s, s).
    """

    def __init__(self, cfg: CodecConfig, sigma_data: float, channels: int) -> None:
        super().__init__()
        self.cfg, self.sigma_data = cfg, sigma_data
        self.camera_channels = channels  # C, one camera's
        self.latent_channels = channels * cfg.cameras  # M C
        self.latent_size = -(-cfg.image_size // cfg.downsample)  # s = ceil(S / f)
        self.padded_size = self.latent_size * cfg.downsample  # P
        self.register_buffer("latent_mean", torch.zeros(self.latent_channels))
        self.register_buffer("latent_std", torch.ones(self.latent_channels))

    def raw_encode(self, frames: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def raw_decode(self, z: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def pad(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, 3 M, S, S) -> (N, 3 M, P, P), the last row and column repeated (any dtype)."""
        size, m = self.cfg.image_size, self.cfg.cameras
        if frames.shape[-2:] != (size, size) or frames.shape[-3] != 3 * m:
            raise ValueError(f"the codec takes {size}x{size} frames of {m} camera(s) stacked on channels, "
                             f"(N, {3 * m}, {size}, {size}); got {tuple(frames.shape)}")
        if self.padded_size == size:
            return frames
        idx = torch.arange(self.padded_size, device=frames.device).clamp_max(size - 1)
        return frames[..., idx, :][..., idx]

    def per_camera(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, 3 M, S, S) -> (N M, 3, S, S): each camera's frame its own row (codec training)."""
        return frames.reshape(-1, 3, *frames.shape[-2:])

    def _raw_encode_all(self, frames: torch.Tensor) -> torch.Tensor:
        z = self.raw_encode(self.per_camera(self.pad(frames)))  # (N M, C, s, s)
        return z.reshape(len(frames), self.latent_channels, *z.shape[-2:])  # (N, M C, s, s)

    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        z = self._raw_encode_all(frames)  # (N, M C, s, s)
        return (z - self.latent_mean[:, None, None]) / self.latent_std[:, None, None] * self.sigma_data

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return to_uint8(self.decode_float(latents))

    def decode_float(self, latents: torch.Tensor) -> torch.Tensor:
        """(N, M C, s, s) normalised latents -> (N, 3 M, S, S) float in about [-1, 1]."""
        z = latents / self.sigma_data * self.latent_std[:, None, None] + self.latent_mean[:, None, None]
        size, s = self.cfg.image_size, z.shape[-1]
        x = self.raw_decode(z.reshape(-1, self.camera_channels, s, s))  # (N M, 3, P, P)
        return x.reshape(len(z), -1, *x.shape[-2:])[..., :size, :size]  # (N, 3 M, S, S) cropped

    @torch.no_grad()
    def fit_latent_stats(self, frames: torch.Tensor, batch: int = 256) -> None:
        """Set the per-channel latent mean/std from frames (N, 3 M, S, S) uint8."""
        zs = torch.cat([self._raw_encode_all(frames[i : i + batch]) for i in range(0, len(frames), batch)])
        self.latent_mean.copy_(zs.mean(dim=(0, 2, 3)))
        self.latent_std.copy_(zs.std(dim=(0, 2, 3)).clamp_min(1e-3))


def stack_cameras(pixels: Mapping[str, np.ndarray], camera: str) -> np.ndarray:
    """A world model's cameras' frames (..., S, S, 3) each -> (..., S, S, 3 M), in `camera`'s order
    ('front+wrist'); one camera's frames are returned as they are."""
    names = camera_names(camera)
    missing = [n for n in names if n not in pixels]
    if missing:
        raise KeyError(f"the world model's camera(s) {list(missing)} are not in the observation, which has {sorted(pixels)}")
    if len(names) == 1:
        return np.asarray(pixels[names[0]])
    return np.concatenate([np.asarray(pixels[n]) for n in names], axis=-1)


def split_cameras(frames: np.ndarray, camera: str) -> dict[str, np.ndarray]:
    """(..., S, S, 3 M) stacked frames -> {camera name: (..., S, S, 3)}, the inverse of `stack_cameras`."""
    return {n: frames[..., 3 * i : 3 * i + 3] for i, n in enumerate(camera_names(camera))}


def to_unit(frames: torch.Tensor) -> torch.Tensor:
    """uint8 (N, 3, S, S) -> float32 in [-1, 1]."""
    if frames.dtype != torch.uint8:
        raise TypeError(f"frames must be uint8, got {frames.dtype}")
    return frames.float() / 127.5 - 1.0


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """float in [-1, 1] -> uint8 (rounded, clamped)."""
    return ((x.clamp(-1, 1) + 1.0) * 127.5).round().to(torch.uint8)


class PixelCodec(FrameCodec):
    """Pixels, space-to-depth: (3, S, S) in [-1, 1] -> (3 f^2, S/f, S/f) by pixel unshuffle. Lossless and
    parameter-free (only the per-channel statistics are fitted); decoding is a pixel shuffle."""

    def __init__(self, cfg: CodecConfig, sigma_data: float = 0.5) -> None:
        super().__init__(cfg, sigma_data, 3 * cfg.downsample**2)

    def raw_encode(self, frames: torch.Tensor) -> torch.Tensor:
        return F.pixel_unshuffle(to_unit(frames), self.cfg.downsample)

    def raw_decode(self, z: torch.Tensor) -> torch.Tensor:
        return F.pixel_shuffle(z, self.cfg.downsample)


class _VAECodec(FrameCodec):
    """Shared part of the learned codecs: a variational posterior whose mean is the latent.

    Subclasses define `posterior(x) -> DiagonalGaussianDistribution` and `raw_decode(z) -> x`,
    with x in [-1, 1] of shape (N, 3, S, S) and z of shape (N, C, s, s).
    """

    def __init__(self, cfg: CodecConfig, sigma_data: float) -> None:
        super().__init__(cfg, sigma_data, cfg.latent_channels)

    def posterior(self, x: torch.Tensor) -> DiagonalGaussianDistribution:
        raise NotImplementedError

    def raw_encode(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, 3, S, S) uint8 -> posterior mean (N, C, s, s), unnormalised."""
        return self.posterior(to_unit(frames)).mean


class PatchCodec(_VAECodec):
    """Patch-conv encoder / pixel-shuffle decoder with diffusers ResnetBlock2D at latent resolution."""

    def __init__(self, cfg: CodecConfig, sigma_data: float = 0.5) -> None:
        super().__init__(cfg, sigma_data)
        w, f, c = cfg.width, cfg.downsample, cfg.latent_channels
        self.enc_in = nn.Conv2d(3, w, kernel_size=f, stride=f)  # (N, 3, S, S) -> (N, w, s, s)
        self.enc_blocks = nn.ModuleList(_resblock(w) for _ in range(cfg.blocks))
        self.enc_out = nn.Sequential(nn.GroupNorm(16, w), nn.SiLU(), nn.Conv2d(w, 2 * c, 1))
        self.dec_in = nn.Conv2d(c, w, 3, padding=1)
        self.dec_blocks = nn.ModuleList(_resblock(w) for _ in range(cfg.blocks))
        self.dec_out = nn.Sequential(nn.GroupNorm(16, w), nn.SiLU(), nn.Conv2d(w, 3 * f * f, 3, padding=1),
                                     nn.PixelShuffle(f))  # (N, w, s, s) -> (N, 3, S, S)

    def posterior(self, x: torch.Tensor) -> DiagonalGaussianDistribution:
        h = self.enc_in(x)
        for block in self.enc_blocks:
            h = block(h, None)
        return DiagonalGaussianDistribution(self.enc_out(h))

    def raw_decode(self, z: torch.Tensor) -> torch.Tensor:
        h = self.dec_in(z)
        for block in self.dec_blocks:
            h = block(h, None)
        return self.dec_out(h)


def _resblock(width: int) -> ResnetBlock2D:
    return ResnetBlock2D(in_channels=width, out_channels=width, temb_channels=None, groups=16)


class KLCodec(_VAECodec):
    """A small diffusers AutoencoderKL: log2(f) + 1 blocks of widths (w/2, w, w, ...)."""

    def __init__(self, cfg: CodecConfig, sigma_data: float = 0.5) -> None:
        super().__init__(cfg, sigma_data)
        n = cfg.downsample.bit_length()  # blocks: one more than the number of halvings
        widths = (cfg.width // 2,) + (cfg.width,) * (n - 1)
        self.vae = AutoencoderKL(
            in_channels=3, out_channels=3,
            down_block_types=("DownEncoderBlock2D",) * n, up_block_types=("UpDecoderBlock2D",) * n,
            block_out_channels=widths, layers_per_block=1, latent_channels=cfg.latent_channels,
            norm_num_groups=min(32, cfg.width // 2), sample_size=self.padded_size, mid_block_add_attention=False,
        )

    def posterior(self, x: torch.Tensor) -> DiagonalGaussianDistribution:
        return self.vae.encode(x).latent_dist

    def raw_decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(z).sample


def codec_loss(codec: _VAECodec, frames: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """Autoencoder training loss on frames (N, 3 M, S, S) uint8 (each camera a sample): weighted MSE +
    kl_weight * KL.

    Pixels of saturated colour (objects, goals and robots drawn as coloured blobs) weigh `1 + color_weight`.
    """
    x = to_unit(codec.per_camera(codec.pad(frames)))  # (N M, 3, P, P)
    post = codec.posterior(x)
    recon = codec.raw_decode(post.sample())
    rgb = (x + 1) / 2
    saturation = rgb.amax(1, keepdim=True) - rgb.amin(1, keepdim=True)  # (N, 1, S, S)
    weight = 1.0 + codec.cfg.color_weight * (saturation > 0.25).float()
    mse = (weight * (recon - x) ** 2).mean()
    kl = post.kl().mean() / x[0].numel()
    loss = mse + codec.cfg.kl_weight * kl
    return loss, {"codec/mse": float(F.mse_loss(recon.detach(), x)), "codec/kl": float(kl.detach())}


@torch.no_grad()
def reconstruction_psnr(codec: FrameCodec, frames: torch.Tensor, batch: int = 256) -> float:
    """Mean PSNR (dB, on [0, 255]) of decode(encode(frames)) against frames (N, 3 M, S, S) uint8."""
    psnrs = []
    for i in range(0, len(frames), batch):
        f = frames[i : i + batch]
        rec = codec.decode(codec.encode(f))
        mse = ((rec.float() - f.float()) ** 2).mean(dim=(1, 2, 3)).clamp_min(1e-10)
        psnrs.append(10 * torch.log10(255.0**2 / mse))
    return float(torch.cat(psnrs).mean())


CODECS: dict[str, type[FrameCodec]] = {"patch": PatchCodec, "autoencoder_kl": KLCodec, "pixel": PixelCodec}


def make_codec(cfg: CodecConfig, sigma_data: float = 0.5) -> FrameCodec:
    """The codec named by cfg.kind (the one registry line of codecs)."""
    return CODECS[cfg.kind](cfg, sigma_data)  # type: ignore[call-arg]
