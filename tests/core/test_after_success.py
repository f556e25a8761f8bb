"""`wmsuite collect --after-success N`: episodes go on N steps past their first success, record where
success began, and the world model's success labels start there; without the flag nothing changes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from wmsuite.envs.push_cube import is_success_from_env_state


def _collect(tmp_path, name, *extra):
    from wmsuite.cli import main
    from wmsuite.data.hdf5 import read_episodes

    out = tmp_path / name
    assert main(["collect", "--env", "wmsuite/PushCube-v0", "--skill", "1.0", "--episodes", "3", "--seed", "5",
                 "--image-size", "16", "--num-envs", "1", "--out", str(out), *extra]) == 0
    return read_episodes(out)


def test_episodes_go_on_past_success_and_labels_start_there(tmp_path):
    from wmsuite.data.windows import WindowConfig, WindowDataset
    from wmsuite.world_models.data import frame_targets

    plain = _collect(tmp_path, "plain.hdf5")
    held = _collect(tmp_path, "held.hdf5", "--after-success", "5")
    assert all(ep.success for ep in plain) and all("success_step" not in ep.meta for ep in plain)
    for p, h in zip(plain, held, strict=True):
        s = h.meta["success_step"]
        assert s == p.length == h.success_from and h.length == s + 5  # five steps past the plain episode's end
        np.testing.assert_array_equal(h.actions[:s], p.actions)  # the same episode up to its success
        np.testing.assert_array_equal(h.env_state[: s + 1], p.env_state)
        reached = is_success_from_env_state(h.env_state)  # (T+1,) the task's own rule, frame by frame
        assert reached[s] and not reached[:s].any()
    labels = frame_targets(held)["success"].numpy()
    want = np.concatenate([np.arange(ep.length + 1) >= ep.meta["success_step"] for ep in held])
    np.testing.assert_array_equal(labels, want)
    plain_labels = frame_targets(plain)["success"].numpy()  # unchanged: the last frame of each
    np.testing.assert_array_equal(plain_labels, np.concatenate([np.arange(ep.length + 1) == ep.length for ep in plain]))
    data = WindowDataset(held, WindowConfig(context=2, future=3))
    for i in range(len(data)):
        item = data[i]
        ep = held[int(item["episode_index"])]
        fut = int(item["t"]) + 1 + np.arange(3)
        np.testing.assert_array_equal(item["reached_success"].numpy(), fut >= ep.meta["success_step"])


class _NoTerminateFlag(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (1,))
    action_space = gym.spaces.Box(-1, 1, (1,))


def test_an_env_that_cannot_go_on_is_refused_clearly():
    from wmsuite.rollout import make_vector_env

    gym.register("wmsuite-test/NoTerminateFlag-v0", entry_point=_NoTerminateFlag)
    with pytest.raises(ValueError, match="terminate_on_success.*--after-success"):
        make_vector_env(f"{__name__}:wmsuite-test/NoTerminateFlag-v0", 1, after_success=3)
    with pytest.raises(ValueError, match="after_success must be >= 0"):
        make_vector_env("wmsuite/PushCube-v0", 1, after_success=-1)
