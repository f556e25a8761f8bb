"""Checkpoints that cannot run code: a directory with `model.safetensors` and `config.json`.

    save_checkpoint(run/"step_1000", tensors={"model.w": ...}, config={"class": "FlowPolicy", ...})
    tensors, config = load_checkpoint(run/"step_1000")

`config.json` always carries `schema_version` and `class`; normalisation statistics and
hyper-parameters go in it as plain JSON. Both files are written to a temporary directory that is
renamed into place, so a crash never leaves a half-written checkpoint behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

SCHEMA_VERSION = 1


def save_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], config: dict[str, Any]) -> Path:
    """Write tensors + JSON config atomically to the directory `path` (replacing it if present)."""
    path = Path(path)
    if "class" not in config:
        raise ValueError("checkpoint config needs a 'class' entry naming what it holds")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        flat = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        save_file(flat, str(tmp / "model.safetensors"))
        meta = {"schema_version": SCHEMA_VERSION, **config}
        (tmp / "config.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=_jsonable))
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_checkpoint(path: str | Path, expect_class: str | tuple[str, ...] | None = None,
                    device: str = "cpu") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint directory; never unpickles anything."""
    path = Path(path)
    weights, cfg_file = path / "model.safetensors", path / "config.json"
    if not path.is_dir() or not weights.is_file() or not cfg_file.is_file():
        raise FileNotFoundError(
            f"{path} is not a wmsuite checkpoint: expected a directory with model.safetensors and config.json"
        )
    config = json.loads(cfg_file.read_text())
    version = config.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{cfg_file} has schema_version {version!r}; this wmsuite reads {SCHEMA_VERSION}. "
            "Retrain or convert the checkpoint with the wmsuite version that wrote it."
        )
    if expect_class is not None:
        wanted = (expect_class,) if isinstance(expect_class, str) else expect_class
        if config.get("class") not in wanted:
            raise ValueError(f"{path} holds a {config.get('class')!r}, expected one of {list(wanted)}")
    return load_file(str(weights), device=device), config


def is_checkpoint(path: str | Path) -> bool:
    path = Path(path)
    return (path / "model.safetensors").is_file() and (path / "config.json").is_file()


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"cannot store {type(x).__name__} in a checkpoint config")
