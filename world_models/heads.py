"""The small networks on latent frames that `LatentWorldModel` trains beside its denoiser: the frame
heads (one latent frame -> agent_pos, environment_state, success logit, reward) and inverse dynamics
(consecutive latent frames -> the actions between them).

Shapes: N frames, B batch, H chunk, A action size, C latent channels, s latent side.
"""

from __future__ import annotations

import torch
from torch import nn

from wmsuite.nn.keypoints import keypoint_grid, spatial_softmax_xy


class FrameHeads(nn.Module):
    """One latent frame (N, C, s, s) -> normalised state (N, D), env_state (N, E), success_logit (N,),
    reward (N,), through features of `kind` and an MLP.

    - "keypoints" (the default): a convolutional trunk at the latent's full resolution, K spatial-softmax
      keypoints (the expected (x, y) of a learned attention map, as in Levine et al. 2016 and
      robomimic's SpatialSoftmax) and the mean feature.
    - "conv": strided convolutions flattened into the MLP (the first shipped heads; configs written
      before this option read as "conv").
    Keypoints are the default: the state heads must read where small things are in the frame, which a
    spatial softmax returns directly as coordinates (the world-model docs compare the two kinds).
    """

    def __init__(self, channels: int, size: int, state_dim: int, env_state_dim: int, kind: str = "keypoints",
                 width: int = 64, keypoints: int = 32) -> None:
        super().__init__()
        self.dims = (state_dim, env_state_dim)
        outputs = state_dim + env_state_dim + 2
        if kind == "conv":
            self.net = nn.Sequential(
                nn.Conv2d(channels, width, 3, padding=1), nn.SiLU(),
                nn.Conv2d(width, width, 3, padding=1, stride=2), nn.SiLU(),
                nn.Conv2d(width, 2 * width, 3, padding=1, stride=2), nn.SiLU(),
                nn.Flatten(), nn.Linear(2 * width * ((size + 3) // 4) ** 2, 256), nn.SiLU(),
                nn.Linear(256, outputs),
            )
        elif kind == "keypoints":
            self.net = nn.Sequential(
                SpatialKeypoints(channels, size, width, keypoints), nn.Linear(2 * keypoints + width, 256), nn.SiLU(),
                nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, outputs),
            )
        else:
            raise ValueError(f"frame heads kind must be 'keypoints' or 'conv', got {kind!r}")

    def forward(self, latents: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.net(latents)
        d, e = self.dims
        return {"state": out[:, :d], "env_state": out[:, d : d + e], "success_logit": out[:, d + e],
                "reward": out[:, d + e + 1]}


class SpatialKeypoints(nn.Module):
    """(N, C, s, s) -> (N, 2K + width) features: where K learned things are, (x, y) in [-1, 1] across the
    frame (x right, y down), and the mean feature."""

    def __init__(self, channels: int, size: int, width: int, keypoints: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1), nn.SiLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.SiLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.SiLU(),
        )
        self.attention = nn.Conv2d(width, keypoints, 1)
        self.register_buffer("grid", keypoint_grid(size, size), persistent=False)  # (s*s, 2)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        f = self.trunk(latents)  # (N, W, s, s)
        xy = spatial_softmax_xy(self.attention(f), self.grid)  # (N, K, 2): expected coordinates
        return torch.cat([xy.flatten(1), f.mean(dim=(2, 3))], dim=1)


class InverseDynamics(nn.Module):
    """(B, H+1, C, s, s) consecutive latent frames -> the (B, H, A) actions between them."""

    def __init__(self, channels: int, size: int, chunk: int, action_dim: int, width: int = 64) -> None:
        super().__init__()
        self.chunk, self.action_dim = chunk, action_dim
        self.net = nn.Sequential(
            nn.Conv2d((chunk + 1) * channels, width, 3, padding=1), nn.SiLU(),
            nn.Conv2d(width, width, 3, padding=1, stride=2), nn.SiLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1, stride=2), nn.SiLU(),
            nn.Flatten(), nn.Linear(2 * width * ((size + 3) // 4) ** 2, 256), nn.SiLU(),
            nn.Linear(256, chunk * action_dim),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames.flatten(1, 2)).view(-1, self.chunk, self.action_dim)
