"""Bad input to the commands ends in one error line naming what is wrong and what to do, before any
long compute, and nothing is written for it: non-finite data, unknown env ids, the wrong kind of
checkpoint, policy kwargs that do not fit, unwritable outputs, corrupt checkpoints."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from tests.core.helpers import make_episode
from wmsuite.cli import main
from wmsuite.data import write_episodes

POLICY = "assets:policies/flow-pushcube-s3000"
TINY_POLICY = ["--policy.image-size", "16", "--policy.channels", "8", "16", "--policy.feature-dim", "32",
               "--policy.hidden-dim", "64", "--policy.head-layers", "2", "--policy.horizon", "4", "--train.steps", "2",
               "--train.batch-size", "4", "--threads", "1"]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("WMSUITE_DEBUG", raising=False)


def one_error(capsys) -> str:
    """The stderr of a refused command: one 'error:' line (and the hint how to see a traceback)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def nan_data(tmp_path):
    path = tmp_path / "nan.hdf5"
    write_episodes(path, [make_episode(t=10, size=16, seed=i) for i in range(3)], {"env_name": "test"})
    with h5py.File(path, "r+") as f:
        f["data/demo_1/actions"][4, 0] = np.nan
    return path


def test_non_finite_data_is_refused_by_every_command_that_reads_it(nan_data, tmp_path, capsys, caplog):
    for argv in (["train-policy", "--data", str(nan_data), "--out", str(tmp_path / "p"), *TINY_POLICY],
                 ["train-wm", "--data", str(nan_data), "--out", str(tmp_path / "w")],
                 ["eval-wm", "--data", str(nan_data), "--out", str(tmp_path / "e")]):
        assert main(argv) == 2
        line = one_error(capsys)
        assert "demo_1" in line and "actions" in line, line
    assert not (tmp_path / "p" / "latest").exists() and not (tmp_path / "w" / "latest").exists()
    # --drop-bad trains on the rest and says how many it dropped
    assert main(["train-policy", "--data", str(nan_data), "--out", str(tmp_path / "p2"), "--drop-bad",
                 *TINY_POLICY]) == 0
    assert "dropped 1 of 3 episodes" in caplog.text and "demo_1: actions" in caplog.text
    assert "on 2 of 2 episodes" in capsys.readouterr().out


def test_unknown_env_ids_wrong_checkpoints_and_kwargs(tmp_path, capsys):
    assert main(["eval", "--env", "wmsuite/NoSuch-v0", "--out", str(tmp_path / "a")]) == 2
    assert "unknown env id 'wmsuite/NoSuch-v0'" in one_error(capsys)
    assert main(["eval-policy", "--env", "wmsuite/NoSuch-v0", "--policy", "expert", "--out", str(tmp_path / "b")]) == 2
    assert "unknown env id" in one_error(capsys)  # not reported as a task without an expert
    assert main(["eval", "--wm", POLICY, "--policies", "expert@1", "expert@0", "--out", str(tmp_path / "c")]) == 2
    assert "ChunkPolicy" in one_error(capsys)  # a policy checkpoint given as the world model
    assert main(["eval", "--policies", 'tests.policies.user_policy:GoToOrigin{"nope": 1}', "expert@1",
                 "--out", str(tmp_path / "d")]) == 2
    assert "keyword arguments do not fit GoToOrigin" in one_error(capsys)
    assert main(["eval", "--round-trip", "--out", str(tmp_path / "e")]) == 2  # the shipped model: forward only
    assert "--round-trip-wm assets:wm/pushcube-back" in one_error(capsys)
    with pytest.raises(SystemExit) as exit_:  # a config error: the parser stops with code 2
        main(["eval", "--real-episodes", "50", "--out", str(tmp_path / "f")])
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())  # tyro's boxed message, re-wrapped
    assert exit_.value.code == 2 and "--real-episodes must be 0 (all) or below --episodes (50), got 50" in err
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--idm-stop", "-0.1", "--out", str(tmp_path / "g")])
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert exit_.value.code == 2 and "--idm-stop must be 0 (off) or a positive" in err
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--calibration", "cal.json", "--out", str(tmp_path / "h")])
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert exit_.value.code == 2 and "--calibration scores the round trip" in err
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--noise-seed", "-1", "--out", str(tmp_path / "i")])
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert exit_.value.code == 2 and "--noise-seed must be >= 0" in err


def test_unwritable_output_fails_before_the_compute(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    data = tmp_path / "d.hdf5"
    write_episodes(data, [make_episode(t=10, size=16)], {"env_name": "test"})
    assert main(["eval-wm", "--data", str(data), "--out", str(blocker / "out")]) == 2
    assert "not writable" in one_error(capsys)


def test_corrupt_checkpoints_are_named(tmp_path, capsys):
    from wmsuite.specs import resolve_asset

    bad = tmp_path / "wm"
    shutil.copytree(resolve_asset("assets:wm/pushcube"), bad)
    (bad / "config.json").write_text("{not json")
    assert main(["eval", "--wm", str(bad), "--policies", "expert@1", "expert@0", "--out", str(tmp_path / "o")]) == 2
    assert str(bad / "config.json") in one_error(capsys)


def test_a_truncated_dataset_is_one_error_in_every_command(tmp_path, capsys):
    data = tmp_path / "cut.hdf5"
    write_episodes(data, [make_episode(t=10, size=16, seed=i) for i in range(3)], {"env_name": "test"})
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    for argv in (["train-policy", "--data", str(data), "--out", str(tmp_path / "p"), *TINY_POLICY],
                 ["train-wm", "--data", str(data), "--out", str(tmp_path / "w")],
                 ["eval-wm", "--data", str(data)],
                 ["convert", "--src", str(data), "--dst", str(tmp_path / "c.hdf5")],
                 ["collect", "--episodes", "1", "--num-envs", "1", "--out", str(data), "--append"]):
        assert main(argv) == 2, argv
        assert str(data) in one_error(capsys)


def test_derived_labels_tell_policies_apart():
    from wmsuite.cli.eval_setup import _labelled, unique_labels

    entries = unique_labels([_labelled(s) for s in ("a/final", "b/final", "assets:policies/x", "expert@0.5",
                                                    'm:Exp{"skill": 1.0}', 'm:Exp{"skill": 0.0}', "mine=m:Exp")])
    assert [e.name for e in entries] == ["a/final", "b/final", "x", "expert@0.5", 'm:Exp{"skill":1.0}',
                                         'm:Exp{"skill":0.0}', "mine"]
    assert entries[-1].spec == "m:Exp"
