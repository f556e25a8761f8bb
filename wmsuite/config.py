"""Dataclass configs and the command line generated from them.

A config is a dataclass with a docstring (a string literal) under every field, as in cleanrl's
`Args`, and validation in `__post_init__`. `add_arguments` turns it into argparse options:

    @dataclass
    class CollectConfig:
        episodes: int = 200
        \"\"\"How many episodes to record.\"\"\"

becomes `--episodes INT  How many episodes to record. (default: 200)`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import textwrap
import types
import typing
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Map each field of a dataclass to the string literal written under it in the source."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _resolve(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _scalar_type(tp: Any) -> tuple[Any, bool]:
    """(base type, optional) for `int`, `int | None`, `Optional[int]`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def add_arguments(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """Add one `--flag` per dataclass field (underscores become dashes)."""
    docs = field_docs(cls)
    hints = _resolve(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        flag = "--" + f.name.replace("_", "-")
        tp, optional = _scalar_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        help_text = docs.get(f.name, "")
        help_text = f"{help_text} (default: {default})" if help_text else f"(default: {default})"
        origin = typing.get_origin(tp)
        if tp is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif origin in (list, tuple):
            (inner, *_) = typing.get_args(tp) or (str,)
            parser.add_argument(flag, type=inner, nargs="*", default=default, help=help_text)
        elif origin is dict or tp is dict:
            parser.add_argument(flag, type=json.loads, default=default, help=help_text + " (JSON)")
        elif origin is typing.Literal:
            choices = typing.get_args(tp)
            parser.add_argument(flag, choices=choices, default=default, help=help_text)
        else:
            conv = tp if tp in (int, float, str) else str
            parser.add_argument(flag, type=conv, default=default, help=help_text,
                                metavar=conv.__name__.upper() + ("|none" if optional else ""))


def from_namespace(cls: type[T], ns: argparse.Namespace, **overrides: Any) -> T:
    """Build the dataclass from parsed arguments; `__post_init__` validates."""
    kwargs = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls) if f.init and hasattr(ns, f.name)}
    kwargs.update(overrides)
    hints = _resolve(cls)
    for key, value in list(kwargs.items()):
        if isinstance(value, str) and value.lower() == "none" and _scalar_type(hints[key])[1]:
            kwargs[key] = None
        elif isinstance(value, list) and typing.get_origin(_scalar_type(hints[key])[0]) is tuple:
            kwargs[key] = tuple(value)
    return cls(**kwargs)  # type: ignore[call-arg]


def to_dict(cfg: Any) -> dict[str, Any]:
    """JSON-ready dict of a dataclass config."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a config from `to_dict` output, naming unknown keys instead of ignoring them."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}; known: {sorted(names)}")
    hints = _resolve(cls)
    fixed = {}
    for key, value in data.items():
        tp, _ = _scalar_type(hints[key])
        fixed[key] = tuple(value) if typing.get_origin(tp) is tuple and isinstance(value, list) else value
    return cls(**fixed)  # type: ignore[call-arg]
