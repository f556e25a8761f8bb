"""The policies' observation encoders and the small pieces the action heads share.

    encoder = ObsEncoder(cfg, low_dim)              # images[cam] (B, 3, S, S), low_dim (B, L) -> (B, out_dim)
    temb = time_embedding(t, dim)                   # (B,) -> (B, dim) sinusoidal features
    img = random_shift(img, pad)                    # DrQ-style shift augmentation, same shape

Per camera a small stride-2 CNN (`ImageEncoder`) -> feature; `agent_pos` (and optionally the
privileged `environment_state`) through an MLP; an optional task-embedding slot; all concatenated.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from wmsuite.nn.keypoints import keypoint_grid, spatial_softmax_xy
from wmsuite.policies.config import PolicyConfig


def conv_stack(channels: tuple[int, ...]) -> nn.Sequential:
    """(B, 3, S, S) -> (B, channels[-1], S / 2^n, S / 2^n): n = len(channels) stride-2 3x3 convs, each
    with GroupNorm and Mish."""
    layers: list[nn.Module] = []
    c_in = 3
    for c in channels:
        layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.GroupNorm(min(8, c), c), nn.Mish()]
        c_in = c
    return nn.Sequential(*layers)


class ImageEncoder(nn.Module):
    """(B, 3, S, S) in [-1, 1] -> (B, F): stride-2 conv + GroupNorm + Mish layers, then the map (B, C,
    s, s) pooled by `pool` (PolicyConfig.image_pool): flattened, or K spatial-softmax keypoints
    (B, 2K) and the mean feature (B, C); a linear layer and LayerNorm."""

    def __init__(self, channels: tuple[int, ...], feature_dim: int, image_size: int, pool: str = "flatten",
                 keypoints: int = 32) -> None:
        super().__init__()
        self.conv = conv_stack(channels)
        c_in = channels[-1]
        side = image_size // 2 ** len(channels)
        self.pool = pool
        if pool == "keypoints":
            self.attention = nn.Conv2d(c_in, keypoints, 1)
            self.register_buffer("grid", keypoint_grid(side, side), persistent=False)  # (s*s, 2)
            self.proj = nn.Sequential(nn.Linear(2 * keypoints + c_in, feature_dim), nn.LayerNorm(feature_dim))
        else:
            self.proj = nn.Sequential(nn.Flatten(), nn.Linear(c_in * side * side, feature_dim), nn.LayerNorm(feature_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.conv(x)  # (B, C, s, s)
        if self.pool == "keypoints":
            xy = spatial_softmax_xy(self.attention(f), self.grid)  # (B, K, 2)
            f = torch.cat([xy.flatten(1), f.mean(dim=(2, 3))], dim=1)  # (B, 2K + C)
        return self.proj(f)


class ObsEncoder(nn.Module):
    """Observation -> conditioning vector (B, out_dim)."""

    def __init__(self, cfg: PolicyConfig, low_dim: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.cnns = nn.ModuleDict({cam: ImageEncoder(cfg.channels, cfg.feature_dim, cfg.image_size, cfg.image_pool,
                                                     cfg.keypoints) for cam in cfg.cameras})
        self.state_mlp = nn.Sequential(nn.Linear(low_dim, cfg.feature_dim), nn.Mish(),
                                       nn.Linear(cfg.feature_dim, cfg.feature_dim))
        self.out_dim = cfg.feature_dim * (len(cfg.cameras) + 1) + cfg.task_embed_dim

    def forward(self, images: dict[str, torch.Tensor], low_dim: torch.Tensor,
                task_embedding: torch.Tensor | None = None) -> torch.Tensor:
        """images[cam] (B, 3, S, S) in [-1, 1], low_dim (B, L) standardised, task_embedding (B, T)."""
        feats = [self.cnns[cam](images[cam]) for cam in self.cfg.cameras]  # each (B, F)
        feats.append(self.state_mlp(low_dim))  # (B, F)
        if self.cfg.task_embed_dim:
            if task_embedding is None:
                raise ValueError(f"this policy has a task slot of width {self.cfg.task_embed_dim}: "
                                 "pass obs['task_embedding'] (B, task_embed_dim)")
            feats.append(task_embedding)
        return torch.cat(feats, dim=-1)


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """(B,) times in [0, 1000] -> (B, dim) sinusoidal features."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]  # (B, half)
    return torch.cat([args.sin(), args.cos()], dim=-1)


def random_shift(img: torch.Tensor, pad: int) -> torch.Tensor:
    """DrQ-style augmentation: replicate-pad by `pad` pixels and crop back at a random offset.
    (B, C, S, S) -> (B, C, S, S)."""
    b, _, h, w = img.shape
    padded = F.pad(img, (pad, pad, pad, pad), mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (b,), device=img.device)
    dx = torch.randint(0, 2 * pad + 1, (b,), device=img.device)
    rows = (torch.arange(h, device=img.device)[None] + dy[:, None])  # (B, S)
    cols = (torch.arange(w, device=img.device)[None] + dx[:, None])  # (B, S)
    bi = torch.arange(b, device=img.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]]  # (B, S, S, C)
    return out.permute(0, 3, 1, 2)
