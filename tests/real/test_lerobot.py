"""LeRobotDataset v3 export and import through the lerobot library (extra `lerobot`, in .venv-lerobot).

    .venv-lerobot/bin/python -m pytest tests/real/test_lerobot.py -q
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("lerobot", reason="lerobot extra not installed: it lives in .venv-lerobot (.ci/install-extras.sh lerobot)")

from tests.core.helpers import make_episode  # noqa: E402
from wmsuite.cli import main as cli_main  # noqa: E402
from wmsuite.data import read_episodes, write_episodes  # noqa: E402
from wmsuite.data.lerobot_io import FINAL, export_lerobot, import_lerobot  # noqa: E402
from wmsuite.types import Episode  # noqa: E402

pytestmark = pytest.mark.lerobot


def smooth_episode(t: int, seed: int, size: int = 32) -> Episode:
    """An episode whose frames are smooth and moving (a lit disc sliding over a gradient), like camera frames."""
    ep = make_episode(t=t, size=size, seed=seed, cameras=("top", "wrist"))
    yy, xx = np.mgrid[0:size, 0:size]
    for c, cam in enumerate(ep.cameras):
        frames = []
        for k in range(t + 1):
            cx, cy = 6 + 2.5 * k + 3 * c, 10 + 1.5 * k
            disc = 150 * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 30.0)
            base = np.stack([60 + 3 * xx, 40 + 4 * yy, 90 + 2 * (xx + yy)], -1)
            frames.append(np.clip(base + disc[..., None] * np.array([1.0, 0.6, 0.2]), 0, 255).astype(np.uint8))
        ep.obs[cam] = np.stack(frames)
    return ep


def assert_same_except_frames(a: Episode, b: Episode) -> None:
    assert b.length == a.length and b.cameras == a.cameras
    for name in ("actions", "state", "env_state", "rewards", "intervention", "sim_states"):
        got, want = getattr(b, name), getattr(a, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert (b.success, b.terminated, b.truncated, b.task) == (a.success, a.terminated, a.truncated, a.task)
    assert b.meta["policy_id"] == a.meta["policy_id"] and b.meta["seed"] == a.meta["seed"]


def test_round_trip_with_images_in_parquet_is_exact(tmp_path):
    eps = [make_episode(t=4 + i, size=16, seed=i, cameras=("top", "wrist"), success=i % 2 == 0) for i in range(3)]
    root = export_lerobot(eps, tmp_path / "ds", fps=20)
    back = import_lerobot(root)
    assert len(back) == 3
    for a, b in zip(eps, back):
        assert_same_except_frames(a, b)
        for cam in a.cameras:
            np.testing.assert_array_equal(b.obs[cam], a.obs[cam])


def test_round_trip_with_h264_video_is_within_codec_error(tmp_path):
    av = pytest.importorskip("av")
    eps = [smooth_episode(t=9, seed=0), smooth_episode(t=6, seed=1)]
    root = export_lerobot(eps, tmp_path / "ds", use_videos=True, vcodec="h264")
    assert sorted(p.suffix for p in root.rglob("*.mp4")) == [".mp4", ".mp4"]  # one file per camera, episodes packed
    back = import_lerobot(root)
    for a, b in zip(eps, back):
        assert_same_except_frames(a, b)
        for cam in a.cameras:
            err = np.abs(b.obs[cam].astype(int) - a.obs[cam]).mean()
            # the oracle: the same frames through libx264 (LeRobot's settings: crf 30, yuv420p) and back with PyAV
            codec_err = np.abs(h264_round_trip(av, a.obs[cam], tmp_path / f"{cam}.mp4").astype(int) - a.obs[cam]).mean()
            assert err <= 1.5 * codec_err + 0.5, (cam, err, codec_err)
            # and each frame is matched to its own time step, not a neighbour
            shifted = np.abs(b.obs[cam][1:].astype(int) - a.obs[cam][:-1]).mean()
            assert err < shifted


def h264_round_trip(av, frames: np.ndarray, path) -> np.ndarray:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=20, options={"crf": "30", "g": "2"})
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for f in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        out.mux(stream.encode())
    with av.open(str(path)) as inp:
        return np.stack([f.to_ndarray(format="rgb24") for f in inp.decode(video=0)])


def test_import_of_a_dataset_made_by_lerobot_itself(tmp_path):
    """A plain LeRobotDataset (no wmsuite columns): every frame is an observation, the last action is dropped."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    feats = {"observation.image": {"dtype": "image", "shape": (16, 16, 3), "names": ["height", "width", "channels"]},
             "observation.state": {"dtype": "float32", "shape": (3,), "names": None},
             "action": {"dtype": "float32", "shape": (2,), "names": None}}
    ds = LeRobotDataset.create(repo_id="someone/pusht_like", fps=10, features=feats, root=tmp_path / "ds",
                               use_videos=False)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 16, 16, 3), dtype=np.uint8)
    states, actions = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    for k in range(5):
        ds.add_frame({"observation.image": images[k], "observation.state": states[k], "action": actions[k],
                      "task": "push the T"})
    ds.save_episode()
    ds.finalize()
    (ep,) = import_lerobot(tmp_path / "ds")
    assert ep.length == 4 and ep.cameras == ["image"] and ep.task == "push the T"
    np.testing.assert_array_equal(ep.obs["image"], images)
    np.testing.assert_array_equal(ep.state, states)
    np.testing.assert_array_equal(ep.actions, actions[:4])
    assert ep.meta["dropped_steps"] == 1 and FINAL not in ep.meta


def test_convert_command_hdf5_to_lerobot_and_back(tmp_path, capsys):
    eps = [make_episode(t=5, size=16, seed=i) for i in range(2)]
    src = write_episodes(tmp_path / "a.hdf5", eps)
    assert cli_main(["convert", "--src", str(src), "--dst", str(tmp_path / "lr")]) == 0
    assert cli_main(["convert", "--src", str(tmp_path / "lr"), "--dst", str(tmp_path / "b.hdf5")]) == 0
    assert "converted 2 episodes (12 frames) from lerobot" in capsys.readouterr().out
    for a, b in zip(eps, read_episodes(tmp_path / "b.hdf5")):
        assert_same_except_frames(a, b)
        np.testing.assert_array_equal(b.obs["top"], a.obs["top"])


def test_export_refuses_mixed_layouts_and_existing_folders(tmp_path):
    a, b = make_episode(t=3, cameras=("top",)), make_episode(t=3, cameras=("side",))
    with pytest.raises(ValueError, match="episode 1 has different cameras"):
        export_lerobot([a, b], tmp_path / "x")
    (tmp_path / "y").mkdir()
    with pytest.raises(FileExistsError, match="choose another path"):
        export_lerobot([a], tmp_path / "y")
    with pytest.raises(FileNotFoundError, match="no LeRobotDataset at"):
        import_lerobot(tmp_path / "y")
