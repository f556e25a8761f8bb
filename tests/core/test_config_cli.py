"""Dataclass configs become a CLI with documented flags; bad values are named."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import re
import textwrap
import typing
from dataclasses import dataclass, field

import pytest

from wmsuite import cli
from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.config import from_dict, parse, to_dict
from wmsuite.policy import ChunkQueue, load_object


@dataclass
class Inner:
    width: int = 8
    """Width."""
    sizes: tuple[int, ...] = (1, 2)
    """Sizes."""

    def __post_init__(self):
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")


@dataclass
class Demo:
    steps: int = 3
    """How many steps."""
    name: str | None = None
    """Optional name."""
    verbose: bool = False
    """Say more."""
    inner: Inner = field(default_factory=Inner)
    """The inner config."""


def test_nested_flags_defaults_and_validation(capsys):
    cfg = parse(Demo, ["--steps", "5", "--name", "x", "--verbose", "--inner.sizes", "4", "5", "--inner.width", "3"],
                prog="demo", description="d")
    assert (cfg.steps, cfg.name, cfg.verbose, cfg.inner.sizes, cfg.inner.width) == (5, "x", True, (4, 5), 3)
    assert parse(Demo, [], prog="demo", description="d") == Demo()
    assert parse(Demo, [], prog="demo", description="d", default=Demo(steps=9)).steps == 9  # given defaults
    with pytest.raises(SystemExit) as exit_:
        parse(Demo, ["--inner.width", "0"], prog="demo", description="d")
    assert exit_.value.code == 2 and "width must be >= 1, got 0" in capsys.readouterr().err
    assert from_dict(Demo, to_dict(Demo(inner=Inner(sizes=(3,))))).inner.sizes == (3,)
    with pytest.raises(ValueError, match="no field"):
        from_dict(Demo, {"stepz": 1})


def field_docs(cls: type) -> dict[str, str]:
    """Each field of a dataclass mapped to the string literal written under it in the source."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, nxt in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def nested_configs(cls: type) -> list[type]:
    """`cls` and every dataclass its fields hold, recursively."""
    out = [cls]
    for tp in typing.get_type_hints(cls).values():
        if dataclasses.is_dataclass(tp):
            out += nested_configs(tp)
    return out


COMMANDS = sorted(n for n in {**cli.COMMANDS, **cli.BENCHES} if n != "bench")


def _module(name: str):
    return importlib.import_module({**cli.COMMANDS, **cli.BENCHES}[name][0])


@pytest.mark.parametrize("name", COMMANDS)
def test_every_registered_command_has_a_documented_config(name):
    mod = _module(name)  # a registered command whose module is missing fails here
    assert callable(mod.run)
    for cls in nested_configs(mod.CONFIG):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in field_docs(cls)]
        assert not missing, f"{name}: {cls.__name__} fields without a docstring: {missing}"


def _help(name: str, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "250")
    argv = ["bench", name, "--help"] if name in cli.BENCHES else [name, "--help"]
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.replace("│", " ").split())


# What a measured figure looks like: a percentage, a quantity with a unit, or the word itself.
FIGURE = re.compile(r"\bmeasured\b|\d\s?%|\b\d+(\.\d+)?\s?(cm|mm|dB|ms|min|s|frames/s|steps/s|x)\b", re.I)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_lists_every_field_with_its_docstring_and_no_measured_figure(name, capsys, monkeypatch):
    text = _help(name, capsys, monkeypatch)
    mod = _module(name)
    hints = typing.get_type_hints(mod.CONFIG)
    for f in dataclasses.fields(mod.CONFIG):
        prefix = "--" if not dataclasses.is_dataclass(hints[f.name]) else f"--{f.name.replace('_', '-')}."
        for sub in [f] if prefix == "--" else dataclasses.fields(hints[f.name]):
            flag = prefix + sub.name.replace("_", "-")
            doc = field_docs(hints[f.name] if prefix != "--" else mod.CONFIG)[sub.name]
            assert flag in text, f"{name}: {flag} missing from --help"
            assert doc[:60] in text, f"{name}: {flag}'s docstring missing from --help"
    found = FIGURE.search(text)
    assert found is None, f"{name} --help carries a measured figure: ...{text[max(0, found.start() - 60):found.end() + 20]}"


@pytest.mark.parametrize(("name", "libraries"), [
    ("train-wm", {"model": "WorldModelConfig", "codec": "CodecConfig", "codec_train": "TrainerConfig",
                  "dynamics": "TrainerConfig", "heads_train": "TrainerConfig", "heads": "HeadsConfig"}),
    ("train-policy", {"policy": "PolicyConfig", "train": "TrainerConfig"}),
])
def test_training_commands_hold_the_library_configs_not_copies(name, libraries):
    """The CLI config holds the library's own dataclasses, so it cannot drift from them: no top-level
    field repeats a field of a library config it holds."""
    import wmsuite.policies.config
    import wmsuite.train
    import wmsuite.world_models.config

    modules = (wmsuite.world_models.config, wmsuite.policies.config, wmsuite.train)
    config = _module(name).CONFIG
    hints = typing.get_type_hints(config)
    for attr, cls_name in libraries.items():
        assert any(getattr(m, cls_name, None) is hints[attr] for m in modules), f"{name}.{attr} is not {cls_name}"
    nested = {f.name for attr in libraries for f in dataclasses.fields(hints[attr])}
    flat = {f.name for f in dataclasses.fields(config) if not dataclasses.is_dataclass(hints[f.name])}
    assert not flat & nested, f"{name} repeats library fields at the top level: {sorted(flat & nested)}"


def test_cli_usage_and_unknown_command(capsys):
    assert cli.main([]) == 0
    assert "collect" in capsys.readouterr().out
    assert cli.main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err


def test_checkpoint_round_trip_and_errors(tmp_path):
    import torch

    t = {"w": torch.arange(6.0).reshape(2, 3)}
    save_checkpoint(tmp_path / "ck", t, {"class": "Thing", "stats": {"mean": [1.0]}})
    back, cfg = load_checkpoint(tmp_path / "ck", expect_class="Thing")
    assert torch.equal(back["w"], t["w"]) and cfg["stats"]["mean"] == [1.0] and cfg["schema_version"] == 1
    save_checkpoint(tmp_path / "ck", {"w": torch.zeros(1)}, {"class": "Thing"})  # replace in place
    assert load_checkpoint(tmp_path / "ck")[0]["w"].shape == (1,)
    with pytest.raises(ValueError, match="expected one of"):
        load_checkpoint(tmp_path / "ck", expect_class="Other")
    with pytest.raises(FileNotFoundError, match="not a wmsuite checkpoint"):
        load_checkpoint(tmp_path)
    cfg_file = tmp_path / "ck" / "config.json"
    cfg_file.write_text(json.dumps({"schema_version": 99, "class": "Thing"}))
    with pytest.raises(ValueError, match="schema_version 99"):
        load_checkpoint(tmp_path / "ck")


def test_chunk_queue_and_specs():
    import numpy as np

    calls = []

    def predict(obs):
        calls.append(1)
        return np.arange(8, dtype=np.float32).reshape(1, 4, 2)

    q = ChunkQueue(n_action_steps=2)
    obs = {"agent_pos": np.zeros((1, 2))}
    got = [q.pop(predict, obs)[0, 0] for _ in range(4)]
    assert got == [0.0, 2.0, 0.0, 2.0] and len(calls) == 2
    with pytest.raises(ValueError, match="--trust-code"):  # untrusted code is refused before any import
        load_object("collections:OrderedDict{\"a\": 1}")
    with pytest.raises(ValueError, match="not a policy"):  # a class without the Policy methods: refused, not called
        load_object("collections:OrderedDict{\"a\": 1}", trusted=True)
    with pytest.raises(ValueError, match="not of the form"):
        load_object("nocolon", trusted=True)
    with pytest.raises(ValueError, match="has no attribute"):
        load_object("collections:Nope", trusted=True)
    with pytest.raises(ValueError, match="not valid JSON"):
        load_object("collections:OrderedDict{bad", trusted=True)


def test_bad_input_is_one_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WMSUITE_DEBUG", raising=False)
    (tmp_path / "junk.hdf5").write_text("not hdf5")
    code = cli.main(["collect", "--env", "wmsuite/PushCube-v0", "--episodes", "1", "--num-envs", "1",
                     "--out", str(tmp_path / "junk.hdf5"), "--append"])
    err = capsys.readouterr().err
    assert code == 2 and "is not an HDF5 file" in err and "Traceback" not in err
    code = cli.main(["collect", "--policy", "nosuchmodule:Thing", "--episodes", "1", "--num-envs", "1",
                     "--out", str(tmp_path / "d.hdf5")])
    assert code == 2 and "cannot import module 'nosuchmodule'" in capsys.readouterr().err
