"""wmsuite.world_models: action-conditioned video diffusion world models and `WorldModelEnv`.

    model = load_world_model("assets/wm/pushcube")           # a checkpoint dir or a training run dir
    latents, state = rollout(model, WorldModelState.from_frames(model, frames), actions)  # rollout.py
    env = make_world_model_env("assets/wm/pushcube", env_id, num_envs=16)  # env_id registered (import wmsuite.envs)

Registry: `WORLD_MODELS` maps the `class` stored in a checkpoint's config.json to the model class.
`rollout` itself is imported from `wmsuite.world_models.rollout` (exported here it would hide that module).
See docs/world_models.md for the design and the training command.
"""

from __future__ import annotations

from pathlib import Path

import torch

from wmsuite.checkpoint import load_checkpoint
from wmsuite.config import from_dict
from wmsuite.specs import checkpoint_dir
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.make import make_world_model_env
from wmsuite.world_models.model import BACKWARD, FORWARD, LatentWorldModel
from wmsuite.world_models.rollout import WorldModelState
from wmsuite.world_models.tracking import ObjectTracking

WORLD_MODELS: dict[str, type[LatentWorldModel]] = {"LatentWorldModel": LatentWorldModel}


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory, or a training run directory (its `latest/` checkpoint)."""
    found = checkpoint_dir(path)
    if found is not None:
        return found
    raise FileNotFoundError(f"{path} is neither a world-model checkpoint (model.safetensors + config.json) nor a "
                            "run directory with latest/; train one with `wmsuite train-wm` or use assets/wm/pushcube")


def model_configs(config: dict) -> tuple[WorldModelConfig, CodecConfig]:
    """The model and codec configs a checkpoint's config.json holds (older schemas migrated: checkpoints
    written before the heads option existed have the "conv" heads)."""
    return (from_dict(WorldModelConfig, {"heads": "conv", **config["world_model"]}),
            from_dict(CodecConfig, config["codec"]))


def bfloat16_is_fast(device: str = "cpu") -> bool:
    """Whether bfloat16 inference pays off on `device`: on GPUs, and on CPUs with bfloat16
    instructions (AVX512-BF16 or AMX tiles); other CPUs emulate it, slower than float32."""
    if torch.device(device).type != "cpu":
        return True
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def load_world_model(path: str | Path, device: str = "cpu", sampling_steps: int | None = None,
                     precision: str | None = None) -> LatentWorldModel:
    """Rebuild a world model from its checkpoint (never unpickles); eval mode, on `device`.
    `sampling_steps` and `precision` (WorldModelConfig's) override the checkpoint's defaults. A
    checkpoint whose own default is bfloat16 loads in float32 where bfloat16 would be slow
    (`bfloat16_is_fast`); a bfloat16 passed here is kept."""
    ckpt = resolve_checkpoint(path)
    tensors, config = load_checkpoint(ckpt, expect_class=tuple(WORLD_MODELS), device=device)
    wm_cfg, codec_cfg = model_configs(config)
    if precision is None and wm_cfg.precision == "bfloat16" and not bfloat16_is_fast(device):
        precision = "float32"
    if sampling_steps is not None or precision is not None:
        wm_cfg.sampling_steps = wm_cfg.sampling_steps if sampling_steps is None else sampling_steps
        wm_cfg.precision = wm_cfg.precision if precision is None else precision
        wm_cfg.__post_init__()
    model = WORLD_MODELS[config["class"]](wm_cfg, codec_cfg, config["stats"])
    model.load_state_dict(tensors)
    return model.to(device).eval()


__all__ = ["BACKWARD", "FORWARD", "WORLD_MODELS", "CodecConfig", "LatentWorldModel", "WorldModelConfig",
           "ObjectTracking", "WorldModelEnv", "WorldModelState", "load_world_model", "make_world_model_env",
           "bfloat16_is_fast", "model_configs", "resolve_checkpoint"]
