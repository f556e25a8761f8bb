"""Training windows index the right frames, actions and padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.core.helpers import make_episode
from wmsuite.data import write_episodes
from wmsuite.data.windows import WindowConfig, WindowDataset


def test_window_contents_match_episode():
    ep = make_episode(t=6)
    ds = WindowDataset([ep], WindowConfig(context=2, chunk=3, future=3))
    assert len(ds) == 6  # anchors t = 0..5 with padded chunks
    item = ds[2]  # anchor t = 2
    np.testing.assert_array_equal(item["context_frames"]["top"].numpy(), ep.obs["top"][[1, 2]].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(item["actions"].numpy(), ep.actions[2:5])
    np.testing.assert_array_equal(item["future_frames"]["top"].numpy(), ep.obs["top"][3:6].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(item["future_state"].numpy(), ep.state[3:6])
    assert not item["action_is_pad"].any() and not item["context_is_pad"].any()


def test_padding_at_both_ends():
    ep = make_episode(t=4, success=True)
    ds = WindowDataset([ep], WindowConfig(context=3, chunk=3, future=3))
    first, last = ds[0], ds[len(ds) - 1]  # anchors 0 and 3
    assert first["context_is_pad"].tolist() == [True, True, False]
    np.testing.assert_array_equal(first["context_state"][0].numpy(), ep.state[0])
    assert last["action_is_pad"].tolist() == [False, True, True]
    np.testing.assert_array_equal(last["actions"][2].numpy(), ep.actions[3])  # repeats the last action
    assert last["rewards"][1:].abs().sum() == 0
    assert last["future_is_pad"].tolist() == [False, True, True]
    assert last["reached_success"].tolist() == [True, True, True]


def test_no_padding_option_and_loader(tmp_path):
    path = write_episodes(tmp_path / "d.hdf5", [make_episode(t=6, seed=i) for i in range(2)])
    ds = WindowDataset(path, WindowConfig(chunk=4, pad_actions=False))
    assert len(ds) == 2 * 3
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    assert batch["context_frames"]["top"].shape == (4, 1, 3, 8, 8) and batch["actions"].shape == (4, 4, 2)


def test_bad_window_config():
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        WindowConfig(chunk=0)
    with pytest.raises(ValueError, match="no window"):
        WindowDataset([make_episode(t=3)], WindowConfig(chunk=5, pad_actions=False))
