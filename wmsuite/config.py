"""Dataclass configs, the command line generated from them (tyro), and their JSON form.

A config is a dataclass with a docstring (a string literal) under every field, as in cleanrl's
`Args`, and validation in `__post_init__` whose message names the bad value. tyro turns it into a
command line whose help is those docstrings; nested dataclasses become dotted flags, so a command's
config holds the library's own configs instead of copies of their fields:

    @dataclass
    class TrainWMConfig:
        data: str = "data/pushcube.hdf5"
        \"\"\"Training episodes.\"\"\"
        model: WorldModelConfig = field(default_factory=WorldModelConfig)
        \"\"\"The world model.\"\"\"

becomes `--data STR` and `--model.channels INT [INT ...]`, `--model.motion-weight FLOAT`, ...
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def parse(cls: type[T], args: Sequence[str], prog: str, description: str, default: T | None = None) -> T:
    """Parse `args` into `cls` (exits with tyro's message and status 2 on a bad flag or value, 0 on --help).
    `default`: an instance whose values are the defaults (e.g. a checkpoint's config on --resume)."""
    import tyro

    return tyro.cli(cls, args=list(args), prog=prog, description=description, default=default)


def to_dict(cfg: Any) -> dict[str, Any]:
    """JSON-ready dict of a (nested) dataclass config."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a config from `to_dict` output, naming unknown keys instead of ignoring them."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}; known: {sorted(names)}")
    hints = typing.get_type_hints(cls)
    fixed = {}
    for key, value in data.items():
        tp = _strip_optional(hints[key])
        if dataclasses.is_dataclass(tp) and isinstance(value, dict):
            value = from_dict(tp, value)  # type: ignore[arg-type]
        elif typing.get_origin(tp) is tuple and isinstance(value, list):
            value = tuple(value)
        fixed[key] = value
    return cls(**fixed)  # type: ignore[call-arg]


def _strip_optional(tp: Any) -> Any:
    """`int | None` -> int; anything else as it is."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp
