"""Fuzzing what enters through the dataset readers and the checkpoint loader (hypothesis).

Each target starts from a small valid input, mutates it as hypothesis draws (keys deleted, arrays of
the wrong dtype/shape or holding NaN/inf, bad attributes, truncated or flipped bytes), reads it back
and checks the one promise: valid episodes or tensors come back, or one error of the tool's own
(`DatasetError` for data, ValueError/FileNotFoundError for checkpoints) whose one-line message names
the file; never a library traceback. `experiments/scripts/fuzz_campaign.py` runs the same `TARGETS`
with many more examples.

Covered: our HDF5 store (`load_episodes` with and without `drop_bad`, `count_episodes`), the public
Robomimic and LIBERO layouts (`readers.read_any`, the readers with `sim_states`), the parts of the
LeRobot importer that run without the `lerobot` extra (the sidecar of episode fields and the image
column check), `load_checkpoint` and `save_checkpoint`'s config.
"""

from __future__ import annotations

import functools
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.helpers import make_episode
from tests.real.public_layouts import write_libero, write_robomimic
from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.data import DatasetError, count_episodes, load_episodes, validate_finite, write_episodes
from wmsuite.data.lerobot_io import SIDECAR, _as_uint8_frames, _read_sidecar
from wmsuite.data.readers import read_any, read_libero, read_robomimic
from wmsuite.types import Episode


@dataclass(frozen=True)
class Target:
    """One kind of input: how to draw a malformed one and how to check what reading it does."""

    strategy: st.SearchStrategy
    check: Callable[[Any], None]
    """Raises (AssertionError or the library's own error) when the promise is broken."""


# ---- strategies ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
"""JSON-like values; floats include NaN and inf, which strict JSON has no place for."""

ARRAYS = hnp.arrays(
    dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.int8, np.bool_, np.complex64, "S4"]),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
)
ATTR_VALUES = st.one_of(
    st.text(max_size=20), JSON.map(json.dumps), st.binary(max_size=20), st.integers(-(2**63), 2**63 - 1),
    st.floats(), st.booleans(),
    hnp.arrays(st.sampled_from(["f4", "i8", "u1", "?"]), hnp.array_shapes(min_dims=1, max_dims=2, max_side=3)),
)
ATTR_NAMES = ("env_args", "meta", "task", "success", "terminated", "truncated", "num_samples", "total",
              "wmsuite_version", "problem_info", "macros_image_convention", "bddl_file_name")
TRUNCATE = st.tuples(st.just("truncate"), st.floats(1e-3, 1, exclude_max=True))  # 0, an empty file, is a test
FLIP = st.tuples(st.just("flip"), st.lists(st.tuples(st.floats(1e-3, 1, exclude_max=True), st.integers(1, 255)),
                                           min_size=1, max_size=8))
BYTES = st.one_of(st.none(), TRUNCATE, FLIP)
"""A change to the raw bytes of a file: cut at a fraction of its length, or bytes xor-ed at fractions.

Flipped bytes in an HDF5 file's metadata can crash or hang the HDF5 C library itself (seen with
HDF5 2.0.0), beyond any Python code's reach; so the HDF5 targets flip bytes only when the campaign
script asks (it runs each input in a child process), while truncation, which HDF5 detects on open,
is always fuzzed. The safetensors and JSON parsers take flips safely."""


@dataclass(frozen=True)
class Base:
    """A valid file's bytes and the names of what is inside it (for the mutations to pick from)."""

    data: bytes
    objects: tuple[str, ...]
    datasets: tuple[str, ...]
    float_datasets: tuple[str, ...]
    groups: tuple[str, ...]


@functools.cache
def base_file(layout: str) -> Base:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.hdf5"
        if layout == "wmsuite":
            write_episodes(path, [make_episode(t=3, size=8, seed=i) for i in range(3)], env_args={"env_name": "x"})
        elif layout == "robomimic":
            write_robomimic(path, [3, 4], image=True, size=8, masks={"train": [0], "valid": [1]})
        else:
            write_libero(path, [3, 4], size=8, state_dim=6)
        with h5py.File(path, "r") as f:
            names: list[str] = []
            f.visit(names.append)
            datasets = [n for n in names if isinstance(f[n], h5py.Dataset)]
            floats = [n for n in datasets if f[n].dtype.kind == "f"]
            groups = [n for n in names if isinstance(f[n], h5py.Group) and (n == "data" or n.count("/") == 1)]
        return Base(path.read_bytes(), tuple(names), tuple(datasets), tuple(floats), tuple(groups))


def h5_plans(layout: str, flips: bool = False) -> st.SearchStrategy:
    """(edits made through h5py, then one change to the raw bytes or None) for a file of `layout`."""
    base = base_file(layout)
    edit = st.one_of(
        st.tuples(st.just("delete"), st.sampled_from(base.objects)),
        st.tuples(st.just("replace"), st.sampled_from(base.datasets), ARRAYS),
        st.tuples(st.just("poison"), st.sampled_from(base.float_datasets), st.integers(0, 10**6),
                  st.sampled_from([math.nan, math.inf, -math.inf])),
        st.tuples(st.just("group"), st.sampled_from(base.datasets)),
        st.tuples(st.just("attr"), st.sampled_from(base.groups), st.sampled_from(ATTR_NAMES), ATTR_VALUES),
        st.tuples(st.just("move"), st.sampled_from(base.groups), st.sampled_from(["demo_9", "demo_", "demo_x", "d"])),
        st.tuples(st.just("mask"), st.lists(st.sampled_from(["demo_0", "demo_1", "demo_7", "", "x"]), max_size=3)),
    )
    raw = st.one_of(st.none(), st.none(), TRUNCATE, *([FLIP] if flips else []))  # most files keep their bytes
    return st.tuples(st.lists(edit, max_size=3), raw)


def _edit(f: h5py.File, op: tuple) -> None:
    kind, name = op[0], op[1]
    if kind == "delete":
        del f[name]
    elif kind == "replace":
        del f[name]
        f.create_dataset(name, data=op[2])
    elif kind == "poison":
        values = f[name][()]
        if values.size:
            values.flat[op[2] % values.size] = op[3]
            f[name][...] = values
    elif kind == "group":
        del f[name]
        f.create_group(name)
    elif kind == "attr":
        f[name].attrs[op[2]] = op[3]
    elif kind == "move":
        f.move(name, name.rsplit("/", 1)[0] + "/" + op[2] if "/" in name else op[2])
    elif kind == "mask":
        if "mask/train" in f:
            del f["mask/train"]
        f["mask/train"] = np.array(name, dtype="S")


def write_mutated(path: Path, base: Base, plan: tuple) -> None:
    edits, raw = plan
    path.write_bytes(base.data)
    with h5py.File(path, "r+") as f:
        for op in edits:
            try:
                _edit(f, op)
            except Exception:  # h5py refused this edit (a dtype it cannot store, a parent already gone): skip it
                pass
    mutate_bytes(path, raw)


def mutate_bytes(path: Path, raw: tuple | None) -> None:
    if raw is None:
        return
    data = bytearray(path.read_bytes())
    if raw[0] == "truncate":
        data = data[: int(raw[1] * len(data))]
    else:
        for where, xor in raw[1]:
            if data:
                data[int(where * len(data))] ^= xor
    path.write_bytes(bytes(data))


# ---- checks ----------------------------------------------------------------------------------------

def refused_or_read(read: Callable[[], Any], path: Path, allowed: tuple[type[BaseException], ...] = (DatasetError,)
                    ) -> Any:
    """What `read()` returns, or None when it raised one of `allowed` with a one-line message naming `path`."""
    try:
        return read()
    except allowed as err:
        message = str(err)
        assert str(path) in message, f"{type(err).__name__} does not name {path}: {message}"
        assert "\n" not in message, f"{type(err).__name__} spans lines: {message!r}"
        return None


def assert_episodes(episodes: Any) -> None:
    assert isinstance(episodes, list)
    for ep in episodes:
        assert isinstance(ep, Episode) and validate_finite(ep) is None


def check_store(plan: tuple) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.hdf5"
        write_mutated(path, base_file("wmsuite"), plan)
        for read in (lambda: load_episodes(path), lambda: load_episodes(path, drop_bad=True),
                     lambda: load_episodes(path, filter_key="train", limit=2)):
            episodes = refused_or_read(read, path)
            if episodes is not None:
                assert_episodes(episodes)
        count = refused_or_read(lambda: count_episodes(path), path)
        assert count is None or (isinstance(count, int) and count >= 0)


def check_public(layout: str, plan: tuple) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{layout}.hdf5"
        write_mutated(path, base_file(layout), plan)
        reader = read_libero if layout == "libero" else read_robomimic
        for read in (lambda: read_any(path), lambda: read_any(path, drop_bad=True, limit=1),
                     lambda: reader(path, sim_states=True, filter_key="train" if layout == "robomimic" else None)):
            episodes = refused_or_read(read, path)
            if episodes is not None:
                assert_episodes(episodes)


SIDECAR_PLANS = st.one_of(
    st.binary(max_size=60),
    st.lists(JSON.map(json.dumps), max_size=4).map(lambda rows: "\n".join(rows).encode()),
    st.lists(st.fixed_dictionaries({"episode_index": JSON, "success": JSON}, optional={"meta": JSON}), max_size=3)
    .map(lambda rows: "\n".join(json.dumps(r) for r in rows).encode()),
)


def check_lerobot_sidecar(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / SIDECAR).parent.mkdir(parents=True)
        (root / SIDECAR).write_bytes(data)
        rows = refused_or_read(lambda: _read_sidecar(root), root / SIDECAR)
        assert rows is None or all(isinstance(k, int) and isinstance(v, dict) for k, v in rows.items())


def check_lerobot_frames(column: list[np.ndarray]) -> None:
    try:
        frames = _as_uint8_frames(column)
    except DatasetError as err:
        assert "\n" not in str(err)
        return
    assert frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[-1] == 3


@functools.cache
def base_checkpoint() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        path = save_checkpoint(Path(tmp) / "ck", {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3)},
                               {"class": "Thing", "stats": {"mean": [0.5, 1.5], "std": [1.0, 2.0]}, "width": 3})
        return {name: (path / name).read_bytes() for name in ("config.json", "model.safetensors")}


CONFIG_EDITS = st.one_of(
    st.none(),
    st.tuples(st.just("bytes"), st.binary(max_size=80)),
    st.tuples(st.just("json"), JSON),
    st.tuples(st.just("drop"), st.sampled_from(["class", "schema_version", "stats"])),
    st.tuples(st.just("set"), st.sampled_from(["class", "schema_version", "stats"]), JSON),
    BYTES,
)
WEIGHT_EDITS = st.one_of(
    st.none(),
    BYTES,
    st.tuples(st.just("bytes"), st.binary(max_size=80)),
    st.tuples(st.just("header_len"), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("header"), JSON),
)
CHECKPOINT_PLANS = st.tuples(CONFIG_EDITS, WEIGHT_EDITS, st.sampled_from([None, "Thing", ("Other", "Thing"), "Other"]))


def _write_config(path: Path, edit: tuple | None) -> None:
    path.write_bytes(base_checkpoint()["config.json"])
    if edit is None or edit[0] in ("truncate", "flip"):
        return mutate_bytes(path, edit)
    if edit[0] == "bytes":
        return path.write_bytes(edit[1])
    if edit[0] == "json":
        return path.write_text(json.dumps(edit[1]))
    config = json.loads(path.read_text())
    if edit[0] == "drop":
        config.pop(edit[1])
    else:
        config[edit[1]] = edit[2]
    path.write_text(json.dumps(config))


def _write_weights(path: Path, edit: tuple | None) -> None:
    data = base_checkpoint()["model.safetensors"]
    path.write_bytes(data)
    if edit is None or edit[0] in ("truncate", "flip"):
        return mutate_bytes(path, edit)
    if edit[0] == "bytes":
        return path.write_bytes(edit[1])
    n = int.from_bytes(data[:8], "little")
    if edit[0] == "header_len":
        return path.write_bytes(edit[1].to_bytes(8, "little") + data[8:])
    header = json.dumps(edit[1]).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + data[8 + n:])


def check_checkpoint_load(plan: tuple) -> None:
    config_edit, weights_edit, expect = plan
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ck"
        path.mkdir()
        _write_config(path / "config.json", config_edit)
        _write_weights(path / "model.safetensors", weights_edit)
        got = refused_or_read(lambda: load_checkpoint(path, expect_class=expect), path,
                              (ValueError, FileNotFoundError))
        if got is not None:
            tensors, config = got
            assert isinstance(config, dict) and all(isinstance(t, torch.Tensor) for t in tensors.values())


def check_checkpoint_save(config: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ck"
        try:
            save_checkpoint(path, {"w": torch.zeros(2)}, {**config, "class": "Thing"})
        except ValueError as err:
            assert "\n" not in str(err) and list(Path(tmp).iterdir()) == [], "a refused save left files behind"
            return
        _, back = load_checkpoint(path, expect_class="Thing")
        assert back == json.loads(json.dumps({**config, "class": "Thing", "schema_version": back["schema_version"]}))


def targets(flips: bool = False) -> dict[str, Target]:
    """name -> what to draw and how to check it; `flips` also flips bytes of HDF5 files (see BYTES)."""
    return {
        "store": Target(h5_plans("wmsuite", flips), check_store),
        "robomimic": Target(h5_plans("robomimic", flips), lambda plan: check_public("robomimic", plan)),
        "libero": Target(h5_plans("libero", flips), lambda plan: check_public("libero", plan)),
        "lerobot_sidecar": Target(SIDECAR_PLANS, check_lerobot_sidecar),
        "lerobot_frames": Target(st.lists(ARRAYS, max_size=4), check_lerobot_frames),
        "checkpoint_load": Target(CHECKPOINT_PLANS, check_checkpoint_load),
        "checkpoint_save": Target(st.dictionaries(st.text(max_size=8), JSON, max_size=5), check_checkpoint_save),
    }


TARGETS = targets()

EXAMPLES = {"store": 60, "robomimic": 40, "libero": 40, "lerobot_sidecar": 60, "lerobot_frames": 60,
            "checkpoint_load": 80, "checkpoint_save": 60}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_malformed_input_is_refused_with_our_error_or_read(name):
    target = TARGETS[name]

    @settings(max_examples=EXAMPLES[name], deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(target.strategy)
    def fuzz(plan: Any) -> None:
        target.check(plan)

    fuzz()
