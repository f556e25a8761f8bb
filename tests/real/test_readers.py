"""Readers of the public Robomimic and LIBERO layouts, on files with their exact key structure (no extras needed)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from tests.real.public_layouts import LIBERO_PROBLEM, write_libero, write_robomimic
from wmsuite.data import DatasetError, load_episodes, write_episodes
from wmsuite.data.readers import (
    LIBERO,
    ROBOMIMIC_IMAGE,
    ROBOMIMIC_LOW_DIM,
    KeyMap,
    detect_layout,
    read_any,
    read_libero,
    read_robomimic,
)


def test_robomimic_image_maps_every_key(tmp_path):
    path = tmp_path / "image.hdf5"
    demos = write_robomimic(path, [5, 7], image=True, successes=[True, False])
    eps = read_robomimic(path)
    assert [ep.length for ep in eps] == [5, 7]
    for ep, demo in zip(eps, demos):
        traj = demo["traj"]
        # frames: obs/ (T) then the last next_obs/ frame, upright as robomimic stores them
        np.testing.assert_array_equal(ep.obs["agentview"], traj["agentview_image"])
        np.testing.assert_array_equal(ep.obs["robot0_eye_in_hand"], traj["robot0_eye_in_hand_image"])
        want_state = np.concatenate([traj["robot0_eef_pos"], traj["robot0_eef_quat"], traj["robot0_gripper_qpos"]], 1)
        np.testing.assert_array_equal(ep.state, want_state.astype(np.float32))
        np.testing.assert_array_equal(ep.env_state, traj["object"].astype(np.float32))
        np.testing.assert_array_equal(ep.actions, demo["actions"].astype(np.float32))
        np.testing.assert_array_equal(ep.rewards, demo["rewards"].astype(np.float32))
        assert ep.task == "" and ep.meta["env_name"] == "Lift" and ep.meta["source"] == "robomimic"
    assert [ep.success for ep in eps] == [True, False]  # from the sparse reward, not from dones (1 at every end)


def test_robomimic_low_dim_default_key_map_and_sim_states(tmp_path):
    path = tmp_path / "low_dim.hdf5"
    demos = write_robomimic(path, [6], image=False)
    (ep,) = read_robomimic(path)
    assert ep.obs == {} and ep.length == 6 and ep.state.shape == (7, 9)
    (ep,) = read_robomimic(path, key_map=ROBOMIMIC_LOW_DIM, sim_states=True)
    # no final state is stored: the last action goes, the states line up with obs/
    assert ep.length == 5
    np.testing.assert_array_equal(ep.sim_states, demos[0]["states"])
    np.testing.assert_array_equal(ep.actions, demos[0]["actions"][:5].astype(np.float32))
    np.testing.assert_array_equal(ep.state[:, :3], demos[0]["traj"]["robot0_eef_pos"][:6].astype(np.float32))


def test_robomimic_filter_keys(tmp_path):
    path = tmp_path / "image.hdf5"
    demos = write_robomimic(path, [3, 4, 5, 6, 7], image=False, masks={"train": [0, 2, 3], "valid": [1, 4]})
    train, valid = read_robomimic(path, filter_key="train"), read_robomimic(path, filter_key="valid")
    assert [ep.meta["demo_key"] for ep in train] == ["demo_0", "demo_2", "demo_3"]
    assert [ep.length for ep in valid] == [4, 7]
    np.testing.assert_array_equal(valid[1].actions, demos[4]["actions"].astype(np.float32))
    with pytest.raises(DatasetError, match=r"no filter key mask/test; available: \['train', 'valid'\]"):
        read_robomimic(path, filter_key="test")


def test_robomimic_agrees_with_robomimics_own_reader(tmp_path):
    SequenceDataset = pytest.importorskip("robomimic.utils.dataset").SequenceDataset
    path = tmp_path / "image.hdf5"
    write_robomimic(path, [6, 5], image=True, masks={"train": [1]})
    ds = SequenceDataset(hdf5_path=str(path), obs_keys=("agentview_image", "robot0_eef_pos", "object"),
                         dataset_keys=("actions",), seq_length=2, frame_stack=1, pad_seq_length=True,
                         hdf5_cache_mode=None, load_next_obs=True, filter_by_attribute="train")
    (ep,) = read_robomimic(path, filter_key="train")
    for t in range(ep.length):
        item = ds[t]
        np.testing.assert_allclose(item["actions"][0], ep.actions[t], rtol=0, atol=1e-6)
        np.testing.assert_allclose(item["obs"]["robot0_eef_pos"][0], ep.state[t, :3], rtol=0, atol=1e-6)
        np.testing.assert_allclose(item["obs"]["object"][0], ep.env_state[t], rtol=0, atol=1e-6)
        np.testing.assert_array_equal(item["obs"]["agentview_image"][0], ep.obs["agentview"][t])
        np.testing.assert_array_equal(item["next_obs"]["agentview_image"][0], ep.obs["agentview"][t + 1])


def test_libero_alignment_flip_and_language(tmp_path):
    path = tmp_path / "task_demo.hdf5"
    demos = write_libero(path, [6, 8])
    eps = read_libero(path)
    for ep, demo in zip(eps, demos):
        t = len(demo["actions"])
        # obs[k] was recorded after actions[k]: frame k is followed by actions[k + 1]
        assert ep.length == t - 1
        np.testing.assert_array_equal(ep.actions, demo["actions"][1:].astype(np.float32))
        # frames stored bottom-up (macros_image_convention = opengl) come back upright
        np.testing.assert_array_equal(ep.obs["agentview"], demo["obs"]["agentview_rgb"][:, ::-1])
        np.testing.assert_array_equal(ep.obs["robot0_eye_in_hand"], demo["obs"]["eye_in_hand_rgb"][:, ::-1])
        want = np.concatenate([demo["obs"]["ee_states"], demo["obs"]["gripper_states"]], 1).astype(np.float32)
        np.testing.assert_array_equal(ep.state, want)
        assert ep.env_state.shape == (t, 0)
        assert ep.task == LIBERO_PROBLEM["language_instruction"] and ep.success
    (ep,) = read_libero(path, limit=1, sim_states=True)
    # the state before actions[k + 1] is states[k + 1]; the state after the last action is not stored
    np.testing.assert_array_equal(ep.sim_states, demos[0]["states"][1:])
    np.testing.assert_array_equal(ep.actions, demos[0]["actions"][1:-1].astype(np.float32))
    np.testing.assert_array_equal(ep.obs["agentview"], demos[0]["obs"]["agentview_rgb"][:-1, ::-1])


@pytest.mark.parametrize("convention,flipped", [("opencv", False), ("opengl", True)])
def test_libero_image_convention_is_read_from_the_file(tmp_path, convention, flipped):
    path = tmp_path / "d.hdf5"
    demos = write_libero(path, [4], convention=convention)
    raw = demos[0]["obs"]["agentview_rgb"]
    (ep,) = read_libero(path, cameras=["agentview"])
    np.testing.assert_array_equal(ep.obs["agentview"], raw[:, ::-1] if flipped else raw)
    assert list(ep.obs) == ["agentview"]


def test_layout_detection_and_dispatch(tmp_path):
    from tests.core.helpers import make_episode

    rm, lb, ours = tmp_path / "rm.hdf5", tmp_path / "lb.hdf5", tmp_path / "ours.hdf5"
    write_robomimic(rm, [4], image=False)
    write_libero(lb, [4])
    write_episodes(ours, [make_episode(t=3)])
    for path, layout in ((rm, "robomimic"), (lb, "libero"), (ours, "wmsuite")):
        with h5py.File(path, "r") as f:
            assert detect_layout(f) == layout
    assert read_any(rm)[0].meta["source"] == "robomimic"
    assert read_any(lb)[0].task == LIBERO_PROBLEM["language_instruction"]
    assert read_any(ours)[0].length == 3
    # the training commands' entry point reads every layout
    assert [len(load_episodes(p)) for p in (rm, lb, ours)] == [1, 1, 1]


def test_missing_keys_name_the_fix(tmp_path):
    path = tmp_path / "low_dim.hdf5"
    write_robomimic(path, [4], image=False)
    with pytest.raises(DatasetError, match=r"lacks \['agentview_image', 'robot0_eye_in_hand_image'\].*ROBOMIMIC_LOW_DIM"):
        read_robomimic(path, key_map=ROBOMIMIC_IMAGE)
    with h5py.File(path, "a") as f:
        del f["data/demo_0/obs/object"]
    with pytest.raises(DatasetError, match=r"obs lacks \['object'\]"):
        read_robomimic(path)
    custom = KeyMap(cameras={}, agent_pos=("robot0_joint_pos",))
    assert read_robomimic(path, key_map=custom)[0].state.shape == (5, 7)

    lb = tmp_path / "lb.hdf5"
    write_libero(lb, [4], convention=None)
    with pytest.raises(DatasetError, match="macros_image_convention.*flip_images"):
        read_libero(lb)
    assert read_libero(lb, key_map=KeyMap(**{**LIBERO.__dict__, "flip_images": False}))[0].length == 3
    write_libero(lb, [4], problem_info={"problem_name": "x"})
    with pytest.raises(DatasetError, match="no language_instruction"):
        read_libero(lb)


def test_not_a_dataset(tmp_path):
    bad = tmp_path / "x.hdf5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(DatasetError, match="not an HDF5 file"):
        read_any(bad)
    with h5py.File(tmp_path / "raw.hdf5", "w") as f:
        f.create_dataset("data/demo_0/states", data=np.zeros((3, 4)))
    with pytest.raises(DatasetError, match="dataset_states_to_obs"):
        read_any(tmp_path / "raw.hdf5")
    with pytest.raises(FileNotFoundError):
        read_any(tmp_path / "missing.hdf5")
