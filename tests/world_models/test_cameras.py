"""Several cameras per world model (#29): frames of a step stacked on channels, each camera encoded
alone by one codec, generated together, handed back per camera; train-wm, eval-wm and the simulator
on PickPlace's front and wrist cameras."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.world_models.conftest import moving_square_episode, tiny_config
from wmsuite.types import Episode
from wmsuite.world_models.codec import make_codec, split_cameras, stack_cameras
from wmsuite.world_models.config import CodecConfig, camera_names
from wmsuite.world_models.contexts import EpisodeContext
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.train import state_stats


def two_camera_episode(seed: int) -> Episode:
    """moving_square_episode with a second camera, "wrist": the same scene mirrored and red."""
    ep = moving_square_episode(t=8, size=16, seed=seed)
    wrist = ep.obs["top"][:, :, ::-1].copy()
    wrist[..., 1:] //= 4
    ep.obs["wrist"] = wrist
    return ep


def test_camera_names_and_stacking_round_trip():
    assert camera_names("front+wrist") == ("front", "wrist") and camera_names("top") == ("top",)
    for bad in ("front++wrist", "front+front", "+top"):
        with pytest.raises(ValueError, match="distinct cameras"):
            camera_names(bad)
    ep = two_camera_episode(0)
    stacked = stack_cameras(ep.obs, "wrist+top")  # (T+1, S, S, 6), wrist first
    assert stacked.shape == (9, 16, 16, 6)
    back = split_cameras(stacked, "wrist+top")
    assert list(back) == ["wrist", "top"]
    np.testing.assert_array_equal(back["top"], ep.obs["top"])
    np.testing.assert_array_equal(back["wrist"], ep.obs["wrist"])
    with pytest.raises(KeyError, match="'side'"):
        stack_cameras(ep.obs, "top+side")


@pytest.mark.parametrize("kind", ["pixel", "patch"])
def test_codec_encodes_each_camera_alone(kind):
    torch.manual_seed(0)
    one = make_codec(CodecConfig(kind=kind, image_size=20, downsample=4, width=16, blocks=1))
    two = make_codec(CodecConfig(kind=kind, image_size=20, downsample=4, width=16, blocks=1, cameras=2))
    two.load_state_dict({k: v for k, v in one.state_dict().items() if not k.startswith("latent_")}, strict=False)
    a, b = (torch.randint(0, 256, (3, 3, 20, 20), dtype=torch.uint8) for _ in range(2))
    both = torch.cat([a, b], dim=1)  # (N, 6, S, S)
    two.fit_latent_stats(both)
    z = two.encode(both)
    c = one.latent_channels
    assert z.shape == (3, 2 * c, 5, 5) and two.latent_channels == 2 * c
    for cam, frames in enumerate((a, b)):  # each camera's latents are the one-camera codec's, own statistics
        one.latent_mean.copy_(two.latent_mean[cam * c : (cam + 1) * c])
        one.latent_std.copy_(two.latent_std[cam * c : (cam + 1) * c])
        torch.testing.assert_close(z[:, cam * c : (cam + 1) * c], one.encode(frames))
        torch.testing.assert_close(two.decode_float(z)[:, 3 * cam : 3 * cam + 3], one.decode_float(one.encode(frames)))
    if kind == "pixel":
        assert torch.equal(two.decode(z), both)  # lossless
    with pytest.raises(ValueError, match="2 camera"):
        two.encode(a)


def test_model_and_simulator_generate_every_camera():
    episodes = [two_camera_episode(s) for s in range(2)]
    torch.manual_seed(0)
    model = LatentWorldModel(tiny_config(camera="top+wrist", channels=(16, 16)),
                             CodecConfig(kind="pixel", image_size=16, cameras=2), state_stats(episodes))
    frames = episode_frames(episodes, "top+wrist")
    assert frames[0].shape == (9, 6, 16, 16)
    model.codec.fit_latent_stats(torch.cat(frames))
    data = LatentWindows(episodes, encode_episodes(model.codec, frames), 2, 2)
    loss, _ = model.loss(data.batch(range(3)))
    loss.backward()
    assert torch.isfinite(loss)

    env = WorldModelEnv(model.eval(), EpisodeContext(episodes), num_envs=2, horizon=2, seed=0)
    assert set(env.single_observation_space["pixels"].spaces) == {"top", "wrist"}
    obs, _ = env.reset(seed=[0, 1])
    for cam in ("top", "wrist"):  # the real start, each camera where it belongs (lossless codec)
        np.testing.assert_array_equal(obs["pixels"][cam][1], episodes[1].obs[cam][0])
    obs, *_ = env.step(np.zeros((2, 2, 2), np.float32))
    assert env.observation_space.contains(obs)
    assert not np.array_equal(obs["pixels"]["top"], obs["pixels"]["wrist"])


@pytest.mark.slow
def test_train_wm_and_eval_wm_on_pickplace_front_and_wrist(tmp_path):
    from wmsuite.cli import main
    from wmsuite.data import write_episodes
    from wmsuite.envs import make_env
    from wmsuite.envs.experts import make_expert
    from wmsuite.rollout import RolloutConfig, rollout
    from wmsuite.world_models import load_world_model

    env = gym.vector.SyncVectorEnv([lambda: make_env("wmsuite/PickPlace-v0", image_size=16)],
                                   autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    eps = list(rollout(make_expert("wmsuite/PickPlace-v0", skill=1.0, seed=0), env,
                       RolloutConfig(episodes=2, seed=0, progress=False)))
    data = tmp_path / "pp.hdf5"
    write_episodes(data, eps, {"env_name": "wmsuite/PickPlace-v0"})
    run = tmp_path / "wm"
    assert main(["train-wm", "--data", str(data), "--out", str(run), "--model.camera", "front+wrist",
                 "--codec.image-size", "16", "--model.channels", "16", "16", "--dynamics.steps", "2",
                 "--dynamics.batch-size", "4", "--heads-train.steps", "2", "--heads-train.batch-size", "8",
                 "--heads.generated-windows", "32", "--heads.labels", "detector"]) == 0
    model = load_world_model(run)
    assert model.cfg.camera == "front+wrist" and model.codec.cfg.cameras == 2
    out = tmp_path / "fid"
    assert main(["eval-wm", "--wm", str(run), "--data", str(data), "--horizons", "4", "--out", str(out)]) == 0
    assert (out / "metrics.json").is_file()
