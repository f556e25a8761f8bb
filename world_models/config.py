"""Configuration of the latent video diffusion world model: the frame codec and the dynamics model.

Both are dataclasses with a docstring under every field; `__post_init__` names any bad value.
They travel inside every checkpoint's `config.json`, so a checkpoint rebuilds its own model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class CodecConfig:
    kind: Literal["pixel", "patch", "autoencoder_kl"] = "pixel"
    """'pixel' (default): lossless, parameter-free space-to-depth of the frame into (3 f^2, S/f, S/f)
    latents (pixel-space diffusion on patches); 'patch': a learned variational autoencoder built from
    diffusers ResnetBlock2D at latent resolution (patch conv in, pixel shuffle out); 'autoencoder_kl':
    a small diffusers AutoencoderKL. On our 2 shared CPU cores the learned codecs cost 3-8 s per
    training step and decode only 20-130 frames/s at 64 px (measured, docs/world_models.md), which
    left no time to train the dynamics; the learned ones stay one flag away for GPUs."""
    image_size: int = 64
    """Side S of the square camera frames."""
    latent_channels: int = 4
    """C: channels of a learned codec's latent frame (the pixel codec has 3 * downsample^2)."""
    downsample: int = 8
    """f: the latent frame is (C, S/f, S/f); a power of two (8: 64x64x3 pixels -> 8x8x192 for the
    pixel codec; `wmsuite train-wm` and the shipped model use 4, 16x16x48, which learned contact)."""
    width: int = 64
    """Feature width of a learned autoencoder's blocks."""
    blocks: int = 2
    """Residual blocks in each of the encoder and the decoder."""
    kl_weight: float = 1e-6
    """Weight of the KL term of the autoencoder loss (small: the posterior mean is the latent)."""
    color_weight: float = 10.0
    """Extra reconstruction weight on saturated-colour pixels (the cube, goal and pusher are small
    coloured blobs on a grey table; without it an MSE autoencoder blurs them away)."""

    def __post_init__(self) -> None:
        if self.kind not in ("patch", "autoencoder_kl", "pixel"):
            raise ValueError(f"codec kind must be 'patch', 'autoencoder_kl' or 'pixel', got {self.kind!r}")
        if self.image_size < 8:
            raise ValueError(f"image_size must be >= 8, got {self.image_size}")
        if self.latent_channels < 1:
            raise ValueError(f"latent_channels must be >= 1, got {self.latent_channels}")
        if self.downsample < 1 or self.downsample & (self.downsample - 1) or self.image_size % self.downsample:
            raise ValueError(f"downsample must be a power of two dividing image_size {self.image_size}, "
                             f"got {self.downsample}")
        if self.width < 16 or self.width % 16:
            raise ValueError(f"width must be a multiple of 16, got {self.width}")
        if self.blocks < 0:
            raise ValueError(f"blocks must be >= 0, got {self.blocks}")
        if self.kl_weight < 0 or self.color_weight < 0:
            raise ValueError(f"kl_weight and color_weight must be >= 0, got {self.kl_weight}, {self.color_weight}")


@dataclass
class WorldModelConfig:
    camera: str = "top"
    """The camera the world model generates (observations carry it under pixels[camera])."""
    context: int = 4
    """K: latent frames of context the dynamics model sees."""
    chunk: int = 4
    """H: actions consumed per world-model step; the model predicts the H frames they produce."""
    action_dim: int = 2
    """A: size of one action."""
    state_dim: int = 2
    """D: size of agent_pos (predicted by the frame heads)."""
    env_state_dim: int = 6
    """E: size of environment_state (predicted by the frame heads)."""
    channels: tuple[int, ...] = (64, 64)
    """Block widths of the diffusers UNet2DModel denoiser (sized for 2 shared CPU cores)."""
    attention: bool = False
    """Self-attention in the UNet's lower-resolution blocks (off: the 16x16 latent's convolutions
    already see the whole frame at the 4x4 level, and attention costs ~60% more time per step)."""
    sigma_min: float = 0.002
    """Smallest EDM noise level."""
    sigma_max: float = 5.0
    """Largest EDM noise level (sampling starts here; DIAMOND uses 5 for frame prediction)."""
    sigma_data: float = 0.5
    """EDM data scale; latents are scaled to this standard deviation."""
    p_mean: float = 0.0
    """Mean of log(sigma) for training noise levels (log-normal, as in EDM)."""
    p_std: float = 1.2
    """Std of log(sigma) for training noise levels."""
    residual: bool = False
    """Diffuse the change of each target frame from the newest context frame instead of the frame
    itself. Off by default, measured: a residual model passes every artefact of its own generated
    context on to the next chunk (ghosts of the pusher piled up within a few chunks of a closed-loop
    rollout, and noise-augmented training did not teach it to repair them), while a model that
    predicts whole frames stayed coherent for 20 chunks at a fifth of the training steps."""
    prediction: str = "edm"
    """What the UNet's output stands for. "edm": Karras et al.'s preconditioning (c_skip, c_out =
    sigma * sigma_data / sqrt(sigma^2 + sigma_data^2)); at low sigma the network must name the noise
    exactly, and a small UNet that also reads 4 context frames could not: the last Euler step left
    most of the noise in (measured: teacher-forced PSNR 26.3 dB at 1 step, 20.1 at 3, 18.2 at 5 — grain
    that the success head then misread). "sample": the output is the clean frame itself (c_skip = 0,
    c_out = sigma_data, constant loss weight), so an unsure model blurs instead of leaving noise."""
    sampling_steps: int = 1
    """Euler steps of the EDM sampler at generation (1-4: rollouts are long)."""
    context_noise_max: float = 0.3
    """Training augmentation: context latents get Gaussian noise of a level drawn uniformly in
    [0, this] (in units of sigma_data-scaled latents), and the level is given to the model, as in
    GameNGen/DIAMOND, so errors of its own generated context do not compound."""
    context_noise_eval: float = 0.0
    """Context noise level applied (and announced) at generation time."""
    p_backward: float = 0.0
    """Probability that a training window is played backward in time (direction flag -1)."""
    p_single_frame: float = 0.1
    """Probability that a training window's context is its newest frame repeated K times (how a
    rollout starts from one real frame)."""
    self_forcing: float = 0.0
    """Probability that a forward training window's context is the model's own rollout instead of
    real frames: from the real frames `self_forcing_chunks`-or-fewer chunks earlier, the model
    generates (without gradient, with its sampling steps) the frames up to the window, driven by the
    episode's true actions, and learns to predict the real target from them. Noise augmentation only
    imitates its own errors; this shows it them (ghost cubes, a fading goal, a drifted pusher), so it
    learns to pull a drifted context back towards the real scene. 0: off, the default: measured as a
    fine-tune of the step-18,000 model (0.5, 4,211 and 4,958 steps), it wrecked it (cube error at horizon 1 6 mm ->
    11-12 cm, learned-simulator Pearson 0.85 -> -0.14 / 0.05; docs/world_models.md), cause not found yet."""
    self_forcing_chunks: int = 2
    """Most chunks a self-forced context is generated over; each batch draws 1 to this many."""
    heads: str = "keypoints"
    """Architecture of the frame heads (agent_pos, environment_state, success, reward): "keypoints"
    (spatial-softmax keypoints: object positions 3x more precise, measured) or "conv" (see FrameHeads)."""
    idm_weight: float = 1.0
    """Weight of the inverse-dynamics loss on real latents."""
    consistency_weight: float = 0.1
    """Weight of forward-inverse consistency: the inverse-dynamics head must recover the actions
    from the denoiser's prediction (gradient flows into the denoiser only)."""
    head_weight: float = 1.0
    """Weight of the frame heads' losses (agent_pos, environment_state, success, reward)."""
    motion_weight: float = 0.0
    """Extra diffusion-loss weight on latent elements that change between the newest context frame
    and the target (the pusher, a pushed cube): they carry the dynamics but are a few % of a frame,
    and an unweighted loss is minimised well enough by a model that never moves the cube. This mask
    depends on the answer, so it biases the optimum towards motion: where a push may or may not move
    the cube, "moved" weighs up to 1 + motion_weight times more (measured: docs/world_models.md)."""
    context_motion_weight: float = 0.0
    """Extra diffusion-loss weight on the latent cells within motion_reach of anything that moved
    within the context frames. This mask depends on the inputs only, so it keeps the optimum at the
    conditional mean; a context of one repeated frame gets no extra weight."""
    motion_reach: int = 2
    """How many latent cells around a change in the context context_motion_weight reaches (what the
    pusher and the cube can cover in one chunk)."""
    motion_threshold: float = 0.05
    """|target - newest context frame| (motion_weight) or |newest - older context frames|
    (context_motion_weight) above which a latent element counts as changed (latents have std
    sigma_data per channel)."""

    def __post_init__(self) -> None:
        for name in ("context", "chunk", "action_dim", "sampling_steps", "self_forcing_chunks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("state_dim", "env_state_dim"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        self.channels = tuple(int(c) for c in self.channels)
        if not self.channels or any(c < 8 or c % 8 for c in self.channels):
            raise ValueError(f"channels must be multiples of 8 (GroupNorm groups), got {self.channels}")
        if self.heads not in ("keypoints", "conv"):
            raise ValueError(f"heads must be 'keypoints' or 'conv', got {self.heads!r}")
        if self.motion_reach < 0:
            raise ValueError(f"motion_reach must be >= 0 latent cells, got {self.motion_reach}")
        if self.prediction not in ("edm", "sample"):
            raise ValueError(f"prediction must be 'edm' or 'sample', got {self.prediction!r}")
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(f"need 0 < sigma_min < sigma_max, got {self.sigma_min}, {self.sigma_max}")
        for name in ("p_backward", "p_single_frame", "self_forcing"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("context_noise_max", "context_noise_eval", "idm_weight", "consistency_weight", "head_weight",
                     "motion_weight", "context_motion_weight", "motion_threshold"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
