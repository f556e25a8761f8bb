"""A world model that reads the spatial memory: reprojection against hand-made shifts, windows that
never retrieve their own context, a warm start that leaves the outputs unchanged, and the memory of a
`WorldModelEnv` kept and reset per sub-env on the ego task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmsuite.cli.common import memory_geometry
from wmsuite.envs.push_cube_ego import EGO_HEIGHT, ego_pose
from wmsuite.world_models.config import CodecConfig
from wmsuite.world_models.data import LatentWindows
from wmsuite.world_models.latent_memory import MemoryGeometry, episode_retrievals, reproject
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.train import state_stats, warm_start

from .conftest import tiny_config

GEOMETRY = MemoryGeometry(fovy=50.0, pose_fn=ego_pose)
SIZE = 16  # image side of the tiny models; latents 4 x 4 at downsample 4


def _cell_metres(s: int) -> float:
    """World metres one latent cell spans on the table (s cells across the ego view)."""
    return 2 * EGO_HEIGHT * np.tan(np.deg2rad(50.0) / 2) / s


def test_reprojection_into_the_same_camera_is_the_identity():
    lat = torch.randn(2, 3, 5, 4, 4)
    pose = torch.from_numpy(ego_pose(np.array([[0.1, -0.2], [0.0, 0.3]])))  # (2, 4, 4)
    out = reproject(lat, pose[:, None].expand(2, 3, 4, 4), pose, GEOMETRY, SIZE)
    torch.testing.assert_close(out[:, :, :5], lat, atol=1e-5, rtol=1e-5)
    assert (out[:, :, 5] == 1).all()


def test_a_camera_moved_by_one_cell_sees_the_latents_shifted_by_one_cell():
    """Moving the camera +x by one cell's width moves the content one cell left in the image: column j
    of the new view is column j + 1 of the old, and the last column is unseen (mask 0, latents 0)."""
    s = 4
    lat = torch.randn(1, 1, 3, s, s)
    src = torch.from_numpy(ego_pose(np.array([0.0, 0.0])))[None, None]
    dst = torch.from_numpy(ego_pose(np.array([_cell_metres(s), 0.0])))[None]
    out = reproject(lat, src, dst, GEOMETRY, SIZE)[0, 0]
    torch.testing.assert_close(out[:3, :, :-1], lat[0, 0, :, :, 1:], atol=1e-5, rtol=1e-5)
    assert (out[3, :, :-1] == 1).all() and (out[:, :, -1] == 0).all()
    # +y in the world is up in the image: the content moves down by one row
    dst = torch.from_numpy(ego_pose(np.array([0.0, _cell_metres(s)])))[None]
    out = reproject(lat, src, dst, GEOMETRY, SIZE)[0, 0]
    torch.testing.assert_close(out[:3, 1:], lat[0, 0, :, :-1], atol=1e-5, rtol=1e-5)
    empty = reproject(lat, torch.zeros(1, 1, 4, 4, dtype=torch.float64), dst, GEOMETRY, SIZE)
    assert (empty == 0).all()  # an empty slot: nothing, mask 0


def test_windows_retrieve_only_frames_older_than_their_context():
    xs = np.r_[np.linspace(-0.4, 0.4, 25), np.linspace(0.4, -0.4, 25)]
    poses = ego_pose(np.stack([xs, np.zeros_like(xs)], 1))
    found = episode_retrievals(poses, GEOMETRY, 64, context=4, frames=2)
    assert found.shape == (50, 2)
    t = np.arange(50)[:, None]
    assert ((found == -1) | (found <= t - 4)).all()
    assert (found[:4] == -1).all() and (found[40:, 0] >= 0).all()  # on the way back: the places seen going out


def _ego_episodes(n: int = 3, steps: int = 24, skill: float = 0.5):
    from wmsuite.envs.experts import make_expert
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    env = make_vector_env("wmsuite/PushCubeEgo-v0", 1, asynchronous=False,
                          env_kwargs={"image_size": SIZE, "cameras": ("ego",), "max_episode_steps": steps})
    eps = list(rollout(make_expert("wmsuite/PushCubeEgo-v0", skill=skill, seed=0), env,
                       RolloutConfig(episodes=n, seed=0, progress=False)))
    env.close()
    return eps


@pytest.fixture(scope="module")
def ego_episodes():
    return _ego_episodes()


def _model(episodes, memory_frames: int, seed: int = 0) -> LatentWorldModel:
    torch.manual_seed(seed)
    codec_cfg = CodecConfig(kind="pixel", image_size=SIZE, downsample=4, width=16, blocks=1)
    cfg = tiny_config(camera="ego", env_state_dim=6, memory_frames=memory_frames)
    model = LatentWorldModel(cfg, codec_cfg, state_stats(episodes))
    frames = torch.from_numpy(np.concatenate([ep.obs["ego"] for ep in episodes]).transpose(0, 3, 1, 2).copy())
    model.codec.fit_latent_stats(frames)
    return model


def test_a_memory_model_trains_on_windows_with_memory_and_starts_as_its_source(ego_episodes):
    base, mem = _model(ego_episodes, 0), _model(ego_episodes, 2, seed=1)
    note = warm_start(mem, base)
    assert "conv_in" not in note.split("fresh:")[1]  # the input layer copied, memory channels at zero
    latents = [mem.codec.encode(torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2)) for ep in ego_episodes]
    data = LatentWindows(ego_episodes, latents, mem.cfg.context, mem.cfg.chunk, 0, mem.cfg.memory_frames,
                         GEOMETRY, SIZE, mem.codec.padded_size)
    batch = data.batch(range(len(data)))
    c, s = mem.codec.latent_channels, mem.codec.latent_size
    assert batch["memory"].shape == (len(data), 2, c + 1, s, s) and batch["memory"][:, :, -1].sum() > 0
    b = len(data)
    args = (torch.randn(b, 2, c, s, s), torch.full((b,), 0.7), batch["context"], batch["actions"],
            torch.ones(b), torch.zeros(b))
    with torch.no_grad():  # zero weights on the memory's channels: the source's outputs, whatever it retrieved
        torch.testing.assert_close(mem.denoise(*args, memory=batch["memory"]), base.denoise(*args))
    loss, logs = mem.loss(batch)
    loss.backward()
    assert np.isfinite(logs["diffusion"])
    assert mem.denoiser.conv_in.weight.grad[:, -2 * (c + 1):].abs().sum() > 0  # the memory's channels learn


def test_ego_advance_follows_the_real_pusher(ego_episodes):
    """Where a chunk's actions command the pusher, against where the simulator took it: far closer than
    standing still (what drawing the memory in the newest frame's camera assumes)."""
    from wmsuite.envs.push_cube_ego import ego_advance
    from wmsuite.world_models.data import _chunks

    h = 4
    err, still = [], []
    for ep in ego_episodes:
        state = np.asarray(ep.state, np.float64)
        after = state[np.minimum(np.arange(len(state)) + h, len(state) - 1)]  # (T+1, 2)
        err.append(np.linalg.norm(ego_advance(state, _chunks(ep.actions, h)) - after, axis=-1))
        still.append(np.linalg.norm(state - after, axis=-1))
    err, still = np.concatenate(err), np.concatenate(still)
    moving = still > 0.01  # chunks over which the pusher travels more than a centimetre
    assert moving.sum() >= 10 and np.median(err[moving]) < 0.3 * np.median(still[moving])


def test_windows_draw_their_memory_where_the_chunk_ends(ego_episodes):
    from wmsuite.envs.push_cube_ego import ego_advance

    geometry = memory_geometry("wmsuite/PushCubeEgo-v0", "ego")
    assert geometry.advance_fn is ego_advance
    mem = _model(ego_episodes, 2)
    latents = [mem.codec.encode(torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2)) for ep in ego_episodes]
    data = LatentWindows(ego_episodes, latents, mem.cfg.context, mem.cfg.chunk, 0, 2, geometry, SIZE,
                         mem.codec.padded_size)
    late = [i for i in range(len(data)) if int(data.windows[i]["t"]) >= 12]
    items = [data.windows[i] for i in late]
    batch = data.batch(late)
    for j, it in enumerate(items):
        e, t = int(it["episode_index"]), int(it["t"])
        ep = ego_episodes[e]
        end = ego_advance(ep.state[t], ep.actions[t : t + mem.cfg.chunk])  # (2,)
        idx = torch.from_numpy(data.retrieved[e][t])
        src = torch.from_numpy(data.poses[e][idx.clamp_min(0).numpy()]) * (idx >= 0).view(-1, 1, 1)
        want = reproject(latents[e][idx.clamp_min(0)][None] * (idx >= 0).view(1, -1, 1, 1, 1), src[None],
                         torch.from_numpy(ego_pose(end))[None], geometry, SIZE, mem.codec.padded_size)
        torch.testing.assert_close(batch["memory"][j : j + 1], want)
    # the rollout's memory draws the same view for the same actions
    from wmsuite.world_models.latent_memory import LatentMemory

    e, t = int(items[0]["episode_index"]), int(items[0]["t"])
    memory = LatentMemory(mem, geometry, 1)
    memory.reset([0], latents[e][:1], ego_episodes[e].state[:1])
    for f in range(1, t + 1):
        memory.append(0, latents[e][f], ego_episodes[e].state[f])
    acts = torch.from_numpy(np.asarray(ego_episodes[e].actions[t : t + mem.cfg.chunk], np.float32))[None]
    torch.testing.assert_close(memory.context(acts)[:, :, -1], batch["memory"][:1, :, -1])


def test_world_model_env_keeps_a_memory_per_sub_env(ego_episodes):
    import wmsuite.envs  # noqa: F401  (registers the id)
    from wmsuite.world_models import make_world_model_env

    model = _model(ego_episodes, 2)
    with pytest.raises(ValueError, match="memory_geometry"):
        make_world_model_env(model, "wmsuite/PushCubeEgo-v0", 2, env_kwargs={"image_size": SIZE, "cameras": ("ego",)})
    with pytest.raises(ValueError, match="--model.camera ego"):
        memory_geometry("wmsuite/PushCubeEgo-v0", "top")
    with pytest.raises(ValueError, match="names none"):
        memory_geometry("wmsuite/PushCube-v0", "top")
    env = make_world_model_env(model, "wmsuite/PushCubeEgo-v0", 2, judge="state",
                               success_fn=lambda e: np.zeros(e.shape[:-1], bool),
                               memory_geometry=memory_geometry("wmsuite/PushCubeEgo-v0", "ego"),
                               env_kwargs={"image_size": SIZE, "cameras": ("ego",)})
    env.reset(seed=[0, 1])
    assert [m.keyframes.keys() for m in env.memory.bank.memories] == [{0}, {0}]  # the real start frames
    rng = np.random.default_rng(0)
    for _ in range(3):
        env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
    assert (env.memory.t == 6).all()  # 3 chunks of 2 frames each after the start frame
    before = len(env.memory.bank[1])
    env.reset(seed=[5, 6], options={"reset_mask": np.array([True, False])})
    assert env.memory.t.tolist() == [0, 6] and list(env.memory.bank[0].keyframes) == [0]
    assert len(env.memory.bank[1]) == before  # the other episode's memory untouched
    env.close()


def test_revisit_figures_score_a_model_and_its_no_memory_baseline_on_the_same_frames(tmp_path):
    import json

    from wmsuite.cli import main
    from wmsuite.data import write_episodes
    from wmsuite.eval_harness.revisits import revisit_fidelity
    from wmsuite.world_models.latent_memory import revisit_labels
    from wmsuite.world_models.train import save_model

    episodes = _ego_episodes(n=2, steps=60, skill=1.0)  # competent: it comes back to the goal it looked at
    labels = revisit_labels(episodes, GEOMETRY, gap=20)
    assert sum(r.sum() for r, _ in labels) > 0 and sum(f.sum() for _, f in labels) > 0
    figures = {m: revisit_fidelity(_model(episodes, m), episodes, GEOMETRY, slice(0, 2), gap=20) for m in (0, 2)}
    for key in ("revisit_frames", "first_visit_frames"):
        assert figures[0][key] == figures[2][key] > 0
        assert 0 <= figures[2][key.replace("_frames", "_in_view_frames")] <= figures[2][key]
        relative = figures[2][key.replace("_frames", "_relative_object_error")]
        assert (relative is None) == (figures[2][key.replace("_frames", "_in_view_frames")] == 0)
    assert all(np.isfinite(figures[m]["revisit_psnr"]) for m in (0, 2))
    # the command: written to metrics.json for a model with memory
    data = tmp_path / "ego.hdf5"
    write_episodes(data, episodes, {"env_name": "wmsuite/PushCubeEgo-v0"})
    save_model(_model(episodes, 2), tmp_path / "wm", step=0)
    assert main(["eval-wm", "--wm", str(tmp_path / "wm" / "latest"), "--data", str(data), "--horizons", "1",
                 "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert written["revisit_frames"] == figures[2]["revisit_frames"] and written["revisit_gap"] == 20


def test_train_wm_trains_a_memory_model_on_the_ego_task_and_refuses_a_task_without_a_moving_camera(tmp_path, capsys):
    from wmsuite.cli import main
    from wmsuite.data import write_episodes
    from wmsuite.world_models import load_world_model

    data = tmp_path / "ego.hdf5"
    write_episodes(data, _ego_episodes(n=2, steps=30, skill=1.0), {"env_name": "wmsuite/PushCubeEgo-v0"})
    tiny = ["--model.channels", "16", "16", "--dynamics.batch-size", "4", "--codec.image-size", str(SIZE),
            "--codec-train.steps", "2", "--stage", "dynamics", "--dynamics.steps", "2"]
    assert main(["train-wm", "--data", str(data), "--out", str(tmp_path / "wm"), "--model.camera", "ego",
                 "--model.memory-frames", "2", "--stage", "codec", *tiny[:-4]]) == 0
    assert main(["train-wm", "--data", str(data), "--out", str(tmp_path / "wm"), "--model.camera", "ego",
                 "--model.memory-frames", "2", *tiny]) == 0
    model = load_world_model(tmp_path / "wm")
    assert model.cfg.memory_frames == 2 and model.memory_channels == 2 * (model.codec.latent_channels + 1)
    capsys.readouterr()
    assert main(["train-wm", "--data", str(data), "--out", str(tmp_path / "wm-fixed"), "--model.camera", "ego",
                 "--model.memory-frames", "2", "--codec-from", str(tmp_path / "wm" / "codec"),
                 "--env", "wmsuite/PushCube-v0", *tiny]) == 2  # a task whose cameras are fixed: refused, nothing trained
    assert "names none" in capsys.readouterr().err and not (tmp_path / "wm-fixed" / "latest").exists()


def test_the_heads_pass_generates_with_a_memory_posed_by_the_recorded_path(ego_episodes):
    from wmsuite.world_models.data import _true_pose_memory, generated_head_data
    from wmsuite.world_models.rollout import WorldModelState, rollout

    model = _model(ego_episodes, 2)
    latents = torch.cat([model.codec.encode(torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2)) for ep in ego_episodes])
    with pytest.raises(ValueError, match="geometry"):
        generated_head_data(model, ego_episodes, latents, windows=2, chunks=1)
    gen, idx = generated_head_data(model, ego_episodes, latents, windows=4, chunks=2, geometry=GEOMETRY)
    assert gen.shape[1:] == latents.shape[1:] and len(gen) == len(idx) > 0
    offsets = np.cumsum([0] + [ep.length + 1 for ep in ego_episodes])
    eps, starts, single = np.array([0, 1]), np.array([9, 9]), np.array([False, True])
    memory = _true_pose_memory(model, GEOMETRY, ego_episodes, latents, offsets, eps, starts, single, model.cfg.chunk)
    assert memory.t.tolist() == [9, 0]  # every real frame up to the start / the start alone, as after a reset
    for j, e in enumerate(eps):  # each row's newest frame posed where the episode was at its start
        np.testing.assert_allclose(memory.newest_pos[j], ego_episodes[e].state[9])
    context = latents[offsets[eps] + 9][:, None].expand(-1, model.cfg.context, -1, -1, -1)
    h = model.cfg.chunk
    actions = torch.from_numpy(np.stack([ego_episodes[e].actions[9 : 9 + h] for e in eps]))
    rollout(model, WorldModelState(context), actions, memory=memory)
    assert memory.t.tolist() == [9 + h, h]
    for j, e in enumerate(eps):  # the generated frames posed by the recorded path, not by untrained heads
        np.testing.assert_allclose(memory.newest_pos[j], ego_episodes[e].state[9 + h])


def test_revisit_sampling_draws_its_share_from_windows_whose_chunk_ends_where_the_camera_was_long_ago():
    from wmsuite.world_models.data import REVISIT_GAP, sample_windows

    episodes = _ego_episodes(n=2, steps=60, skill=1.0)
    latents = [torch.zeros(ep.length + 1, 1, 2, 2) for ep in episodes]
    # no memory: a baseline is given the geometry too, so that it is trained on the same windows
    data = LatentWindows(episodes, latents, context=4, chunk=4, geometry=GEOMETRY, image_size=SIZE)
    revisiting = data.revisiting.tolist()
    assert 0 < len(revisiting) < len(data)
    # each one's chunk ends where some frame more than REVISIT_GAP earlier saw part of the same ground: a camera
    # looking straight down from EGO_HEIGHT sees a square of this side
    side = 2 * EGO_HEIGHT * np.tan(np.deg2rad(GEOMETRY.fovy) / 2)
    for i in revisiting:
        e, t = data.windows.index[i]
        end = min(t + 4, episodes[e].length)
        before = episodes[e].state[: end - REVISIT_GAP, :2]
        assert len(before) and np.abs(before - episodes[e].state[end, :2]).max(-1).min() < side
    idx = sample_windows(data, 16, 0.0, torch.Generator().manual_seed(0), revisit_fraction=0.5)
    assert len(idx) == 16 and set(idx[:8]) <= set(revisiting)
    # with no share it is exactly plain uniform sampling
    uniform = torch.randint(len(data), (16,), generator=torch.Generator().manual_seed(0)).tolist()
    assert sample_windows(data, 16, 0.0, torch.Generator().manual_seed(0)) == uniform
    with pytest.raises(ValueError, match="camera geometry"):
        sample_windows(LatentWindows(episodes, latents, 4, 4), 16, 0.0, torch.Generator(), revisit_fraction=0.5)


def test_train_wm_refuses_shares_of_the_batch_that_add_up_to_more_than_one():
    from wmsuite.cli.train_wm import TrainWMConfig

    with pytest.raises(ValueError, match="at most 1"):
        TrainWMConfig(data="x.hdf5", out="out", moving_fraction=0.5, revisit_fraction=0.6)
    with pytest.raises(ValueError, match="revisit_fraction is a share"):
        TrainWMConfig(data="x.hdf5", out="out", revisit_fraction=1.5)


def test_the_object_is_in_view_where_the_real_camera_shows_it():
    """The frames revisit figures count as showing the object (its true xy projected into the camera
    posed from agent_pos) against the real renderer: every such frame shows red cube pixels, and a
    frame that shows some but is not counted has the cube at the view's edge (rare)."""
    from wmsuite.envs.base import red_mask
    from wmsuite.envs.experts import make_expert
    from wmsuite.eval_harness.revisits import object_in_view
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    env = make_vector_env("wmsuite/PushCubeEgo-v0", 1, asynchronous=False,
                          env_kwargs={"image_size": 64, "cameras": ("ego",), "max_episode_steps": 60})
    episodes = list(rollout(make_expert("wmsuite/PushCubeEgo-v0", skill=1.0, seed=0), env,
                            RolloutConfig(episodes=2, seed=0, progress=False)))
    env.close()
    geometry = memory_geometry("wmsuite/PushCubeEgo-v0", "ego")
    shown, counted = [], []
    for ep in episodes:
        counted.append(object_in_view(ep, geometry, slice(0, 2), 64))
        shown.append(red_mask(ep.obs["ego"].astype(int)).any(axis=(1, 2)))
    shown, counted = np.concatenate(shown), np.concatenate(counted)
    assert counted.any() and (~counted).any()  # the expert's camera leaves the cube and comes back
    assert shown[counted].all()
    assert (shown == counted).mean() >= 0.95
