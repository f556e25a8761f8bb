"""Bad data is refused where it enters, with one error of the tool's own that names the file.

One test per concrete case the reliability issue names; tests/core/test_fuzz_inputs.py sweeps the
same readers with generated inputs.
"""

from __future__ import annotations

import json
import logging
import math

import h5py
import numpy as np
import pytest
import torch

from tests.core.helpers import make_episode
from wmsuite.checkpoint import load_checkpoint, save_checkpoint
from wmsuite.cli import main as cli_main
from wmsuite.data import (
    DatasetError,
    count_episodes,
    load_episodes,
    read_episodes,
    validate_finite,
    write_episodes,
)


def _nan_action_file(tmp_path, bad_demo: int = 1, step: int = 2):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode(t=4, seed=i) for i in range(3)])
    with h5py.File(path, "r+") as f:
        actions = f[f"data/demo_{bad_demo}/actions"]
        values = actions[()]
        values[step, 1] = np.nan
        actions[...] = values
    return path


def test_nan_action_names_the_demo_the_key_and_the_step(tmp_path):
    path = _nan_action_file(tmp_path)
    with pytest.raises(DatasetError) as info:
        load_episodes(path)
    assert str(info.value) == f"{path}:data/demo_1: actions contains NaN or inf at step 2"
    with pytest.raises(DatasetError, match="demo_1: actions"):
        read_episodes(path)


def test_drop_bad_skips_the_bad_demo_and_says_so(tmp_path, caplog):
    path = _nan_action_file(tmp_path)
    with caplog.at_level(logging.WARNING, logger="wmsuite.data"):
        episodes = load_episodes(path, drop_bad=True)
    assert [ep.meta["seed"] for ep in episodes] == [0, 2]
    messages = [r.getMessage() for r in caplog.records]
    assert any("demo_1: actions contains NaN or inf at step 2" in m for m in messages)
    assert f"dropped 1 of 3 episodes of {path} (non-finite or malformed)" in messages
    assert len(read_episodes(path, drop_bad=True)) == 2
    assert count_episodes(path) == 3  # counting does not read the demos


def test_drop_bad_refuses_a_file_with_nothing_left(tmp_path):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode(t=3)])
    with h5py.File(path, "r+") as f:
        f["data/demo_0/rewards"][0] = np.inf
    with pytest.raises(DatasetError, match=r"all 1 episodes are non-finite or malformed.*rewards contains NaN"):
        load_episodes(path, drop_bad=True)


def test_episode_refuses_non_finite_actions_and_writers_recheck(tmp_path):
    ep = make_episode(t=3)
    bad = ep.actions.copy()
    bad[1, 0] = -np.inf
    with pytest.raises(ValueError, match="actions contains NaN or inf at step 1"):
        type(ep)(obs=ep.obs, state=ep.state, actions=bad, rewards=ep.rewards, success=True)
    ep.state[2, 0] = np.nan  # arrays stay mutable after the checks
    assert validate_finite(ep) == "state contains NaN or inf at step 2"
    with pytest.raises(ValueError, match="episode 0 state contains NaN"):
        write_episodes(tmp_path / "d.hdf5", [ep])
    assert not (tmp_path / "d.hdf5").exists()


def test_truncated_file_is_one_dataset_error(tmp_path):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode(t=4, seed=i) for i in range(2)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    for read in (load_episodes, count_episodes):
        with pytest.raises(DatasetError, match="truncated or corrupt") as info:
            read(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_damaged_bytes_inside_a_demo_name_the_demo(tmp_path):
    # HDF5 checks a file's length when it opens it, so a cut anywhere is the error above; damage inside
    # one demo's data (a bad sector, a bad copy) is caught when that demo is read
    episodes = [make_episode(t=4, seed=i) for i in range(3)]
    episodes[2].obs["top"][:] = 7  # frames that compress (random ones are stored raw)
    path = write_episodes(tmp_path / "d.hdf5", episodes)
    with h5py.File(path, "r") as f:
        actions_at = f["data/demo_1/actions"].id.get_offset()  # contiguous float32 (T, A)
        chunk = f["data/demo_2/obs/top_image"].id.get_chunk_info(0)  # an lzf-compressed frame
    data = bytearray(path.read_bytes())
    data[actions_at:actions_at + 4] = b"\xff" * 4  # a NaN
    data[chunk.byte_offset:chunk.byte_offset + chunk.size] = b"\xff" * chunk.size
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"data/demo_1: actions contains NaN or inf at step 0"):
        load_episodes(path)
    with pytest.raises(DatasetError, match=r"data/demo_2: unreadable \(.*\); the file is truncated or corrupt"):
        read_episodes(path, indices=[2])
    assert [ep.meta["seed"] for ep in load_episodes(path, drop_bad=True)] == [0]


def test_a_text_file_is_not_a_dataset(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_text("these are not episodes\n")
    with pytest.raises(DatasetError, match="is not an HDF5 file"):
        load_episodes(path)
    assert cli_main(["convert", "--src", str(path), "--dst", str(tmp_path / "o.hdf5")]) == 2
    err = capsys.readouterr().err
    assert "HDF5 datasets (ours, Robomimic's, LIBERO's) and LeRobotDataset folders" in err
    assert len(err.strip().splitlines()) == 2  # the error, then the WMSUITE_DEBUG hint


def test_write_over_an_existing_file_points_at_overwrite(tmp_path, capsys):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode(t=3)])
    with pytest.raises(FileExistsError, match="pass --overwrite to replace it or choose another path"):
        write_episodes(path, [make_episode(t=3)])
    src = write_episodes(tmp_path / "src.hdf5", [make_episode(t=3)])
    assert cli_main(["convert", "--src", str(src), "--dst", str(path)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert cli_main(["convert", "--src", str(src), "--dst", str(path), "--overwrite"]) == 0


def _checkpoint(tmp_path):
    return save_checkpoint(tmp_path / "ck", {"w": torch.arange(12.0).reshape(3, 4)},
                           {"class": "Thing", "stats": {"mean": [0.0, 1.0]}})


@pytest.mark.parametrize("content, match", [
    (b'{"class": "Thing", "schema_ver', "is not valid JSON"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    (b"[1, 2]", "holds a JSON list, not an object"),
    (b'{"class": "Thing", "schema_version": 1, "std": NaN}', "NaN is not a finite number"),
])
def test_corrupt_config_json_names_the_file(tmp_path, content, match):
    path = _checkpoint(tmp_path)
    (path / "config.json").write_bytes(content)
    with pytest.raises(ValueError, match=match) as info:
        load_checkpoint(path)
    assert str(path / "config.json") in str(info.value)


def test_config_without_class_is_refused_when_a_class_is_expected(tmp_path):
    path = _checkpoint(tmp_path)
    (path / "config.json").write_text(json.dumps({"schema_version": 1}))
    assert load_checkpoint(path)[1] == {"schema_version": 1}
    with pytest.raises(ValueError, match="lacks 'class'"):
        load_checkpoint(path, expect_class="Thing")


@pytest.mark.parametrize("cut", [0, 7, 40, -3])
def test_truncated_safetensors_names_the_file(tmp_path, cut):
    path = _checkpoint(tmp_path)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:cut])
    with pytest.raises(ValueError, match="is corrupt or truncated.*re-copy the checkpoint or retrain it") as info:
        load_checkpoint(path, expect_class="Thing")
    assert str(weights) in str(info.value)


@pytest.mark.parametrize("value", [math.nan, np.float32("inf"), np.array([1.0, -np.inf])])
def test_non_finite_config_is_refused_before_anything_is_written(tmp_path, value):
    std = value if isinstance(value, np.ndarray) else [1.0, value]
    with pytest.raises(ValueError, match=r"'stats\.std\[1\]' is -?(nan|inf), not a finite number") as info:
        save_checkpoint(tmp_path / "ck", {"w": torch.zeros(2)}, {"class": "Thing", "stats": {"std": std}})
    assert str(tmp_path / "ck") in str(info.value)
    assert list(tmp_path.iterdir()) == []
