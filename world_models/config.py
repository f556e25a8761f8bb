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
    a small diffusers AutoencoderKL. The learned codecs are slow to train and decode on a CPU, which
    leaves little time for the dynamics; they are meant for GPUs."""
    image_size: int = 64
    """Side S of the square camera frames (train-wm checks it against the training data); any side:
    frames are padded to a multiple of `downsample` inside the codec (codec.py)."""
    latent_channels: int = 4
    """C: channels of a learned codec's latent frame (the pixel codec has 3 * downsample^2)."""
    downsample: int = 4
    """f: the latent frame is (C, s, s) with s = ceil(S/f); a power of two (4: 64x64x3 pixels ->
    16x16x48 for the pixel codec, fine enough for small objects to move cell by cell)."""
    width: int = 64
    """Feature width of a learned autoencoder's blocks."""
    blocks: int = 2
    """Residual blocks in each of the encoder and the decoder."""
    kl_weight: float = 1e-6
    """Weight of the KL term of the autoencoder loss (small: the posterior mean is the latent)."""
    color_weight: float = 10.0
    """Extra reconstruction weight on saturated-colour pixels (objects, goals and robots are often
    small coloured blobs on a plain table; without it an MSE autoencoder blurs them away)."""
    cameras: int = 1
    """N: camera frames per step, stacked on the channel axis (3 N channels); each is encoded alone and
    the latents stacked likewise (N C channels). Set from the world model's camera list by train-wm."""

    def __post_init__(self) -> None:
        if self.kind not in ("patch", "autoencoder_kl", "pixel"):
            raise ValueError(f"codec kind must be 'patch', 'autoencoder_kl' or 'pixel', got {self.kind!r}")
        if self.image_size < 8:
            raise ValueError(f"image_size must be >= 8, got {self.image_size}")
        if self.latent_channels < 1:
            raise ValueError(f"latent_channels must be >= 1, got {self.latent_channels}")
        if self.downsample < 1 or self.downsample & (self.downsample - 1) or self.downsample > self.image_size:
            raise ValueError(f"downsample must be a power of two no larger than image_size {self.image_size}, "
                             f"got {self.downsample}")
        if self.width < 16 or self.width % 16:
            raise ValueError(f"width must be a multiple of 16, got {self.width}")
        if self.blocks < 0:
            raise ValueError(f"blocks must be >= 0, got {self.blocks}")
        if self.cameras < 1:
            raise ValueError(f"cameras must be >= 1, got {self.cameras}")
        if self.kl_weight < 0 or self.color_weight < 0:
            raise ValueError(f"kl_weight and color_weight must be >= 0, got {self.kl_weight}, {self.color_weight}")


@dataclass
class WorldModelConfig:
    camera: str = ""
    """The camera the world model generates (observations carry it under pixels[camera]), or several
    joined by '+' ('front+wrist': each generated, and seen in the context, as the policy's cameras
    are); empty: the first camera of the training data."""
    context: int = 4
    """K: latent frames of context the dynamics model sees."""
    chunk: int = 4
    """H: actions consumed per world-model step; the model predicts the H frames they produce."""
    action_dim: int | None = None
    """A: size of one action (None: sized from the training data)."""
    state_dim: int | None = None
    """D: size of agent_pos, predicted by the frame heads (None: sized from the training data)."""
    env_state_dim: int | None = None
    """E: size of environment_state, predicted by the frame heads (None: sized from the training data)."""
    channels: tuple[int, ...] = (64, 128, 128)
    """Block widths of the diffusers UNet2DModel denoiser (sized for a rollout throughput target on
    two CPU cores)."""
    instruction_buckets: int | None = None
    """Hash buckets of the task instruction's words, whose mean embedding joins the action
    conditioning, so that one model serves several tasks (LIBERO's files each hold one task and its
    instruction); None: sized from the data (256 when its episodes carry two instructions or more,
    else 0); 0: no instruction."""
    memory_frames: int = 0
    """M: past frames the spatial memory retrieves for each chunk, reprojected into the camera the
    chunk heads for (world_models/latent_memory.py) and given to the denoiser beside the context, each
    with a mask of where it sees; 0: no memory (the baseline). Needs a task whose probe defines the
    moving camera's geometry (PushCubeEgo)."""
    start_map: bool = False
    """Also give the denoiser, as one more memory slot, the episode's start frame of the task's fixed
    map camera (PushCubeEgo's "top", which sees the whole table) redrawn in the camera the chunk heads
    for (latent_memory.map_slot): the moving camera's first visits then show what was there at the
    start instead of an invention. Needs memory_frames > 0 and a probe that names a map camera."""
    map_unseen: bool = False
    """Show the start map only on ground the episode's frames have not shown yet (`SpatialMemory.was_seen`):
    the map is the scene at the start, so where the camera has looked since, its frames know better, and
    an object pushed from where the map shows it must not be drawn there again."""
    attention: bool = False
    """Self-attention in the UNet's lower-resolution blocks (off: at the coarsest level the
    convolutions already see the whole latent frame, and attention makes every step slower)."""
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
    itself. Off by default: a residual model passes every artefact of its own generated context on
    to the next chunk, so ghosts pile up in long rollouts, while a model that predicts whole frames
    stays coherent (experiments/ has the runs)."""
    prediction: Literal["edm", "sample"] = "edm"
    """What the UNet's output stands for. "edm": Karras et al.'s preconditioning (c_skip, c_out =
    sigma * sigma_data / sqrt(sigma^2 + sigma_data^2)); at low sigma the network must name the noise
    exactly, which a small UNet cannot, so more sampling steps leave grain behind. "sample": the output
    is the clean frame itself (c_skip = 0, c_out = sigma_data, constant loss weight), so an unsure
    model blurs instead of leaving noise (the shipped model switched to it in its second phase)."""
    sampling_steps: int = 1
    """Euler steps of the EDM sampler at generation (1-4: rollouts are long)."""
    precision: Literal["float32", "bfloat16"] = "float32"
    """Number format of generation, frame heads and inverse dynamics at inference (training is always
    float32): "bfloat16" (autocast) is faster on CPUs with bfloat16 instructions (AVX-512 BF16, AMX)
    and on GPUs, at a small cost in fidelity that the model card measures before a model ships with it."""
    objective: Literal["teacher", "noise", "chained", "cycle"] = "noise"
    """What the dynamics learn from, one family (world_models/objectives.py): 'teacher' (teacher forcing:
    real contexts as they are), 'noise' (real contexts with noise of a level the model is told,
    context_noise_max), 'chained' ('noise', and a self_forcing share of forward windows gets the
    model's own no-grad rollout as context), 'cycle' ('noise', and a cycle term: a no-grad forward
    rollout from real frames played back without gradient, its last backward chunk denoised onto the
    real frames it started from; both directions are trained, so it needs p_backward > 0)."""
    cycle_weight: float = 1.0
    """Weight of the cycle term next to the joint loss (objective 'cycle')."""
    cycle_horizon: int = 8
    """T: chunks of a cycle window at the end of the curriculum (objective 'cycle')."""
    cycle_min_real: int = 1
    """p_min: the curriculum keeps p = max(p_min, T // 4^stage) of the T chunks real and imagines the
    other T - p forward before playing them back (stage 0: p = T, no cycle yet)."""
    cycle_stage_steps: int = 2000
    """Training steps per curriculum stage (stage = step // this)."""
    context_noise_max: float = 0.3
    """Training augmentation (not for objective 'teacher'): context latents get Gaussian noise of a
    level drawn uniformly in [0, this] (in units of sigma_data-scaled latents), and the level is given
    to the model, as in GameNGen/DIAMOND, so errors of its own generated context do not compound."""
    context_noise_eval: float = 0.0
    """Context noise level applied (and announced) at generation time."""
    p_backward: float = 0.0
    """Probability that a training window is played backward in time (direction flag -1)."""
    p_single_frame: float = 0.1
    """Probability that a training window's context is its newest frame repeated K times (how a
    rollout starts from one real frame)."""
    self_forcing: float = 0.0
    """Objective 'chained' only (> 0 there, 0 elsewhere): probability that a forward training window's
    context is the model's own rollout instead of real frames: from the real frames
    `self_forcing_chunks`-or-fewer chunks earlier, the model generates (without gradient, with its
    sampling steps) the frames up to the window, driven by the episode's true actions, and learns to
    predict the real target from them. Noise augmentation only imitates its own errors; this shows it
    them (ghost objects, a fading goal, a drifted agent). The motion weights of a self-forced window
    read the real context, not the generated one (see LatentWorldModel.diffusion_loss); fine-tunes
    that weighed by the generated context ruined the model's one-chunk predictions (experiments/)."""
    self_forcing_chunks: int = 2
    """Most chunks a self-forced context is generated over; each batch draws 1 to this many."""
    heads: Literal["keypoints", "conv"] = "keypoints"
    """Architecture of the frame heads (agent_pos, environment_state, success, reward): "keypoints"
    (spatial-softmax keypoints, which locate small objects more precisely) or "conv" (see FrameHeads).
    With `train-wm --stage heads`, a checkpoint's heads of the other kind are replaced by new ones."""
    idm_weight: float = 1.0
    """Weight of the inverse-dynamics loss on real latents."""
    consistency_weight: float = 0.1
    """Weight of forward-inverse consistency: the inverse-dynamics head must recover the actions
    from the denoiser's prediction (gradient flows into the denoiser only)."""
    head_weight: float = 1.0
    """Weight of the frame heads' losses (agent_pos, environment_state, success, reward)."""
    motion_weight: float = 10.0
    """Extra diffusion-loss weight on latent elements that change between the newest context frame
    and the target (the agent, a pushed object): they carry the dynamics but are a small part of a
    frame, and an unweighted loss is minimised well enough by a model that never moves the object.
    This mask depends on the answer, so it biases the optimum towards motion: where an action may or
    may not move the object, "moved" weighs up to 1 + motion_weight times more."""
    context_motion_weight: float = 0.0
    """Extra diffusion-loss weight on the latent cells within motion_reach of anything that moved
    within the context frames. This mask depends on the inputs only, so it keeps the optimum at the
    conditional mean; a context of one repeated frame gets no extra weight."""
    motion_reach: int = 2
    """How many latent cells around a change in the context context_motion_weight reaches (what the
    agent and an object can cover in one chunk)."""
    motion_threshold: float = 0.05
    """|target - newest context frame| (motion_weight) or |newest - older context frames|
    (context_motion_weight) above which a latent element counts as changed (latents have std
    sigma_data per channel)."""

    def __post_init__(self) -> None:
        if self.objective not in ("teacher", "noise", "chained", "cycle"):
            raise ValueError(f"objective must be teacher, noise, chained or cycle, got {self.objective!r}")
        if (self.objective == "chained") != (self.self_forcing > 0):
            raise ValueError("self_forcing is the share of self-forced windows of objective 'chained': set both "
                             f"(got objective {self.objective!r}, self_forcing {self.self_forcing})")
        if self.objective == "cycle" and self.p_backward <= 0:
            raise ValueError("objective 'cycle' trains both directions: set p_backward > 0 (e.g. 0.5)")
        for name in ("context", "chunk", "sampling_steps", "self_forcing_chunks", "cycle_horizon", "cycle_min_real",
                     "cycle_stage_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.memory_frames < 0:
            raise ValueError(f"memory_frames must be >= 0 (0: no memory), got {self.memory_frames}")
        if self.start_map and not self.memory_frames:
            raise ValueError("start_map is a slot of the spatial memory: set memory_frames > 0 with it")
        if self.map_unseen and not self.start_map:
            raise ValueError("map_unseen masks the start map: set start_map with it")
        if self.instruction_buckets is not None and self.instruction_buckets < 0:
            raise ValueError(f"instruction_buckets must be >= 0 (or None: from the data), got {self.instruction_buckets}")
        if self.action_dim is not None and self.action_dim < 1:
            raise ValueError(f"action_dim must be >= 1 (or None: from the data), got {self.action_dim}")
        for name in ("state_dim", "env_state_dim"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (or None: from the data), got {getattr(self, name)}")
        self.channels = tuple(int(c) for c in self.channels)
        if not self.channels or any(c < 8 or c % 8 for c in self.channels):
            raise ValueError(f"channels must be multiples of 8 (GroupNorm groups), got {self.channels}")
        if self.heads not in ("keypoints", "conv"):
            raise ValueError(f"heads must be 'keypoints' or 'conv', got {self.heads!r}")
        if self.motion_reach < 0:
            raise ValueError(f"motion_reach must be >= 0 latent cells, got {self.motion_reach}")
        if self.precision not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be 'float32' or 'bfloat16', got {self.precision!r}")
        if self.prediction not in ("edm", "sample"):
            raise ValueError(f"prediction must be 'edm' or 'sample', got {self.prediction!r}")
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(f"need 0 < sigma_min < sigma_max, got {self.sigma_min}, {self.sigma_max}")
        for name in ("p_backward", "p_single_frame", "self_forcing"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("context_noise_max", "context_noise_eval", "idm_weight", "consistency_weight", "head_weight",
                     "cycle_weight",
                     "motion_weight", "context_motion_weight", "motion_threshold"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class HeadsConfig:
    """The frame heads' own training pass (train-wm's last stage): after the joint stage, the heads
    alone are fine-tuned on every real frame and on frames the model generated itself."""

    labels: Literal["real", "detector"] = "real"
    """Labels of the generated frames: 'real', those of the real frames they stand for; 'detector',
    what each frame shows by the task's object detector (its task probe), so that the success head
    judges the imagined scene itself rather than guess the real one."""
    generated_fraction: float = 0.5
    """Share of each batch that is frames the model generated (open-loop rollouts with the true
    actions); heads trained on real frames alone read success into blurred, drifted imagined frames."""
    generated_windows: int = 2048
    """Random starts the generated frames are rolled out from."""
    generated_chunks: int = 4
    """Most chunks each of those rollouts runs."""
    latent_noise: float = 0.1
    """Real latents get Gaussian noise of a std drawn uniformly in [0, latent_noise]."""
    success_pos_weight: float = 1.0
    """Weight of success frames in the success loss; 0 balances them against the rest (n_neg / n_pos,
    capped at 100). 1 keeps the head's probability calibrated: the learned simulator ends an episode
    on the first frame over 0.5, so false positives are what cost."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.generated_fraction < 1.0:
            raise ValueError(f"generated_fraction must be in [0, 1), got {self.generated_fraction}")
        if self.generated_windows < 1 or self.generated_chunks < 1:
            raise ValueError(f"generated_windows and generated_chunks must be >= 1, got "
                             f"{self.generated_windows}, {self.generated_chunks}")
        if self.latent_noise < 0 or self.success_pos_weight < 0:
            raise ValueError(f"latent_noise and success_pos_weight must be >= 0, got {self.latent_noise}, "
                             f"{self.success_pos_weight}")


@dataclass
class DistillConfig:
    """A few-step student distilled from a multi-step teacher (train-wm's `distill` stage): the student
    starts as a copy of the teacher and learns to produce in `steps` sampling steps what the teacher's
    sampler produces in its own, from the same starting noise, on the training data's windows."""

    teacher: str = "assets:wm/pushcube"
    """The teacher: a world-model checkpoint or run directory (or `assets:wm/...`, a shipped one)."""
    steps: int = 1
    """Euler sampling steps of the student (1 or 2: what makes it fast); they become its default."""
    teacher_steps: int = 0
    """Sampling steps of the teacher's targets (0: the teacher's own default)."""
    student: str = ""
    """Start the student from this checkpoint (an earlier student of the same teacher, to go on with
    other settings) instead of a copy of the teacher; '' for the copy."""
    own_contexts: float = 0.0
    """Share of windows whose context the student imagines itself, rolled `own_chunks` chunks (no
    gradient) from the real frames before the window with the recorded actions: the teacher is then
    asked what follows the contexts the student's own closed loop reaches, which real contexts never
    show it (its drift compounds over a long rollout; DAgger's argument). 0: real contexts only."""
    own_chunks: int = 2
    """Chunks the student imagines to make its own contexts (the context must be imagined through:
    own_chunks * chunk >= context)."""

    def __post_init__(self) -> None:
        if not self.teacher:
            raise ValueError("distill.teacher must name a world-model checkpoint")
        if self.steps < 1 or self.teacher_steps < 0:
            raise ValueError(f"distill.steps must be >= 1 and teacher_steps >= 0, got {self.steps}, {self.teacher_steps}")
        if not 0 <= self.own_contexts <= 1 or self.own_chunks < 1:
            raise ValueError(f"distill.own_contexts must be in [0, 1] and own_chunks >= 1, got {self.own_contexts}, "
                             f"{self.own_chunks}")


def camera_names(camera: str) -> tuple[str, ...]:
    """A world model's camera field -> its cameras in stacking order ('front+wrist' -> ('front', 'wrist'))."""
    names = tuple(camera.split("+")) if camera else ()
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"camera must name distinct cameras joined by '+', got {camera!r}")
    return names
