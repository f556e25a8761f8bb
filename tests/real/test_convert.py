"""`wmsuite convert` between the HDF5 layouts (no extras needed), and its errors."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from tests.real.public_layouts import LIBERO_PROBLEM, write_libero, write_robomimic
from wmsuite.cli import main as cli_main
from wmsuite.cli.convert import ConvertConfig
from wmsuite.data import EpisodeFile, read_episodes
from wmsuite.data.readers import read_libero, read_robomimic


def test_robomimic_train_split_to_ours(tmp_path, capsys):
    src = tmp_path / "image.hdf5"
    write_robomimic(src, [4, 5, 6], image=True, masks={"train": [0, 2], "valid": [1]})
    dst = tmp_path / "lift_train.hdf5"
    assert cli_main(["convert", "--src", str(src), "--dst", str(dst), "--filter-key", "train"]) == 0
    assert "converted 2 episodes (12 frames) from hdf5" in capsys.readouterr().out
    want = read_robomimic(src, filter_key="train")
    got = read_episodes(dst)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(b.obs["agentview"], a.obs["agentview"])
        np.testing.assert_array_equal(b.state, a.state)
        np.testing.assert_array_equal(b.actions, a.actions)
        assert b.success == a.success and b.meta["demo_key"] == a.meta["demo_key"]
    with EpisodeFile(dst) as f:
        assert f.is_wmsuite and f.env_args["env_name"] == "Lift" and f.env_args["converted_from"] == str(src)


def test_libero_with_sim_states_to_ours(tmp_path):
    src = tmp_path / "task_demo.hdf5"
    demos = write_libero(src, [6])
    dst = tmp_path / "libero.hdf5"
    assert cli_main(["convert", "--src", str(src), "--dst", str(dst), "--sim-states"]) == 0
    (ep,) = read_episodes(dst)
    (want,) = read_libero(src, sim_states=True)
    assert ep.task == LIBERO_PROBLEM["language_instruction"] and ep.length == 4
    np.testing.assert_array_equal(ep.sim_states, demos[0]["states"][1:])
    np.testing.assert_array_equal(ep.obs["robot0_eye_in_hand"], want.obs["robot0_eye_in_hand"])


def test_bad_arguments_and_sources(tmp_path):
    with pytest.raises(ValueError, match="--src is required"):
        ConvertConfig(dst="x.hdf5")
    with pytest.raises(ValueError, match="must end in .hdf5 or .h5"):
        ConvertConfig(src="a.hdf5", dst="out", to="hdf5")
    assert ConvertConfig(src="a.hdf5", dst="out_folder").to == "lerobot"
    with pytest.raises(SystemExit, match="no dataset at"):
        cli_main(["convert", "--src", str(tmp_path / "missing.hdf5"), "--dst", str(tmp_path / "o.hdf5")])
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit, match="not a LeRobotDataset"):
        cli_main(["convert", "--src", str(tmp_path / "folder"), "--dst", str(tmp_path / "o.hdf5")])


@pytest.mark.skipif(importlib.util.find_spec("lerobot") is not None, reason="lerobot is installed here")
def test_lerobot_output_without_the_extra_names_the_venv(tmp_path, capsys):
    src = tmp_path / "low_dim.hdf5"
    write_robomimic(src, [4], image=False)
    assert cli_main(["convert", "--src", str(src), "--dst", str(tmp_path / "lr")]) == 2
    assert re.search(r"install-extras.sh lerobot.*\.venv-lerobot/bin/wmsuite convert", capsys.readouterr().err)


@pytest.mark.parametrize("layout", ["robomimic", "libero"])
def test_training_commands_take_public_layouts_directly(tmp_path, layout):
    path = tmp_path / f"{layout}.hdf5"
    if layout == "robomimic":
        write_robomimic(path, [12, 10], image=True, size=32)
    else:
        write_libero(path, [12, 10], size=32)
    assert cli_main(["train-policy", "--data", str(path), "--out", str(tmp_path / "policy"), "--train.steps", "2",
                     "--train.batch-size", "4", "--train.save-every", "2", "--threads", "1",
                     "--policy.horizon", "4", "--policy.n-action-steps", "2"]) == 0
    assert cli_main(["train-wm", "--data", str(path), "--out", str(tmp_path / "wm"), "--dynamics.steps", "2",
                     "--dynamics.batch-size", "2", "--codec-train.steps", "2", "--model.context", "2",
                     "--model.chunk", "2", "--model.camera", "agentview", "--model.channels", "16", "16",
                     "--codec.image-size", "32", "--heads-train.steps", "2", "--heads-train.batch-size", "4"]) == 0
