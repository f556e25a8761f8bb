"""Export a trained world model as a small shipped checkpoint (weights in float16, no optimizer state).

    python -m wmsuite.world_models.export runs/wm-pushcube assets/wm/pushcube [--sampling-steps 3] \
        [--env-id wmsuite/PushCube-v0]

Buffers (normalisation statistics) stay float32; `load_world_model` casts the weights back to float32.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.rollout.engine import checked_env_id
from wmsuite.world_models import WORLD_MODELS, WorldModelConfig, resolve_checkpoint


def export_model(src: str | Path, dst: str | Path, half: bool = True, extra: dict | None = None,
                 sampling_steps: int | None = None, env_id: str | None = None) -> Path:
    """Write `dst` from `src`; `sampling_steps` replaces the checkpoint's default number of Euler steps;
    `env_id` (a registered Gymnasium id) names the task the model simulates in its config.json. A model
    card (README.md) already at `dst` is kept: re-exporting a shipped model must not erase its card."""
    if env_id is not None:
        try:
            checked_env_id(env_id)  # the core's check (wmsuite's ids registered on the way)
        except ValueError as err:
            raise ValueError(f"env_id {env_id!r} is not a registered environment: {err}") from err
        extra = {**(extra or {}), "env_id": env_id}
    tensors, config = load_checkpoint(resolve_checkpoint(src), expect_class=tuple(WORLD_MODELS))
    if sampling_steps is not None:
        WorldModelConfig(**{**config["world_model"], "sampling_steps": sampling_steps})  # validates it
        config["world_model"] = {**config["world_model"], "sampling_steps": sampling_steps}
    buffers = {"state_mean", "state_std", "env_state_mean", "env_state_std", "codec.latent_mean", "codec.latent_std"}
    out = {k: (v.half() if half and v.is_floating_point() and k not in buffers else v) for k, v in tensors.items()}
    config = {**config, "exported_from": str(src), "weights_dtype": "float16" if half else "float32", **(extra or {})}
    card = Path(dst) / "README.md"
    kept = card.read_text() if card.is_file() else None
    path = save_checkpoint(dst, out, config)
    if kept is not None:
        (Path(path) / "README.md").write_text(kept)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="checkpoint directory or train-wm run directory")
    parser.add_argument("dst", help="output checkpoint directory")
    parser.add_argument("--float32", action="store_true", help="keep float32 weights")
    parser.add_argument("--sampling-steps", type=int, default=None,
                        help="default Euler steps per generated chunk of the shipped model")
    parser.add_argument("--env-id", default=None, help="the task the model simulates, written to config.json")
    args = parser.parse_args()
    path = export_model(args.src, args.dst, half=not args.float32, sampling_steps=args.sampling_steps,
                        env_id=args.env_id)
    size = sum(f.stat().st_size for f in Path(path).iterdir()) / 1e6
    print(f"wrote {path} ({size:.1f} MB)")
    print(json.dumps({k: v for k, v in json.loads((path / "config.json").read_text()).items()
                      if k in ("step", "weights_dtype")}))
    print(f"sampling steps: {json.loads((path / 'config.json').read_text())['world_model']['sampling_steps']}")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
