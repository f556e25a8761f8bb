"""Checkpoints that cannot run code: a directory with `model.safetensors` and `config.json`.

    save_checkpoint(run/"step_1000", tensors={"model.w": ...}, config={"class": "FlowPolicy", ...})
    tensors, config = load_checkpoint(run/"step_1000")

`config.json` always carries `schema_version` and `class`; normalisation statistics and
hyper-parameters go in it as plain JSON. Both files are written to a temporary directory that is
renamed into place, so a crash never leaves a half-written checkpoint behind; a crash between the
two renames of a replace (the old one moved aside, the new one not yet in) is undone by the next
`is_checkpoint` or `load_checkpoint`, which puts the old one back.

The config is strict JSON both ways: a NaN or inf in it is refused when saving (naming the key that
holds it) and when loading, since a non-finite normalisation statistic would silently spoil every
figure computed with the model. A corrupt or truncated checkpoint raises one ValueError naming the
file, never a parser's or safetensors' own error.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

SCHEMA_VERSION = 1


def save_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], config: dict[str, Any]) -> Path:
    """Write tensors + JSON config atomically to the directory `path` (replacing it if present)."""
    path = Path(path)
    if "class" not in config:
        raise ValueError("checkpoint config needs a 'class' entry naming what it holds")
    text = _config_text({**config, "schema_version": SCHEMA_VERSION}, path)  # refused before anything is written
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        flat = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        save_file(flat, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(text)
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
    """Read a checkpoint directory; never unpickles anything.

    Raises FileNotFoundError when `path` is not a checkpoint directory and ValueError naming the file
    when one of its two files is corrupt or truncated, from another schema or of another class.
    """
    path = _recovered(Path(path))
    weights, cfg_file = path / "model.safetensors", path / "config.json"
    if not path.is_dir() or not weights.is_file() or not cfg_file.is_file():
        raise FileNotFoundError(
            f"{path} is not a wmsuite checkpoint: expected a directory with model.safetensors and config.json"
        )
    config = _read_config(cfg_file)
    version = config.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{cfg_file} has schema_version {version!r:.40}; this wmsuite reads {SCHEMA_VERSION}. "
            "Retrain or convert the checkpoint with the wmsuite version that wrote it."
        )
    if expect_class is not None:
        wanted = (expect_class,) if isinstance(expect_class, str) else expect_class
        if "class" not in config:
            raise ValueError(f"{cfg_file} lacks 'class' (what the checkpoint holds); expected one of {list(wanted)}")
        if config["class"] not in wanted:
            raise ValueError(f"{path} holds a {config['class']!r:.60}, expected one of {list(wanted)}")
    try:
        tensors = load_file(str(weights), device=device)
    except (SafetensorError, OSError, RuntimeError, ValueError, TypeError, OverflowError) as err:
        raise ValueError(f"{weights} is corrupt or truncated ({_one_line(err)}); re-copy the checkpoint or "
                         "retrain it") from err
    return tensors, config


def _read_config(cfg_file: Path) -> dict[str, Any]:
    """config.json as a dict: strict UTF-8 JSON, an object, no NaN or inf."""
    fix = "re-copy the checkpoint or retrain it"
    try:
        config = json.loads(cfg_file.read_bytes().decode("utf-8"), parse_constant=_refuse_constant,
                            parse_float=_finite_float)
    except UnicodeDecodeError as err:
        raise ValueError(f"{cfg_file} is not UTF-8 text ({err.reason}): the file is corrupt; {fix}") from err
    except ValueError as err:  # json.JSONDecodeError, a NaN/inf constant, or a number too deep to parse
        raise ValueError(f"{cfg_file} is not valid JSON ({_one_line(err)}): the file is corrupt or truncated; "
                         f"{fix}") from err
    except RecursionError as err:
        raise ValueError(f"{cfg_file} nests too deeply to be a checkpoint config: the file is corrupt; {fix}") from err
    if not isinstance(config, dict):
        raise ValueError(f"{cfg_file} holds a JSON {type(config).__name__}, not an object: the file is corrupt; {fix}")
    return config


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _config_text(config: dict[str, Any], path: Path) -> str:
    """config as strict JSON, or a ValueError/TypeError naming the key that holds what JSON cannot."""
    try:
        return json.dumps(config, indent=2, sort_keys=True, default=_jsonable, allow_nan=False)
    except (ValueError, TypeError) as err:
        where = _bad_value(config, "")
        if where is None:
            raise
        raise type(err)(f"checkpoint config for {path}: {where}; refusing to write it") from err


def _bad_value(x: Any, key: str) -> str | None:
    """Where in a config the first non-finite number or non-JSON value sits, as 'key.sub[2] is nan'."""
    if isinstance(x, dict):
        for k, v in x.items():
            found = _bad_value(v, f"{key}.{k}" if key else str(k))
            if found is not None:
                return found
        return None
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            found = _bad_value(v, f"{key}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(x, float):
        return None if math.isfinite(x) else f"{key!r} is {x}, not a finite number"
    if x is None or isinstance(x, (str, int, bool)):
        return None
    try:
        return _bad_value(_jsonable(x), key)
    except TypeError as err:
        return f"{key!r}: {err}"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300]


def is_checkpoint(path: str | Path) -> bool:
    path = _recovered(Path(path))
    return (path / "model.safetensors").is_file() and (path / "config.json").is_file()


def _recovered(path: Path) -> Path:
    """`path`, after undoing a replace that a kill cut between its two renames (`path` moved to
    `.<name>.old`, the new one not yet in place): the old checkpoint goes back where it was."""
    old = path.with_name(f".{path.name}.old")
    if not path.exists() and old.is_dir():
        try:
            os.replace(old, path)
        except OSError:
            pass  # another process got there first, or the folder is read-only: the caller reports
    return path


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"cannot store {type(x).__name__} in a checkpoint config")
