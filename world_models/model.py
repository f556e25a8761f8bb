"""`LatentWorldModel`: action-conditioned autoregressive video diffusion in a frame codec's latent space.

One world-model step maps K context latent frames and a chunk of H actions to the H latent frames
those actions produce (one frame per action). Pieces, all trained jointly by `loss`:

    codec       frames (3, S, S) uint8 <-> latents (C, s, s)                 (codec.py; trained first)
    denoiser    diffusers UNet2DModel on [noisy target (H*C) | context (K*C) | memory (M*(C+1))] channels, EDM
                preconditioning and few-step Euler sampling from diffusers' EDMEulerScheduler; latent
                sides its halvings do not divide are padded (edge repeated) and cropped back
    cond        MLP of (action chunk, direction one-hot, context-noise level) -> a vector added to
                the UNet's timestep embedding (class_embed_type="identity"), so continuous actions
                enter the conditioning as the timestep does, never as tiled pixels; with
                cfg.instruction_buckets, the MLP also reads the mean embedding of the task
                instruction's hashed words (`instruction_tokens`: one model for several tasks, as
                LIBERO's files hold), an input like the actions so that the MLP can amplify it
    direction   +1 forward / -1 backward in time: backward windows are the same windows played in
                reverse (context = later frames, target = earlier frames, actions reversed)
    heads       a small CNN on one latent frame -> agent_pos, environment_state, success logit, reward (heads.py)
    memory      with cfg.memory_frames M > 0, M past frames the spatial memory retrieved, reprojected
                into the camera the chunk heads for, a mask channel each (world_models/latent_memory.py);
                zeros where none (and for backward windows); with cfg.start_map one slot more, last:
                the map camera's start frame redrawn there (latent_memory.map_slot)
    idm         inverse dynamics: (previous latent, H next latents) -> the H actions between them;
                forward-inverse consistency asks it to recover the actions from the denoiser's output

Shapes: B batch, K context, H chunk, A action size, C latent channels, s latent side.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import EDMEulerScheduler, UNet2DModel
from torch import nn
from torch.func import functional_call

from wmsuite.world_models.codec import FrameCodec, make_codec
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.heads import FrameHeads, InverseDynamics

FORWARD, BACKWARD = 1, -1
_NOISE_SCALE = 1000.0  # c_noise = log(sigma)/4 spans ~2 units; the UNet's sinusoidal embedding wants ~1000s
INSTRUCTION_WORDS = 32  # words of an instruction the model reads; the rest are dropped
INSTRUCTION_DIM = 32  # width of an instruction's embedding, an input of the conditioning MLP


def instruction_tokens(texts: Sequence[str], buckets: int) -> torch.Tensor:
    """Task instructions -> (B, INSTRUCTION_WORDS) int64 word ids in 1..buckets (crc32 of each
    lower-case word), 0 for padding: a fixed hash, so an instruction never seen in training still
    shares the words it has with those that were."""
    out = torch.zeros((len(texts), INSTRUCTION_WORDS), dtype=torch.int64)
    for i, text in enumerate(texts):
        words = re.findall(r"[a-z0-9]+", text.lower())[:INSTRUCTION_WORDS]
        out[i, : len(words)] = torch.tensor([zlib.crc32(w.encode()) % buckets + 1 for w in words], dtype=torch.int64)
    return out


class LatentWorldModel(nn.Module):
    """See the module docstring. `stats` holds normalisation statistics of agent_pos and
    environment_state ({"state_mean", "state_std", "env_state_mean", "env_state_std"}: lists)."""

    def __init__(self, cfg: WorldModelConfig, codec_cfg: CodecConfig, stats: dict[str, list[float]]) -> None:
        super().__init__()
        unset = [k for k in ("action_dim", "state_dim", "env_state_dim") if getattr(cfg, k) is None]
        if unset:
            raise ValueError(f"WorldModelConfig leaves {unset} unset; size them from the data (train-wm does)")
        self.cfg, self.codec_cfg = cfg, codec_cfg
        self.codec: FrameCodec = make_codec(codec_cfg, cfg.sigma_data)
        c, s, k, h, a = self.codec.latent_channels, self.codec.latent_size, cfg.context, cfg.chunk, cfg.action_dim
        n = len(cfg.channels)
        self.unet_pad = -s % 2 ** (n - 1)  # latent sides the UNet's n - 1 halvings need: pad, then crop
        down = ("DownBlock2D",) + (("AttnDownBlock2D",) if cfg.attention else ("DownBlock2D",)) * (n - 1)
        up = (("AttnUpBlock2D",) if cfg.attention else ("UpBlock2D",)) * (n - 1) + ("UpBlock2D",)
        self.memory_channels = (cfg.memory_frames + int(cfg.start_map)) * (c + 1)
        self.denoiser = UNet2DModel(
            sample_size=s + self.unet_pad, in_channels=(h + k) * c + self.memory_channels, out_channels=h * c, block_out_channels=cfg.channels,
            layers_per_block=1, down_block_types=down, up_block_types=up, class_embed_type="identity",
            # FiLM (scale and shift after the norm): with the default additive embedding, the GroupNorm
            # that follows removes most of a per-channel offset, and the actions barely condition the
            # output (a tiny model trained that way ignored its actions and direction flag).
            resnet_time_scale_shift="scale_shift", norm_num_groups=8, attention_head_dim=32,
            add_attention=cfg.attention,
        )
        temb = cfg.channels[0] * 4  # UNet2DModel's time-embedding width
        words_dim = INSTRUCTION_DIM if cfg.instruction_buckets else 0
        self.cond = nn.Sequential(nn.Linear(h * a + 2 + 1 + words_dim, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.instruction = None  # (B, INSTRUCTION_WORDS) word ids -> (B, INSTRUCTION_DIM), into cond
        if cfg.instruction_buckets:
            self.instruction = nn.EmbeddingBag(cfg.instruction_buckets + 1, words_dim, mode="mean", padding_idx=0)
        self.heads = FrameHeads(c, s, cfg.state_dim, cfg.env_state_dim, cfg.heads)
        self.idm = InverseDynamics(c, s, h, a)
        self.scheduler = EDMEulerScheduler(sigma_min=cfg.sigma_min, sigma_max=cfg.sigma_max,
                                           sigma_data=cfg.sigma_data, prediction_type="epsilon")
        for key in ("state", "env_state"):
            dim = cfg.state_dim if key == "state" else cfg.env_state_dim
            mean, std = stats.get(f"{key}_mean"), stats.get(f"{key}_std")
            if mean is None or std is None or len(mean) != dim or len(std) != dim:
                raise ValueError(f"stats must hold {key}_mean and {key}_std of length {dim}; got {stats}")
            self.register_buffer(f"{key}_mean", torch.tensor(mean, dtype=torch.float32))
            self.register_buffer(f"{key}_std", torch.tensor(std, dtype=torch.float32).clamp_min(1e-6))

    # ------------------------------------------------------------------ the denoiser
    def denoise(self, noisy: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor, actions: torch.Tensor,
                direction: torch.Tensor, context_noise: torch.Tensor,
                instruction: torch.Tensor | None = None, memory: torch.Tensor | None = None) -> torch.Tensor:
        """Denoiser D(x; sigma): EDM preconditioning, or the clean frame itself (cfg.prediction).

        noisy (B, H, C, s, s), sigma (B,), context (B, K, C, s, s), actions (B, H, A), direction (B,) of
        +1/-1, context_noise (B,) the noise level already added to the context, instruction (B, W)
        word ids (`instruction_tokens`; None or a model without instructions: none), memory (B, M, C+1,
        s, s) (memory.reproject; None: none retrieved, zeros) -> (B, H, C, s, s).
        """
        b = noisy.shape[0]
        sig = sigma.view(b, 1, 1, 1)
        x_in = self.scheduler.precondition_inputs(noisy.flatten(1, 2), sig)  # (B, H*C, s, s)
        c_noise = self.scheduler.precondition_noise(sigma) * _NOISE_SCALE  # (B,)
        onehot = torch.stack([direction > 0, direction < 0], dim=1).to(actions.dtype)  # (B, 2)
        inputs = [actions.flatten(1), onehot, context_noise[:, None]]
        if self.instruction is not None:  # no instruction given: the embedding of no words, zeros
            words = instruction if instruction is not None else torch.zeros((b, 1), dtype=torch.int64)
            inputs.append(self.instruction(words.to(actions.device)).to(actions.dtype))  # (B, INSTRUCTION_DIM)
        cond = self.cond(torch.cat(inputs, dim=1))  # (B, temb)
        parts = [x_in, context.flatten(1, 2)]  # (B, H*C, s, s), (B, K*C, s, s)
        if self.memory_channels:
            parts.append(memory.flatten(1, 2).to(x_in.dtype) if memory is not None
                         else x_in.new_zeros((b, self.memory_channels, *x_in.shape[-2:])))
        unet_in = torch.cat(parts, dim=1)  # (B, (H+K)*C + M*(C+1), s, s)
        if self.unet_pad:  # the last latent row and column repeated, as the codec pads frames
            unet_in = F.pad(unet_in, (0, self.unet_pad, 0, self.unet_pad), mode="replicate")
        s = noisy.shape[-1]
        out = self.denoiser(unet_in, c_noise, class_labels=cond).sample[..., :s, :s]  # (B, H*C, s, s)
        if self.cfg.prediction == "sample":
            return (self.cfg.sigma_data * out).view_as(noisy)
        denoised = self.scheduler.precondition_outputs(noisy.flatten(1, 2), out, sig)  # (B, H*C, s, s)
        return denoised.view_as(noisy)

    def _loss_weight(self, sigma: torch.Tensor) -> torch.Tensor:
        """1 / c_out^2: the weight that makes the loss on the UNet's own output uniform over sigma."""
        sd = self.cfg.sigma_data
        if self.cfg.prediction == "sample":
            return torch.full_like(sigma, 1.0 / sd**2)
        return (sigma**2 + sd**2) / (sigma * sd) ** 2

    @torch.no_grad()
    def generate(self, context: torch.Tensor, actions: torch.Tensor, direction: int = FORWARD,
                 steps: int | None = None, generator: torch.Generator | None = None,
                 instruction: torch.Tensor | None = None, memory: torch.Tensor | None = None) -> torch.Tensor:
        """Sample the H latent frames that `actions` (B, H, A) produce after `context` (B, K, C, s, s)
        (and `instruction` (B, W), `memory` (B, M, C+1, s, s), see `denoise`): `sample` from Gaussian
        noise drawn from `generator` (after the context noise, if any)."""
        b = context.shape[0]
        h, c, s = self.cfg.chunk, self.codec.latent_channels, self.codec.latent_size
        if self.cfg.context_noise_eval > 0:
            noise = torch.randn(context.shape, generator=generator, device=context.device)
            context = context + self.cfg.context_noise_eval * noise
        noise = torch.randn((b, h, c, s, s), generator=generator, device=context.device)
        with self._inference():
            return self.sample(context, actions, noise, direction, steps, instruction, memory).float()

    def _inference(self) -> torch.autocast:
        """bfloat16 autocast of generation and the heads where cfg.precision asks for it; never where
        gradients flow (training and distillation stay in float32)."""
        on = self.cfg.precision == "bfloat16" and not torch.is_grad_enabled()
        return torch.autocast(self.state_mean.device.type, dtype=torch.bfloat16, enabled=on)

    def sample(self, context: torch.Tensor, actions: torch.Tensor, noise: torch.Tensor, direction: int = FORWARD,
               steps: int | None = None, instruction: torch.Tensor | None = None,
               memory: torch.Tensor | None = None) -> torch.Tensor:
        """The sampler as a function of its starting noise (B, H, C, s, s) at unit scale: few-step Euler
        from sigma_max with diffusers' EDMEulerScheduler (Karras sigmas), deterministic given `noise`,
        and differentiable (a distilled student trains through it). context (B, K, C, s, s) as the
        model sees it (any context noise already added), actions (B, H, A) -> (B, H, C, s, s)."""
        b = context.shape[0]
        ctx_noise = torch.full((b,), self.cfg.context_noise_eval, device=context.device)
        base = context[:, -1:] if self.cfg.residual else 0.0  # (B, 1, C, s, s): the newest clean frame
        dirs = torch.full((b,), direction, device=context.device)
        scheduler = self.scheduler
        scheduler.set_timesteps(steps or self.cfg.sampling_steps, device=context.device)
        sigmas = scheduler.sigmas.to(torch.float32)
        x = noise * sigmas[0]
        for i, t in enumerate(scheduler.timesteps):
            sigma = sigmas[i].expand(b)
            denoised = self.denoise(x, sigma, context, actions, dirs, ctx_noise, instruction, memory)
            scheduler.is_scale_input_called = True  # denoise() applied the EDM input scaling itself
            x = scheduler.step(denoised.flatten(1, 2), t, x.flatten(1, 2),
                               pred_original_sample=denoised.flatten(1, 2)).prev_sample.view_as(x)
        return x + base

    # ------------------------------------------------------------------ heads
    def predict_heads(self, latents: torch.Tensor) -> dict[str, torch.Tensor]:
        """latents (..., C, s, s) -> agent_pos (..., D), environment_state (..., E) in their own units,
        success_logit (...), reward (...)."""
        lead = latents.shape[:-3]
        with self._inference():
            out = {k: v.float() for k, v in self.heads(latents.reshape(-1, *latents.shape[-3:])).items()}
        return {
            "agent_pos": (out["state"] * self.state_std + self.state_mean).view(*lead, -1),
            "environment_state": (out["env_state"] * self.env_state_std + self.env_state_mean).view(*lead, -1),
            "success_logit": out["success_logit"].view(lead),
            "reward": out["reward"].view(lead),
        }

    def replace_heads(self, kind: str) -> None:
        """New, untrained frame heads of architecture `kind` (WorldModelConfig.heads), e.g. to train
        better heads on a trained dynamics model (`train-wm --stage heads --heads-kind ...`)."""
        self.cfg = replace(self.cfg, heads=kind)
        c, s = self.codec.latent_channels, self.codec.latent_size
        device = self.state_mean.device
        self.heads = FrameHeads(c, s, self.cfg.state_dim, self.cfg.env_state_dim, kind).to(device)

    def inverse_dynamics(self, previous: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """previous (B, C, s, s), frames (B, H, C, s, s) -> the actions between them (B, H, A)."""
        with self._inference():
            return self.idm(torch.cat([previous[:, None], frames], dim=1)).float()

    def compile_inference(self, dynamic: bool | None = None) -> None:
        """torch.compile the denoiser, frame heads and inverse dynamics in place (nn.Module.compile: the
        state dict keeps its keys). The first call at each new input shape compiles (seconds to a
        minute on a CPU), later ones run fused kernels: worth it for long rollouts and benchmarks, not
        for a short evaluation. Results differ from eager ones in the last bits. `dynamic`:
        torch.compile's (False: one graph per batch size, as a benchmark at fixed sizes wants)."""
        for module in (self.denoiser, self.heads, self.idm):
            module.compile(dynamic=dynamic)

    # ------------------------------------------------------------------ training
    def motion_weights(self, context: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The diffusion loss's per-element weight: 1, plus motion_weight where the target changed from
        the newest context frame, plus context_motion_weight near what moved within the context.
        context (B, K, C, s, s) clean, target (B, H, C, s, s) -> (B, H, C, s, s)."""
        cfg = self.cfg
        newest = context[:, -1:]  # (B, 1, C, s, s)
        changed = ((target - newest).abs() > cfg.motion_threshold).float()  # (B, H, C, s, s): depends on the answer
        moved = ((newest - context).abs() > cfg.motion_threshold).flatten(1, 2).any(1, keepdim=True)  # (B, 1, s, s)
        r = cfg.motion_reach
        near = F.max_pool2d(moved.float(), 2 * r + 1, stride=1, padding=r)[:, :, None]  # (B, 1, 1, s, s): inputs only
        return 1 + cfg.motion_weight * changed + cfg.context_motion_weight * near

    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Joint loss on a batch of latent windows (see `latent_batch` in train.py):

            context (B, K, C, s, s)   future (B, H+K-1, C, s, s)   actions (B, H, A)
            action_is_pad (B, H)      future_is_pad (B, H+K-1)     future_state (B, H, D)
            future_env_state (B, H, E)  reached_success (B, H)     rewards (B, H)

        and, for self forcing (objective 'chained'), the R chunks before the window:
            history (B, K, C, s, s)   history_actions (B, R*H, A)  history_valid (B,)
        (the cycle term of objective 'cycle' is objectives.cycle_loss, added by objectives.dynamics_loss),
        and, for a model with instructions, instruction (B, W) word ids (`instruction_tokens`); for a
        model with memory, memory (B, M, C+1, s, s) (data.LatentWindows; zeroed for backward windows,
        whose newest context frame is not the one it was reprojected into).
        """
        cfg = self.cfg
        real_ctx, fut, act = batch["context"], batch["future"], batch["actions"]
        b, k, h = real_ctx.shape[0], cfg.context, cfg.chunk
        dev = real_ctx.device
        target_pad = batch["future_is_pad"][:, :h]  # (B, H)
        # Direction: backward windows play the same frames in reverse.
        backward = torch.rand(b, device=dev) < cfg.p_backward  # (B,)
        ctx = real_ctx
        if cfg.self_forcing > 0 and "history" in batch:
            use = (torch.rand(b, device=dev) < cfg.self_forcing) & batch["history_valid"] & ~backward  # (B,)
            ctx = self._self_forced_context(real_ctx, batch["history"], batch["history_actions"], use,
                                            batch.get("instruction"))
        bwd_ctx = fut[:, h - 1 : h - 1 + k].flip(1)  # frames t+H+K-1 .. t+H: newest last in reversed time
        bwd_tgt = torch.cat([real_ctx[:, -1:], fut[:, : h - 1]], dim=1).flip(1)  # frames t+H-1 .. t
        bwd_pad = torch.cat([torch.zeros_like(target_pad[:, :1]), target_pad[:, : h - 1]], 1).flip(1)
        sel = backward.view(b, 1, 1, 1, 1)
        context = torch.where(sel, bwd_ctx, ctx)
        real_context = torch.where(sel, bwd_ctx, real_ctx)  # what the motion weights read: never self-forced
        target = torch.where(sel, bwd_tgt, fut[:, :h])
        actions = torch.where(backward.view(b, 1, 1), act.flip(1), act)
        pad = torch.where(backward.view(b, 1), bwd_pad, target_pad)  # (B, H)
        direction = torch.where(backward, BACKWARD, FORWARD)
        # A rollout starts from one real frame repeated K times: train on that case too.
        single = (torch.rand(b, device=dev) < cfg.p_single_frame).view(b, 1, 1, 1, 1)
        context = torch.where(single, context[:, -1:].expand_as(context), context)
        real_context = torch.where(single, real_context[:, -1:].expand_as(real_context), real_context)
        memory = batch.get("memory")
        if memory is not None:
            memory = memory * (~backward).view(b, 1, 1, 1, 1).to(memory.dtype)
        diffusion, denoised, context = self.diffusion_loss(context, target, actions, direction, pad,
                                                           weight_context=real_context,
                                                           instruction=batch.get("instruction"), memory=memory)

        # Frame heads on the real latent of one random future frame per window (cheaper than all H).
        real = fut[:, :h]  # (B, H, C, s, s)
        rows, j = torch.arange(b, device=dev), torch.randint(h, (b,), device=dev)
        heads = self.heads(real[rows, j])
        state_t = (batch["future_state"][rows, j] - self.state_mean) / self.state_std  # (B, D)
        env_t = (batch["future_env_state"][rows, j] - self.env_state_mean) / self.env_state_std  # (B, E)
        head_state = F.mse_loss(heads["state"], state_t)
        head_env = F.mse_loss(heads["env_state"], env_t) if env_t.shape[-1] else 0.0 * diffusion
        success = F.binary_cross_entropy_with_logits(heads["success_logit"],
                                                     batch["reached_success"][rows, j].float())
        r_valid = (~batch["action_is_pad"][rows, j]).float()  # (B,)
        reward = ((heads["reward"] - batch["rewards"][rows, j]) ** 2 * r_valid).sum() / r_valid.sum().clamp_min(1)
        head_loss = head_state + head_env + success + reward

        act_valid = (~batch["action_is_pad"]).float()  # (B, H)
        # Inverse dynamics on real latents, and forward-inverse consistency on the denoiser's output
        # (the IDM's parameters are detached there, so that term trains the forward model only).
        idm = ((self.inverse_dynamics(real_ctx[:, -1], real) - act) ** 2).mean(-1)  # (B, H)
        idm_loss = (idm * act_valid).sum() / act_valid.sum().clamp_min(1)
        fwd = (~backward).float()[:, None] * act_valid  # (B, H)
        frozen = {name: p.detach() for name, p in self.idm.named_parameters()}
        pred_act = functional_call(self.idm, frozen, (torch.cat([context[:, -1:], denoised], dim=1),))
        consistency = (((pred_act - actions) ** 2).mean(-1) * fwd).sum() / fwd.sum().clamp_min(1)

        total = (diffusion + cfg.head_weight * head_loss + cfg.idm_weight * idm_loss
                 + cfg.consistency_weight * consistency)
        logs = {"loss": total, "diffusion": diffusion, "head_state": head_state, "head_env_state": head_env,
                "head_success": success, "head_reward": reward, "idm": idm_loss, "consistency": consistency}
        return total, {k: float(v.detach()) if torch.is_tensor(v) else float(v) for k, v in logs.items()}

    def diffusion_loss(self, context: torch.Tensor, target: torch.Tensor, actions: torch.Tensor,
                       direction: torch.Tensor, pad: torch.Tensor, weight_context: torch.Tensor | None = None,
                       instruction: torch.Tensor | None = None,
                       memory: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The motion-weighted EDM denoising loss of `target` (B, H, C, s, s) given a clean `context`
        (B, K, C, s, s), actions (B, H, A), direction (B,); frames where `pad` (B, H) is True carry no
        loss. The context gets noise of a level the model is told (none for objective 'teacher').
        `weight_context` (default `context`) is what the motion weights compare the target with: the
        real frames where `context` was generated by the model, whose errors are no motion.
        -> (loss, denoised (B, H, C, s, s), the noised context)."""
        cfg, b, dev = self.cfg, context.shape[0], context.device
        base = context[:, -1:] if cfg.residual else torch.zeros_like(context[:, -1:])  # (B, 1, C, s, s), clean
        weight_context = context if weight_context is None else weight_context
        element_weight = self.motion_weights(weight_context, target)  # (B, H, C, s, s), before the context noise
        noise_max = 0.0 if cfg.objective == "teacher" else cfg.context_noise_max
        ctx_noise = torch.rand(b, device=dev) * noise_max  # (B,)
        context = context + ctx_noise.view(b, 1, 1, 1, 1) * torch.randn_like(context)
        # EDM: log-normal noise levels, loss weight 1 / c_out^2.
        sigma = (torch.randn(b, device=dev) * cfg.p_std + cfg.p_mean).exp()  # (B,)
        noisy = target - base + sigma.view(b, 1, 1, 1, 1) * torch.randn_like(target)
        denoised = self.denoise(noisy, sigma, context, actions, direction, ctx_noise, instruction,
                                memory) + base  # (B, H, C, s, s)
        weight = self._loss_weight(sigma)  # (B,)
        per_frame = (element_weight * (denoised - target) ** 2).mean(dim=(2, 3, 4))  # (B, H)
        valid = (~pad).float()
        return (weight[:, None] * per_frame * valid).sum() / valid.sum().clamp_min(1), denoised, context

    @torch.no_grad()
    def _self_forced_context(self, ctx: torch.Tensor, history: torch.Tensor, history_actions: torch.Tensor,
                             use: torch.Tensor, instruction: torch.Tensor | None = None) -> torch.Tensor:
        """ctx (B, K, C, s, s) with the rows where `use` (B,) replaced by the model's own rollout from
        `history` (B, K, C, s, s), the real frames R chunks earlier, through `history_actions` (B, R*H, A)."""
        from wmsuite.world_models.rollout import WorldModelState, rollout  # rollout.py imports this module

        rows = use.nonzero().squeeze(1)
        if not len(rows):
            return ctx
        words = instruction[rows] if instruction is not None else None
        _, state = rollout(self, WorldModelState(history[rows], words), history_actions[rows])  # R chunks
        out = ctx.clone()
        out[rows] = state.context
        return out

    def config_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        stats = {k: getattr(self, k).tolist() for k in ("state_mean", "state_std", "env_state_mean", "env_state_std")}
        return {"class": "LatentWorldModel", "world_model": asdict(self.cfg), "codec": asdict(self.codec_cfg),
                "stats": stats}
