"""Dataclass configs become a CLI with documented flags; bad values are named."""

from __future__ import annotations

import argparse
import importlib
import json
from dataclasses import dataclass, field

import pytest

from wmsuite import cli
from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.config import add_arguments, field_docs, from_dict, from_namespace, to_dict
from wmsuite.policy import ChunkQueue, load_object


@dataclass
class Demo:
    steps: int = 3
    """How many steps."""
    name: str | None = None
    """Optional name."""
    verbose: bool = False
    """Say more."""
    sizes: tuple[int, ...] = (1, 2)
    """Sizes."""
    extra: dict = field(default_factory=dict)
    """Extra JSON."""

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")


def test_flags_from_dataclass():
    assert field_docs(Demo)["steps"] == "How many steps."
    p = argparse.ArgumentParser()
    add_arguments(p, Demo)
    assert "How many steps. (default: 3)" in p.format_help()
    ns = p.parse_args(["--steps", "5", "--name", "x", "--verbose", "--sizes", "4", "5", "--extra", '{"a": 1}'])
    cfg = from_namespace(Demo, ns)
    assert (cfg.steps, cfg.name, cfg.verbose, cfg.sizes, cfg.extra) == (5, "x", True, (4, 5), {"a": 1})
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        from_namespace(Demo, p.parse_args(["--steps", "0"]))
    assert from_dict(Demo, to_dict(Demo(sizes=(3,)))).sizes == (3,)
    with pytest.raises(ValueError, match="no field"):
        from_dict(Demo, {"stepz": 1})


def test_every_registered_command_has_documented_config():
    for name, (module, _) in {**cli.COMMANDS, **cli.BENCHES}.items():
        if importlib.util.find_spec(module) is None or name == "bench":
            continue
        mod = importlib.import_module(module)
        docs = field_docs(mod.CONFIG)
        missing = [f for f in mod.CONFIG.__dataclass_fields__ if f not in docs]
        assert not missing, f"{name}: fields without a docstring: {missing}"


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
    assert load_object("collections:OrderedDict{\"a\": 1}") == {"a": 1}
    with pytest.raises(ValueError, match="not of the form"):
        load_object("nocolon")
    with pytest.raises(ValueError, match="has no attribute"):
        load_object("collections:Nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_object("collections:OrderedDict{bad")


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
