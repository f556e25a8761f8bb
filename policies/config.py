"""Configuration of the action-chunk policies (flow matching and diffusion share it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wmsuite.train.config import TrainerConfig


@dataclass
class PolicyConfig:
    kind: Literal["flow", "diffusion"] = "flow"
    """Generator of the action head: 'flow' (pi0-style flow matching) or 'diffusion' (DDPM/DDIM)."""
    horizon: int = 8
    """H: actions predicted per chunk."""
    n_action_steps: int = 4
    """Actions executed from each chunk before predicting the next one (<= horizon)."""
    n_obs_steps: int = 1
    """Observations the policy conditions on (the current one; history is not supported yet)."""
    cameras: tuple[str, ...] | None = None
    """Cameras the image encoder reads (one CNN per camera); empty for a state-only policy; None:
    every camera of the training data (train-policy fills them in)."""
    image_size: int = 64
    """Images are resized to image_size x image_size before the encoder."""
    use_env_state: bool = False
    """Also condition on the privileged `environment_state` (object/goal positions), not only pixels + agent_pos."""
    channels: tuple[int, ...] = (16, 32, 64, 64)
    """Output channels of the stride-2 conv layers of each camera's CNN."""
    image_pool: Literal["flatten", "keypoints"] = "flatten"
    """How each camera's CNN map becomes a feature: 'flatten' (a linear layer on the whole map) or
    'keypoints' (spatial-softmax coordinates of `keypoints` learned attention maps and the mean
    feature, wmsuite/nn/keypoints.py: where small objects are, as numbers; fewer stride-2 layers
    keep a finer map for them)."""
    keypoints: int = 32
    """Attention maps of the 'keypoints' image pool."""
    feature_dim: int = 128
    """Width of each camera's image feature and of the state feature."""
    task_embed_dim: int = 0
    """Width of a task/language embedding passed in obs['task_embedding'] (0: single-task, no slot)."""
    aux_state_weight: float = 0.0
    """Weight of an auxiliary training loss: a linear layer on the observation features
    (`ChunkPolicy.features`) predicts the standardised `environment_state`, so that the encoder must
    represent where the objects are, while the policy still acts from pixels (0: off). The state is
    a target here, not an input: it needs use_env_state off and at least one camera."""
    hidden_dim: int = 256
    """Width of the action head's MLP."""
    head_layers: int = 3
    """Hidden layers of the action head's MLP."""
    num_inference_steps: int = 10
    """Euler steps (flow) or DDIM steps (diffusion) when sampling a chunk."""
    beta_alpha: float = 1.5
    """Flow: time is drawn from Beta(beta_alpha, beta_beta) (pi0 uses Beta(1.5, 1): more weight on noisy times)."""
    beta_beta: float = 1.0
    """Flow: second parameter of the time distribution."""
    num_train_timesteps: int = 100
    """Diffusion: DDPM training timesteps."""
    beta_schedule: str = "squaredcos_cap_v2"
    """Diffusion: the diffusers beta schedule."""
    prediction_type: Literal["epsilon", "sample"] = "sample"
    """Diffusion: the network predicts the clean chunk ('sample') or the noise ('epsilon', Diffusion Policy's
    default). With our small MLP head, sample prediction learned PushCube far better (experiments/policies_journal.md);
    old checkpoints that lack this field load as epsilon."""

    backbone: Literal["mlp", "vla"] = "mlp"
    """'mlp': per-camera CNNs and an MLP action head (the default). 'vla': a vision-language-action
    transformer (policies/vla/model.py): the task instruction's bytes, image patches and the
    proprioception are one token prefix, the noisy action chunk the suffix, through
    `wmsuite.nn.SharedPrefixBlock` (candidate chunks for one observation share the prefix). The
    instruction comes in obs['task']."""
    vla_dim: int = 128
    """VLA: transformer width."""
    vla_layers: int = 4
    """VLA: transformer blocks."""
    vla_heads: int = 4
    """VLA: attention heads (vla_dim / vla_heads even)."""
    vla_patch: int = 8
    """VLA: side of the square image patches in pixels (image_size a multiple of it)."""
    vla_stem: Literal["patch", "conv"] = "patch"
    """VLA: how a frame becomes tokens. 'patch': one linear map per vla_patch-pixel patch (ViT's).
    'conv': the MLP backbone's stride-2 conv stack (`channels`), each cell of its (S / 2^len(channels))^2
    map a token: non-linear features that can say where a small object sits inside the cell."""
    instruction_bytes: int = 48
    """VLA: UTF-8 bytes of the instruction read (longer ones are cut, shorter ones padded)."""

    failure_head: bool = False
    """A second action head on the same encoder, trained on chunks of failed rollouts, that sampling
    steers away from (failure guidance, policies/guidance.py)."""
    guidance_scale: float = 1.0
    """Largest guidance strength of the failure head (lambda_k = scale * (1 - cos) / 2 per step; 0: off)."""
    critics: bool = False
    """HABC's viability and efficiency critics on the encoder's features (policies/weighting.py),
    trained beside the action head and saved with the policy."""

    @property
    def reads_env_state(self) -> bool:
        """Whether the policy needs `environment_state` statistics: as an input, or as the auxiliary target."""
        return self.use_env_state or self.aux_state_weight > 0

    def __post_init__(self) -> None:
        self.cameras = None if self.cameras is None else tuple(self.cameras)
        if not self.guidance_scale >= 0:
            raise ValueError(f"guidance_scale must be >= 0, got {self.guidance_scale!r}")
        self.channels = tuple(self.channels)
        if self.kind not in ("flow", "diffusion"):
            raise ValueError(f"kind must be 'flow' or 'diffusion', got {self.kind!r}")
        for name in ("horizon", "n_action_steps", "feature_dim", "hidden_dim", "head_layers",
                     "num_inference_steps", "num_train_timesteps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_action_steps > self.horizon:
            raise ValueError(f"n_action_steps ({self.n_action_steps}) must be <= horizon ({self.horizon})")
        if self.n_obs_steps != 1:
            raise ValueError(f"n_obs_steps must be 1 (observation history is not supported yet), got {self.n_obs_steps}")
        if self.image_size < 2 ** len(self.channels):
            raise ValueError(f"image_size {self.image_size} is too small for {len(self.channels)} stride-2 layers")
        if any(c < 1 for c in self.channels) or not self.channels:
            raise ValueError(f"channels must be a non-empty list of positive ints, got {self.channels}")
        if self.prediction_type not in ("epsilon", "sample"):
            raise ValueError(f"prediction_type must be 'epsilon' or 'sample', got {self.prediction_type!r}")
        if self.task_embed_dim < 0:
            raise ValueError(f"task_embed_dim must be >= 0, got {self.task_embed_dim}")
        if self.image_pool not in ("flatten", "keypoints") or self.keypoints < 1:
            raise ValueError(f"image_pool must be 'flatten' or 'keypoints' and keypoints >= 1, got "
                             f"{self.image_pool!r}, {self.keypoints}")
        if self.aux_state_weight < 0:
            raise ValueError(f"aux_state_weight must be >= 0, got {self.aux_state_weight}")
        if self.aux_state_weight and (self.use_env_state or self.cameras == ()):  # None: the data's cameras
            raise ValueError("aux_state_weight teaches the image features the environment state: it needs "
                             "cameras and use_env_state off (with the state as an input there is nothing to learn)")
        if self.backbone not in ("mlp", "vla"):
            raise ValueError(f"backbone must be 'mlp' or 'vla', got {self.backbone!r}")
        if self.backbone == "vla":
            if self.vla_stem not in ("patch", "conv"):
                raise ValueError(f"vla_stem must be 'patch' or 'conv', got {self.vla_stem!r}")
            if self.vla_stem == "patch" and (self.vla_patch < 1 or self.image_size % self.vla_patch):
                raise ValueError(f"image_size ({self.image_size}) must be a multiple of vla_patch ({self.vla_patch})")
            if self.vla_stem == "conv" and self.image_size % 2 ** len(self.channels):
                raise ValueError(f"image_size ({self.image_size}) must be a multiple of 2^{len(self.channels)} for "
                                 f"the conv stem's {len(self.channels)} stride-2 layers (--policy.channels)")
            if self.vla_dim % self.vla_heads or (self.vla_dim // self.vla_heads) % 2:
                raise ValueError(f"vla_dim / vla_heads must be an even integer, got {self.vla_dim} / {self.vla_heads}")
            if self.vla_layers < 1 or self.instruction_bytes < 1:
                raise ValueError(f"vla_layers and instruction_bytes must be >= 1, got {self.vla_layers}, "
                                 f"{self.instruction_bytes}")
            if self.failure_head:
                raise ValueError("the VLA backbone has no failure head yet; train it with --method bc or habc")
            if self.image_pool != "flatten":
                raise ValueError("image_pool is the MLP backbone's CNN readout; the VLA reads image patches "
                                 "(--policy.vla-patch): leave --policy.image-pool at 'flatten'")
        if self.beta_alpha <= 0 or self.beta_beta <= 0:
            raise ValueError(f"beta_alpha and beta_beta must be > 0, got {self.beta_alpha}, {self.beta_beta}")
        if self.num_inference_steps > self.num_train_timesteps and self.kind == "diffusion":
            raise ValueError(f"num_inference_steps ({self.num_inference_steps}) must be <= num_train_timesteps "
                             f"({self.num_train_timesteps})")


POLICY_TRAINER = TrainerConfig(steps=3000, batch_size=64, lr=3e-4, warmup=100, ema_decay=0.995, save_every=500,
                               log_every=50)
"""The trainer settings policies are trained with by default (train-policy, the zoo)."""

METHODS = ("bc", "afil", "habc", "both", "autoguide")
"""Ways to learn from a policy's own rollouts (policies/improve.py); `bc` is the control the others are
measured against, and `autoguide` afil's control (its guiding head learns the successes instead)."""
GUIDED = ("afil", "both", "autoguide")
"""The methods whose sampler is guided by a second head (PolicyConfig.failure_head)."""
WEIGHTED = ("habc", "both")
"""The methods that weigh transitions with HABC's critics (PolicyConfig.critics)."""
