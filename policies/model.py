"""Action-chunk policies: one observation encoder, one action head with a generator mode.

    policy = ChunkPolicy(PolicyConfig(kind="flow", cameras=("top",)), dims={"action": 2, "agent_pos": 2,
                         "environment_state": 6}, stats=compute_stats(episodes, False))
    loss, logs = policy(batch)                      # training, batch from WindowDataset
    chunk = policy.predict_action_chunk(obs)        # (B, H, A) env actions

Encoder (`policies/encoders.py`): per camera a small stride-2 CNN -> feature; `agent_pos` (and
optionally the privileged `environment_state`) through an MLP; an optional task-embedding slot; all
concatenated into one conditioning vector `cond` (B, C).

Action head (`ActionHead`, mode = "flow" or "diffusion") is one MLP denoiser
`net(x_t, t, cond) -> (B, H, A)` in the normalised action space [-1, 1]:
- flow (pi0-style): t ~ Beta(1.5, 1), x_t = t * noise + (1 - t) * a, target u = noise - a;
  sampling integrates dx/dt = net from t = 1 (noise) to 0 with Euler steps.
- diffusion (Diffusion Policy-style): a diffusers DDPMScheduler adds noise at a random timestep,
  target = noise (epsilon prediction) or the clean chunk (prediction_type="sample"); sampling runs
  a DDIMScheduler (eta = 0, deterministic).
The head takes `cond` from outside, so a second head (failure guidance) can share the encoder,
`sample(..., guide=fn)` lets a caller adjust each step's prediction, and `loss(..., weight=w)`
takes per-sample weights (advantage weighting): the batch loss is mean_b(w_b * loss_b).

diffusers is imported at the top on purpose: importing it (it loads triton's libtriton) after a
MuJoCo EGL context exists segfaults on our machines (Mesa's LLVM and triton's clash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import DDIMScheduler, DDPMScheduler
from torch import nn

from wmsuite.policies.config import PolicyConfig
from wmsuite.policies.encoders import ObsEncoder, random_shift, time_embedding
from wmsuite.policies.guidance import failure_guide
from wmsuite.policies.normalize import Normalizer
from wmsuite.policies.vla.model import VLADenoiser, VLAPrefix, instruction_tokens
from wmsuite.policies.weighting import Critics
from wmsuite.policy import ChunkQueue

Guide = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class ActionHead(nn.Module):
    """Denoiser MLP over a flattened chunk with a generator `mode` ("flow" or "diffusion")."""

    TIME_DIM = 64

    def __init__(self, cfg: PolicyConfig, action_dim: int, cond_dim: int, denoiser: nn.Module | None = None) -> None:
        super().__init__()
        self.mode, self.horizon, self.action_dim = cfg.kind, cfg.horizon, action_dim
        self.cfg = cfg
        # the denoiser: an MLP on [chunk | cond | time], or a module `denoiser(x, t in [0, 1000], cond)`
        # that reads cond its own way (the VLA's prefix tokens) and takes N candidate chunks (B, N, H, A)
        self.backbone = denoiser
        if denoiser is None:
            self.time_mlp = nn.Sequential(nn.Linear(self.TIME_DIM, 128), nn.Mish(), nn.Linear(128, 128))
            width = cfg.horizon * action_dim
            layers: list[nn.Module] = [nn.Linear(width + cond_dim + 128, cfg.hidden_dim), nn.Mish()]
            for _ in range(cfg.head_layers - 1):
                layers += [nn.Linear(cfg.hidden_dim, cfg.hidden_dim), nn.Mish()]
            layers.append(nn.Linear(cfg.hidden_dim, width))
            self.net = nn.Sequential(*layers)
        self._ddim = None
        if self.mode == "diffusion":
            self.ddpm = DDPMScheduler(num_train_timesteps=cfg.num_train_timesteps, beta_schedule=cfg.beta_schedule,
                                      clip_sample=True, prediction_type=cfg.prediction_type)

    def denoise(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor, with_features: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """x (B, H, A), t (B,) flow time in [0, 1] or diffusion timestep, cond (B, C) -> (B, H, A);
        with_features, also the observation's feature vector (B, F) from the same pass (what
        `ChunkPolicy.features` computes: cond itself, or the VLA's pooled prefix outputs)."""
        scale = 1000.0 if self.mode == "flow" else 1000.0 / self.cfg.num_train_timesteps
        if self.backbone is not None:
            return self.backbone(x, t * scale, cond, with_features=with_features)
        temb = self.time_mlp(time_embedding(t * scale, self.TIME_DIM))  # (B, 128)
        out = self.net(torch.cat([x.flatten(1), cond, temb], dim=-1)).view(-1, self.horizon, self.action_dim)
        return (out, cond) if with_features else out

    def loss(self, cond: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None,
             weight: torch.Tensor | None = None, generator: torch.Generator | None = None,
             with_features: bool = False) -> tuple[torch.Tensor, ...]:
        """cond (B, C), actions (B, H, A) in [-1, 1], mask (B, H) True where real (not padding),
        weight (B,) per-sample weights. Returns (mean_b(w_b * loss_b), per-sample loss (B,)), and with
        `with_features` the denoising pass's feature vector (B, F) third (see `denoise`), so an
        auxiliary loss on it costs no second pass through a VLA's blocks."""
        b = actions.shape[0]
        noise = torch.randn(actions.shape, generator=generator, device=actions.device)
        if self.mode == "flow":
            t = _beta_sample(self.cfg.beta_alpha, self.cfg.beta_beta, b, generator, actions.device)
            t = t * 0.999 + 0.001  # (B,) never exactly 0
            x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
            target = noise - actions
            pred = self.denoise(x_t, t, cond, with_features)
        else:
            steps = torch.randint(0, self.cfg.num_train_timesteps, (b,), generator=generator, device=actions.device)
            x_t = self.ddpm.add_noise(actions, noise, steps)
            target = noise if self.cfg.prediction_type == "epsilon" else actions
            pred = self.denoise(x_t, steps, cond, with_features)
        feats = None
        if with_features:
            pred, feats = pred
        err = (pred - target).pow(2).mean(-1)  # (B, H)
        if mask is None:
            per_sample = err.mean(-1)
        else:
            m = mask.float()
            per_sample = (err * m).sum(-1) / m.sum(-1).clamp_min(1.0)  # (B,)
        if weight is not None:
            weight = weight.to(per_sample)
            if weight.shape != (b,):
                raise ValueError(f"weight must have shape ({b},), got {tuple(weight.shape)}")
        loss = per_sample.mean() if weight is None else (weight * per_sample).mean()
        return (loss, per_sample, feats) if with_features else (loss, per_sample)

    @torch.no_grad()
    def sample(self, cond: torch.Tensor, noise: torch.Tensor, steps: int | None = None,
               guide: Guide | None = None) -> torch.Tensor:
        """cond (B, C), noise (B, H, A) -> chunk (B, H, A) in the normalised action space.

        `guide(x_t, t, pred) -> pred` may adjust each step's velocity/epsilon (failure guidance)."""
        steps = steps or self.cfg.num_inference_steps
        x = noise
        b = x.shape[0]
        if self.mode == "flow":
            dt = -1.0 / steps
            for i in range(steps):
                t = torch.full((b,), 1.0 + i * dt, device=x.device)
                v = self.denoise(x, t, cond)
                if guide is not None:
                    v = guide(x, t, v)
                x = x + dt * v
            return x
        sched = self._ddim_scheduler()
        sched.set_timesteps(steps, device=x.device)
        for t in sched.timesteps:
            tb = torch.full((b,), int(t), device=x.device, dtype=torch.long)
            eps = self.denoise(x, tb, cond)
            if guide is not None:
                eps = guide(x, tb, eps)
            x = sched.step(eps, t, x).prev_sample
        return x

    def _ddim_scheduler(self):
        if self._ddim is None:
            self._ddim = DDIMScheduler.from_config(self.ddpm.config)
        return self._ddim


def _beta_sample(a: float, b: float, n: int, generator: torch.Generator | None, device: Any) -> torch.Tensor:
    """Beta(a, b) draws from a seeded generator: X/(X+Y) with X ~ Gamma(a), Y ~ Gamma(b)."""
    x = torch._standard_gamma(torch.full((n,), a), generator=generator)
    y = torch._standard_gamma(torch.full((n,), b), generator=generator)
    return (x / (x + y)).to(device)


class ChunkPolicy(nn.Module):
    """A trainable policy with the wmsuite contract (see wmsuite/policy.py).

    dims: {"action": A, "agent_pos": D, "environment_state": E}; stats: see policies/normalize.py.
    """

    def __init__(self, cfg: PolicyConfig, dims: dict[str, int], stats: dict[str, Any]) -> None:
        super().__init__()
        if cfg.cameras is None:
            raise ValueError("PolicyConfig.cameras is None; name the cameras the policy reads (() for none)")
        self.cfg = cfg
        self.dims = {k: int(v) for k, v in dims.items()}
        self.normalizer = Normalizer(stats, cfg.reads_env_state, self.dims)
        low_dim = self.dims["agent_pos"] + (self.dims["environment_state"] if cfg.use_env_state else 0)
        if cfg.backbone == "vla":  # cond is the prefix tokens (B, P, C); the head's denoiser is the transformer
            self.encoder = VLAPrefix(cfg, low_dim)
            self.head = ActionHead(cfg, self.dims["action"], 0, denoiser=VLADenoiser(cfg, self.dims["action"]))
        else:
            self.encoder = ObsEncoder(cfg, low_dim)
            self.head = ActionHead(cfg, self.dims["action"], self.encoder.out_dim)
        # failure guidance and HABC's critics share the encoder (policies/guidance.py, weighting.py)
        self.fail_head = ActionHead(cfg, self.dims["action"], self.encoder.out_dim) if cfg.failure_head else None
        feature_dim = cfg.vla_dim if cfg.backbone == "vla" else self.encoder.out_dim
        self.critics = Critics(feature_dim, cfg.horizon * self.dims["action"]) if cfg.critics else None
        # training only: the features predict the environment state (PolicyConfig.aux_state_weight)
        self.aux_state = nn.Linear(feature_dim, self.dims["environment_state"]) if cfg.aux_state_weight else None
        self.n_action_steps = cfg.n_action_steps
        self._queue = ChunkQueue(cfg.n_action_steps)

    # ---- the Policy contract -------------------------------------------------------------
    def reset(self) -> None:
        self._queue.reset()

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        """(B, A) next action, re-planning every `n_action_steps` steps."""
        return self._queue.pop(self.predict_action_chunk, obs)

    @torch.no_grad()
    def predict_action_chunk(self, obs: dict[str, Any], noise: torch.Tensor | None = None,
                             generator: torch.Generator | None = None, num_inference_steps: int | None = None,
                             guide: Guide | None = None) -> torch.Tensor:
        """obs (batched env observations, numpy or torch) -> (B, H, A) env actions (float32 tensor).

        `noise` (B, H, A) fixes the generator's starting point (same noise -> same chunk). A policy
        with a failure head steers each step away from it (guidance_scale) unless `guide` is given."""
        was_training = self.training
        self.eval()
        try:
            cond = self.encode(obs)  # (B, C)
            b = cond.shape[0]
            shape = (b, self.cfg.horizon, self.dims["action"])
            if noise is None:
                noise = torch.randn(shape, generator=generator, device=cond.device)
            elif tuple(noise.shape) != shape:
                raise ValueError(f"noise must have shape {shape}, got {tuple(noise.shape)}")
            if guide is None and self.fail_head is not None and self.cfg.guidance_scale > 0:
                guide = failure_guide(self.fail_head, cond, self.cfg.guidance_scale)
            unit = self.head.sample(cond, noise.to(cond), num_inference_steps, guide)  # (B, H, A)
            return self.normalizer.action_from_unit(unit.clamp(-1.0, 1.0))
        finally:
            self.train(was_training)

    def features(self, cond: torch.Tensor) -> torch.Tensor:
        """`encode`'s output -> (B, F) one vector per observation, what the critics read: the encoder's
        vector itself, or a VLA's prefix run through its blocks alone and averaged over tokens."""
        return self.head.backbone.prefix_features(cond) if self.head.backbone is not None else cond

    @torch.no_grad()
    def sample_candidates(self, obs: dict[str, Any], candidates: int, generator: torch.Generator | None = None,
                          num_inference_steps: int | None = None) -> torch.Tensor:
        """N candidate chunks per observation, (B, N, H, A) env actions: the observation is encoded once;
        a VLA runs the N chunks after its one prefix through the shared-prefix op."""
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates}")
        was_training = self.training
        self.eval()
        try:
            cond = self.encode(obs)  # (B, C) or the VLA's (B, P, C)
            b = cond.shape[0]
            noise = torch.randn((b, candidates, self.cfg.horizon, self.dims["action"]), generator=generator,
                                device=cond.device)
            if self.head.backbone is not None:
                unit = self.head.sample(cond, noise, num_inference_steps)  # (B, N, H, A)
            else:
                many = cond.repeat_interleave(candidates, dim=0)  # row b's candidates are rows b*N .. b*N + N-1
                unit = self.head.sample(many, noise.flatten(0, 1), num_inference_steps).view(noise.shape)
            return self.normalizer.action_from_unit(unit.clamp(-1.0, 1.0))
        finally:
            self.train(was_training)

    def forward(self, batch: dict[str, Any], weight: torch.Tensor | None = None,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """Training loss on a WindowDataset batch (context = 1, future = 0):
        context_frames[cam] (B, 1, 3, S, S) uint8, context_state (B, 1, D), context_env_state (B, 1, E),
        actions (B, H, A), action_is_pad (B, H). `weight` (B,) (or batch["weight"]) weights samples."""
        dev = self.device
        obs = self.batch_obs(batch)
        if "task_embedding" in batch:
            obs["task_embedding"] = batch["task_embedding"].to(dev)
        cond = self.encode(obs, channels_first=True, augment=self.training)
        actions = self.normalizer.action_to_unit(batch["actions"].to(dev))  # (B, H, A)
        mask = ~batch["action_is_pad"].to(dev) if "action_is_pad" in batch else None
        if weight is None and "weight" in batch:
            weight = batch["weight"]
        loss, per_sample, *feats = self.head.loss(cond, actions, mask, weight, generator,
                                                  with_features=self.aux_state is not None)
        logs = {"loss_unweighted": float(per_sample.detach().mean())}
        loss = self.add_aux_state(loss, cond, obs["environment_state"], logs, *feats)
        return loss, {"loss": float(loss.detach()), **logs}

    def add_aux_state(self, loss: torch.Tensor, cond: torch.Tensor, env_state: torch.Tensor,
                      logs: dict[str, float], features: torch.Tensor | None = None) -> torch.Tensor:
        """`loss` plus aux_state_weight x the MSE of the features' prediction of the standardised
        environment state (B, E), logged unweighted as logs['loss/aux_state']; `loss` itself without the head.
        `features` (B, F): `self.features(cond)` if already computed (ActionHead.loss(with_features=True))."""
        if self.aux_state is None:
            return loss
        target = self.normalizer.standardize("environment_state", env_state.to(cond.device).float())  # (B, E)
        aux = F.mse_loss(self.aux_state(self.features(cond) if features is None else features), target)
        logs["loss/aux_state"] = float(aux.detach())
        return loss + self.cfg.aux_state_weight * aux

    def batch_obs(self, batch: dict[str, Any], part: str = "context") -> dict[str, Any]:
        """A WindowDataset batch's last `part` ('context' or 'future') observation, channels first,
        on the policy's device: what `encode(..., channels_first=True)` takes."""
        dev = self.device
        obs = {"pixels": {cam: batch[f"{part}_frames"][cam][:, -1].to(dev) for cam in self.cfg.cameras},
               "agent_pos": batch[f"{part}_state"][:, -1].to(dev),
               "environment_state": batch[f"{part}_env_state"][:, -1].to(dev)}
        if "task" in batch:  # each window's instruction (WindowDataset), for a policy that reads it
            obs["task"] = list(batch["task"])
        return obs

    # ---- observation encoding ------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, obs: dict[str, Any], channels_first: bool = False, augment: bool = False) -> torch.Tensor:
        """Batched observation -> (B, C). Pixels are (B, S, S, 3) uint8 (env layout) or, with
        channels_first, (B, 3, S, S) uint8 (dataset layout)."""
        dev = self.device
        images = {}
        for cam in self.cfg.cameras:
            if cam not in obs.get("pixels", {}):
                raise KeyError(f"observation lacks camera {cam!r}; this policy reads cameras {list(self.cfg.cameras)}")
            img = torch.as_tensor(np.asarray(obs["pixels"][cam]) if not torch.is_tensor(obs["pixels"][cam])
                                  else obs["pixels"][cam], device=dev)
            if not channels_first:
                img = img.permute(0, 3, 1, 2)  # (B, S, S, 3) -> (B, 3, S, S)
            img = img.float() / 127.5 - 1.0
            if img.shape[-1] != self.cfg.image_size or img.shape[-2] != self.cfg.image_size:
                img = F.interpolate(img, size=(self.cfg.image_size, self.cfg.image_size), mode="area")
            if augment:
                img = random_shift(img, max(1, self.cfg.image_size // 16))
            images[cam] = img
        low = [self.normalizer.standardize("agent_pos", _tensor(obs["agent_pos"], dev))]
        if self.cfg.use_env_state:
            if "environment_state" not in obs:
                raise KeyError("this policy conditions on obs['environment_state'] (use_env_state=True)")
            low.append(self.normalizer.standardize("environment_state", _tensor(obs["environment_state"], dev)))
        if self.cfg.backbone == "vla":
            if obs.get("task") is None:
                raise KeyError("this VLA policy reads the task instruction: obs['task'] must hold one string per row "
                               "(the rollout engine passes each env's info['task'])")
            words = instruction_tokens(obs["task"], self.cfg.instruction_bytes).to(dev)  # (B, W)
            return self.encoder(images, torch.cat(low, -1), words)  # (B, P, C)
        task = obs.get("task_embedding")
        return self.encoder(images, torch.cat(low, -1), None if task is None else _tensor(task, dev))


def _tensor(x: Any, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=torch.float32, device=device)
