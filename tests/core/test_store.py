"""Episode store: exact round trip, independent readers, crash safety, clear errors."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

import h5py
import numpy as np
import pytest

from tests.core.helpers import make_episode
from wmsuite.data import (
    DatasetError,
    append_episodes,
    count_episodes,
    load_episodes,
    read_episodes,
    write_episodes,
)
from wmsuite.data.stream import EpisodeStream
from wmsuite.types import Episode


def assert_same(a: Episode, b: Episode) -> None:
    assert a.cameras == b.cameras
    for c in a.cameras:
        np.testing.assert_array_equal(a.obs[c], b.obs[c])
    for name in ("state", "env_state", "actions", "rewards", "intervention", "sim_states"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.success, a.terminated, a.truncated, a.task, a.meta) == (b.success, b.terminated, b.truncated, b.task, b.meta)


def test_round_trip_is_exact(tmp_path):
    eps = [make_episode(t=5 + i, seed=i, cameras=("top", "wrist"), success=i % 2 == 0) for i in range(3)]
    path = write_episodes(tmp_path / "d.hdf5", eps, env_args={"env_name": "x"})
    back = read_episodes(path)
    assert len(back) == 3
    for a, b in zip(eps, back):
        assert_same(a, b)
    assert load_episodes(path)[1].length == 6


def test_layout_read_by_h5py_by_path(tmp_path):
    ep = make_episode(t=4)
    path = write_episodes(tmp_path / "d.hdf5", [ep], env_args={"env_name": "wmsuite/PushCube-v0"})
    with h5py.File(path, "r") as f:
        assert json.loads(f["data"].attrs["env_args"])["env_name"] == "wmsuite/PushCube-v0"
        assert f["data"].attrs["total"] == 4
        g = f["data/demo_0"]
        assert g.attrs["num_samples"] == 4
        np.testing.assert_array_equal(g["obs/top_image"][()], ep.obs["top"][:4])
        np.testing.assert_array_equal(g["next_obs/top_image"][()], ep.obs["top"][1:])
        np.testing.assert_array_equal(g["actions"][()], ep.actions)
        np.testing.assert_array_equal(g["states"][()], ep.sim_states[:4])
        assert g["dones"][()].tolist() == [0, 0, 0, 1]


def test_read_by_robomimic_sequence_dataset(tmp_path):
    SequenceDataset = pytest.importorskip("robomimic.utils.dataset").SequenceDataset
    eps = [make_episode(t=6, seed=i) for i in range(2)]
    path = write_episodes(tmp_path / "d.hdf5", eps)
    ds = SequenceDataset(hdf5_path=str(path), obs_keys=("agent_pos", "top_image"), dataset_keys=("actions", "rewards"),
                         seq_length=3, frame_stack=1, pad_seq_length=True, hdf5_cache_mode=None, load_next_obs=False)
    assert len(ds) == 12
    item = ds[7]  # demo_1, t = 1
    np.testing.assert_allclose(item["actions"], eps[1].actions[1:4])
    np.testing.assert_allclose(item["obs"]["agent_pos"][0], eps[1].state[1])


def test_append_keeps_earlier_and_numbers_on(tmp_path):
    path = tmp_path / "d.hdf5"
    append_episodes(path, [make_episode(seed=0)])
    append_episodes(path, [make_episode(seed=1), make_episode(seed=2)])
    back = read_episodes(path)
    assert [e.meta["seed"] for e in back] == [0, 1, 2]
    with h5py.File(path, "r") as f:
        assert sorted(f["data"].keys()) == ["demo_0", "demo_1", "demo_2"]
        assert f["data"].attrs["total"] == 18
    with pytest.raises(FileExistsError, match="append_episodes"):
        write_episodes(path, [make_episode()])


def _append_forever(path: str) -> None:
    big = [make_episode(t=200, size=64, seed=100 + i) for i in range(20)]
    while True:
        append_episodes(path, big)


def test_kill_mid_append_leaves_earlier_episodes(tmp_path):
    path = tmp_path / "d.hdf5"
    first = [make_episode(seed=i) for i in range(3)]
    write_episodes(path, first)
    proc = mp.get_context("spawn").Process(target=_append_forever, args=(str(path),))
    proc.start()
    deadline = time.time() + 60
    while not list(tmp_path.glob(".d.hdf5.*.tmp")) and time.time() < deadline:  # wait until it is mid-write
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    back = read_episodes(path)
    assert len(back) in (3, 23, 43, 63)  # whole appends only
    for a, b in zip(first, back[:3]):
        assert_same(a, b)


def test_stream_resumes_and_merges(tmp_path):
    out = tmp_path / "d.hdf5"
    stream = EpisodeStream(out)
    for i in (0, 2):
        stream.add(make_episode(seed=i))
    assert stream.done_indices() == {0, 2}  # an interrupted run: shards kept, target untouched
    assert not out.exists()
    stream = EpisodeStream(out)
    stream.add(make_episode(seed=1))
    assert stream.merge() == 3
    assert [e.meta["episode_index"] for e in read_episodes(out)] == [0, 1, 2]
    assert not stream.parts.exists()


@pytest.mark.parametrize("setup, match", [
    (lambda p: None, "no dataset at"),
    (lambda p: p.write_text("not hdf5"), "is not an HDF5 file"),
    (lambda p: h5py.File(p, "w").close(), "no 'data' group"),
])
def test_bad_files_say_what_is_wrong(tmp_path, setup, match):
    path = tmp_path / "d.hdf5"
    setup(path)
    with pytest.raises((DatasetError, FileNotFoundError), match=match):
        read_episodes(path)


def test_missing_keys_are_named(tmp_path):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode()])
    with h5py.File(path, "r+") as f:
        del f["data/demo_0/actions"]
    with pytest.raises(DatasetError, match="lacks 'actions'"):
        read_episodes(path)
    with pytest.raises(DatasetError, match="no filter key mask/train"):
        read_episodes(path, filter_key="train")
    assert count_episodes(path) == 1


def test_episode_checks_shapes_and_nan():
    ep = make_episode()
    with pytest.raises(ValueError, match="state must have shape"):
        Episode(obs=ep.obs, state=ep.state[:-1], actions=ep.actions, rewards=ep.rewards, success=True)
    bad = ep.actions.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Episode(obs=ep.obs, state=ep.state, actions=ep.actions, rewards=bad[:, 0], success=True)
    with pytest.raises(ValueError, match="uint8"):
        Episode(obs={"top": ep.obs["top"].astype(np.float32)}, state=ep.state, actions=ep.actions,
                rewards=ep.rewards, success=True)
