"""wmsuite.policies: flow-matching and diffusion action-chunk policies and policy wrappers.

    from wmsuite.policies import make_policy, load_policy, save_policy
    policy = make_policy("flow", dims, stats, horizon=8)       # a ChunkPolicy with kind="flow"
    save_policy(policy, "runs/flow/step_1000")
    policy = load_policy("runs/flow")              # a run's latest/, a checkpoint, or "assets:policies/flow-pushcube"

Both kinds are the same `ChunkPolicy` class (one encoder, one action head whose `mode` is the
kind); `POLICY_KINDS` is the registry the tests sweep. Checkpoint specs starting with `assets:`
resolve against the installed `wmsuite.assets` folder, so shipped policies load from any checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.config import from_dict, to_dict
from wmsuite.policies.config import PolicyConfig
from wmsuite.policies.model import ActionHead, ChunkPolicy, ObsEncoder
from wmsuite.specs import ASSETS_PREFIX, checkpoint_dir
from wmsuite.specs import resolve_asset as resolve_path

# kind -> one-line description. The one registry of trainable policies; tests sweep it.
POLICY_KINDS: dict[str, str] = {
    "flow": "pi0-style flow matching: Beta(1.5, 1) times, velocity target, Euler sampling",
    "diffusion": "Diffusion Policy-style DDPM training, DDIM sampling (diffusers schedulers)",
}
CHECKPOINT_CLASS = "ChunkPolicy"

__all__ = ["ASSETS_PREFIX", "POLICY_KINDS", "ActionHead", "ChunkPolicy", "ObsEncoder", "PolicyConfig",
           "load_policy", "make_policy", "resolve_path", "save_policy"]


def make_policy(kind: str, dims: dict[str, int], stats: dict[str, Any], **config: Any) -> ChunkPolicy:
    """A fresh policy of `kind` (a key of POLICY_KINDS); `config` sets PolicyConfig fields."""
    if kind not in POLICY_KINDS:
        raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(POLICY_KINDS)}")
    return ChunkPolicy(PolicyConfig(kind=kind, **config), dims, stats)  # type: ignore[arg-type]


def save_policy(policy: ChunkPolicy, path: str | Path, dtype: torch.dtype = torch.float32,
                extra: dict[str, Any] | None = None) -> Path:
    """Write `policy` as a checkpoint directory (weights cast to `dtype`, e.g. float16 for shipping)."""
    tensors = {k: v.detach().to(dtype) if v.is_floating_point() else v for k, v in policy.state_dict().items()}
    config = {
        "class": CHECKPOINT_CLASS,
        "policy": to_dict(policy.cfg),
        "dims": policy.dims,
        "normalization": policy.normalizer.stats,
        **(extra or {}),
    }
    return save_checkpoint(path, tensors, config)


def load_policy(path: str | Path, device: str = "cpu") -> ChunkPolicy:
    """Load a checkpoint written by `save_policy` (a directory, a train-policy run directory, whose
    latest/ it loads, or an `assets:` spec) in eval mode."""
    path = checkpoint_dir(path) or resolve_path(path)
    tensors, config = load_checkpoint(path, expect_class=CHECKPOINT_CLASS)
    for key in ("policy", "dims"):
        if key not in config:
            raise ValueError(f"{path}/config.json lacks {key!r}; it was not written by wmsuite.policies.save_policy")
    if "normalization" not in config:
        raise ValueError(f"{path}/config.json has no 'normalization' statistics; a policy cannot run without "
                         "them: retrain with `wmsuite train-policy`, which stores them in the checkpoint")
    fields = dict(config["policy"])
    if fields.get("kind") == "diffusion":
        fields.setdefault("prediction_type", "epsilon")  # written before the field existed (epsilon only)
    cfg = from_dict(PolicyConfig, fields)
    policy = ChunkPolicy(cfg, config["dims"], config["normalization"])
    policy.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()})
    return policy.to(device).eval()
