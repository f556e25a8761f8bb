"""The start map of a spatial memory: the fixed top camera's start frame redrawn in the moving camera,
checked against the simulator's own ego render, and carried as one more memory slot through the
training windows, the warm start and the learned simulator's reset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmsuite.cli.common import memory_geometry
from wmsuite.envs.push_cube_ego import ego_pose, top_pose
from wmsuite.world_models.config import CodecConfig
from wmsuite.world_models.data import LatentWindows
from wmsuite.world_models.latent_memory import MemoryGeometry, map_slot, pinhole, reproject
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.train import state_stats, warm_start

from .conftest import tiny_config

ENV = "wmsuite/PushCubeEgo-v0"
SIZE = 16  # image side of the tiny models; latents 4 x 4 at downsample 4


def _episodes(n: int = 2, steps: int = 20, size: int = SIZE):
    from wmsuite.envs.experts import make_expert
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout

    env = make_vector_env(ENV, 1, asynchronous=False,
                          env_kwargs={"image_size": size, "cameras": ("ego", "top"), "max_episode_steps": steps})
    eps = list(rollout(make_expert(ENV, skill=1.0, seed=0), env, RolloutConfig(episodes=n, seed=0, progress=False)))
    env.close()
    return eps


@pytest.fixture(scope="module")
def episodes():
    return _episodes()


def _model(episodes, memory_frames: int, start_map: bool, seed: int = 0, **overrides) -> LatentWorldModel:
    torch.manual_seed(seed)
    size = episodes[0].obs["ego"].shape[1]
    codec_cfg = CodecConfig(kind="pixel", image_size=size, downsample=4, width=16, blocks=1)
    cfg = tiny_config(camera="ego", env_state_dim=6, memory_frames=memory_frames, start_map=start_map, **overrides)
    model = LatentWorldModel(cfg, codec_cfg, state_stats(episodes))
    frames = torch.from_numpy(np.concatenate([ep.obs["ego"] for ep in episodes]).transpose(0, 3, 1, 2).copy())
    model.codec.fit_latent_stats(frames)
    return model


def test_the_top_frame_redrawn_in_the_ego_camera_is_what_the_ego_camera_renders():
    """The table, the goal and the landmarks lie on the ground plane, so the top camera's frame redrawn
    through it must look like the simulator's ego render of the same step; redrawn 5 cm off, it must not."""
    episodes = _episodes(n=1, steps=30, size=64)
    ep, geometry = episodes[0], memory_geometry(ENV, "ego")
    import gymnasium as gym

    env = gym.make(ENV, image_size=64).unwrapped
    env.reset(seed=0)
    k, pose = env.camera_geometry("top", 64)
    env.close()
    np.testing.assert_allclose(pose, top_pose(), atol=1e-9)
    np.testing.assert_allclose(k, pinhole(geometry.map_fovy, 64))
    top = torch.from_numpy(ep.obs["top"]).permute(0, 3, 1, 2).float()[:, None]  # (T+1, 1, 3, S, S)
    src = torch.from_numpy(top_pose()).expand(len(top), 1, 4, 4)
    errors = {}
    for name, shift in (("true", 0.0), ("off", 0.05)):
        dst = torch.from_numpy(ego_pose(ep.state + np.float32(shift)))
        drawn = reproject(top, src, dst, geometry, 64, 64, geometry.map_fovy)  # (T+1, 1, 4, S, S)
        assert (drawn[:, 0, 3] == 1).all()  # the top camera sees every point the ego camera does
        ego = torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2).float()
        errors[name] = float((drawn[:, 0, :3] - ego).abs().mean())
    assert errors["true"] < 6 and errors["off"] > 2 * errors["true"], errors


def test_the_map_slot_is_the_encoded_redrawn_frame_with_its_mask(episodes):
    model = _model(episodes, 2, True)
    geometry = memory_geometry(ENV, "ego")
    maps = torch.from_numpy(np.stack([ep.obs["top"][0] for ep in episodes])).permute(0, 3, 1, 2)  # (2, 3, S, S)
    dst = torch.from_numpy(ego_pose(np.stack([ep.state[5] for ep in episodes])))
    slot = map_slot(model.codec, maps, dst, geometry, present=torch.tensor([True, False]))
    c, s = model.codec.latent_channels, model.codec.latent_size
    assert slot.shape == (2, c + 1, s, s)
    assert (slot[0, -1] == 1).all() and (slot[1] == 0).all()  # a row without a map: nothing, mask 0
    drawn = reproject(maps[:1, None].float(), torch.from_numpy(top_pose())[None, None], dst[:1], geometry, SIZE,
                      SIZE, geometry.map_fovy)[0, 0, :3]
    torch.testing.assert_close(slot[0, :c], model.codec.encode(drawn.round().to(torch.uint8)[None])[0])
    with pytest.raises(ValueError, match="map camera"):
        map_slot(model.codec, maps, dst, MemoryGeometry(fovy=50.0, pose_fn=ego_pose))


def test_a_start_map_model_reads_the_map_last_and_starts_as_its_memory_source(episodes):
    with pytest.raises(ValueError, match="memory_frames"):
        tiny_config(camera="ego", memory_frames=0, start_map=True)
    geometry = memory_geometry(ENV, "ego")
    base, mapped = _model(episodes, 2, False), _model(episodes, 2, True, seed=1)
    assert "conv_in" not in warm_start(mapped, base).split("fresh:")[1]
    latents = [mapped.codec.encode(torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2)) for ep in episodes]
    args = (episodes, latents, mapped.cfg.context, mapped.cfg.chunk, 0, 2, geometry, SIZE, mapped.codec.padded_size)
    plain, data = LatentWindows(*args), LatentWindows(*args, map_codec=mapped.codec)
    idx = list(range(len(data)))
    batch = data.batch(idx)
    c, s = mapped.codec.latent_channels, mapped.codec.latent_size
    assert batch["memory"].shape == (len(data), 3, c + 1, s, s)
    torch.testing.assert_close(batch["memory"][:, :2], plain.batch(idx)["memory"])  # the retrieved slots unchanged
    e, t = int(data.windows[7]["episode_index"]), int(data.windows[7]["t"])
    top = torch.from_numpy(episodes[e].obs["top"][:1]).permute(0, 3, 1, 2)  # the episode's start frame, always
    want = map_slot(mapped.codec, top, torch.from_numpy(data.views[e][t])[None], geometry)
    torch.testing.assert_close(batch["memory"][7, 2], want[0])
    b = len(data)
    noisy = (torch.randn(b, mapped.cfg.chunk, c, s, s), torch.full((b,), 0.7), batch["context"], batch["actions"],
             torch.ones(b), torch.zeros(b))
    with torch.no_grad():  # the map's channels start at zero: the memory model's outputs, whatever the map shows
        torch.testing.assert_close(mapped.denoise(*noisy, memory=batch["memory"]),
                                   base.denoise(*noisy, memory=batch["memory"][:, :2]))
    loss, _ = mapped.loss(batch)
    loss.backward()
    assert mapped.denoiser.conv_in.weight.grad[:, -(c + 1):].abs().sum() > 0  # the map's channels learn
    with pytest.raises(ValueError, match="episode 0 records only \\['ego'\\]"):
        LatentWindows([_without_top(ep) for ep in episodes], *args[1:], map_codec=mapped.codec)


def _without_top(ep):
    from dataclasses import replace

    return replace(ep, obs={"ego": ep.obs["ego"]})


def test_the_learned_simulator_reads_the_map_from_each_reset_and_refuses_an_env_without_its_camera(episodes):
    import wmsuite.envs  # noqa: F401  (registers the id)
    from wmsuite.world_models import make_world_model_env

    model, geometry = _model(episodes, 2, True), memory_geometry(ENV, "ego")
    kwargs = {"judge": "state", "success_fn": lambda e: np.zeros(e.shape[:-1], bool), "memory_geometry": geometry}
    env = make_world_model_env(model, ENV, 2, env_kwargs={"image_size": SIZE, "cameras": ("ego", "top")}, **kwargs)
    env.reset(seed=[3, 4])
    import gymnasium as gym

    real = gym.make(ENV, image_size=SIZE, cameras=("ego", "top"))
    tops = [real.reset(seed=seed)[0]["pixels"]["top"] for seed in (3, 4)]
    real.close()
    np.testing.assert_array_equal(env.memory.maps.permute(0, 2, 3, 1).numpy(), np.stack(tops))
    acts = torch.zeros(2, model.cfg.chunk, 2)
    context = env.memory.context(acts)
    assert context.shape[1] == 3 and (context[:, 2, -1] == 1).all()  # the map sees the whole start view
    env.step(np.zeros(env.action_space.shape, np.float32))
    env.reset(seed=[9, 4], options={"reset_mask": np.array([True, False])})
    real = gym.make(ENV, image_size=SIZE, cameras=("ego", "top"))
    np.testing.assert_array_equal(env.memory.maps[0].permute(1, 2, 0).numpy(), real.reset(seed=9)[0]["pixels"]["top"])
    real.close()
    np.testing.assert_array_equal(env.memory.maps[1].permute(1, 2, 0).numpy(), tops[1])  # the other row kept
    env.close()
    env = make_world_model_env(model, ENV, 1, env_kwargs={"image_size": SIZE, "cameras": ("ego",)}, **kwargs)
    with pytest.raises(ValueError, match="map camera 'top'"):
        env.reset(seed=[0])
    env.close()


def test_open_loop_fidelity_rolls_a_memory_model_with_its_memory_posed_by_the_recorded_path(episodes, monkeypatch):
    from wmsuite.eval_harness import fidelity
    from wmsuite.world_models.latent_memory import LatentMemory

    model, geometry = _model(episodes, 2, True), memory_geometry(ENV, "ego")
    with pytest.raises(ValueError, match="geometry"):
        fidelity.rollout_open_loop(model, episodes)
    original, kept = fidelity.recorded_memory, []

    def spy(*args):
        kept.append(original(*args))
        return kept[-1]

    monkeypatch.setattr(fidelity, "recorded_memory", spy)
    out = fidelity.rollout_open_loop(model, episodes, geometry=geometry)
    (memory,) = kept
    steps = out["latents"].shape[1] - 1  # whole chunks: the episodes' 20 steps
    assert memory.t.tolist() == [steps] * len(episodes)
    for j, ep in enumerate(episodes):  # the last generated frame posed where the episode really was
        np.testing.assert_allclose(memory.newest_pos[j], ep.state[min(steps, ep.length)])
        assert len(memory.bank[j].keyframes) >= 1
    monkeypatch.setattr(LatentMemory, "context", lambda self, actions=None, rows=None: torch.zeros(
        len(episodes), 3, model.codec.latent_channels + 1, model.codec.latent_size, model.codec.latent_size))
    blind = fidelity.rollout_open_loop(model, episodes, geometry=geometry)
    assert not torch.equal(blind["latents"][:, 1:], out["latents"][:, 1:])  # the memory (the map from chunk 1) is read


def test_the_cache_knows_which_ground_any_offered_frame_saw():
    from wmsuite.envs.push_cube_ego import EGO_FOVY, EGO_HEIGHT
    from wmsuite.world_models.memory import MemoryConfig, SpatialMemory, plane_depth

    geometry, half = memory_geometry(ENV, "ego"), EGO_HEIGHT * np.tan(np.deg2rad(EGO_FOVY) / 2)  # the view's half-width
    k, memory = geometry.intrinsics(64), SpatialMemory(MemoryConfig(track_seen=True))
    for t, x in enumerate((0.0, 0.01)):  # the second frame adds too little to be a keyframe: it still counts as seen
        pose = ego_pose(np.array([x, 0.0]))
        memory.add(t, plane_depth(k, pose, (64, 64)), k, pose)
    assert list(memory.keyframes) == [0]
    inside = np.array([[0.0, 0.0, 0.0], [half - 0.03, 0.0, 0.0], [0.01 + half - 0.02, 0.1, 0.0]])
    outside = np.array([[half + 0.06, 0.0, 0.0], [0.0, -half - 0.05, 0.0], [0.4, 0.4, 0.0]])
    assert memory.was_seen(inside).all() and not memory.was_seen(outside).any()
    memory.reset()
    assert not memory.was_seen(inside).any()
    with pytest.raises(ValueError, match="track_seen"):
        SpatialMemory().was_seen(inside)


def test_an_unseen_map_hides_the_ground_the_episode_has_shown_in_training_and_in_imagination():
    from wmsuite.world_models.latent_memory import LatentMemory, ground_cells

    geometry = memory_geometry(ENV, "ego")
    with pytest.raises(ValueError, match="start_map"):
        tiny_config(camera="ego", memory_frames=2, map_unseen=True)
    episodes = _episodes(n=2, steps=20, size=64)  # every pixel 0.5 cm of table: the view's edge to a pixel
    model = _model(episodes, 2, True, map_unseen=True)
    latents = [model.codec.encode(torch.from_numpy(ep.obs["ego"]).permute(0, 3, 1, 2)) for ep in episodes]
    data = LatentWindows(episodes, latents, model.cfg.context, model.cfg.chunk, 0, 2, geometry, 64,
                         model.codec.padded_size, map_codec=model.codec, map_unseen=True)
    s = model.codec.latent_size
    late = [i for i in range(len(data)) if int(data.windows[i]["t"]) >= 10]
    batch = data.batch(late)
    for j, i in enumerate(late):  # the mask is 0 exactly where some frame up to t saw the cell's ground
        e, t = int(data.windows[i]["episode_index"]), int(data.windows[i]["t"])
        cells = ground_cells(data.views[e][t][None], geometry, 64, model.codec.padded_size, s)[0]  # (s*s, 3)
        half = 0.372 * np.tan(np.deg2rad(25.0))  # the ego view's half-width on the table
        shown = (np.abs(cells[:, None, :2] - episodes[e].state[None, : t + 1]) < half - 0.02).all(-1).any(-1)
        hidden = (np.abs(cells[:, None, :2] - episodes[e].state[None, : t + 1]) > half + 0.02).any(-1).all(-1)
        mask = batch["memory"][j, -1, -1].numpy().reshape(-1)
        assert (mask[shown] == 0).all() and (mask[hidden] == 1).all()
    assert 0 < batch["memory"][:, -1, -1].mean() < 1
    # the learned simulator's memory hides the same cells for the same window
    e, t = int(data.windows[late[0]]["episode_index"]), int(data.windows[late[0]]["t"])
    memory = LatentMemory(model, geometry, 1)
    memory.reset([0], latents[e][:1], episodes[e].state[:1], torch.from_numpy(episodes[e].obs["top"][:1]).permute(0, 3, 1, 2))
    for f in range(1, t + 1):
        memory.append(0, latents[e][f], episodes[e].state[f])
    acts = torch.from_numpy(np.asarray(episodes[e].actions[t : t + model.cfg.chunk], np.float32))[None]
    torch.testing.assert_close(memory.context(acts)[0, -1], batch["memory"][0, -1])


def test_a_start_map_model_is_refused_on_a_task_without_a_map_camera_before_any_work(monkeypatch):
    from dataclasses import replace

    from wmsuite.envs import probes

    ego = probes.get_probe(ENV)
    assert memory_geometry(ENV, "ego", start_map=True).map_camera == "top"
    monkeypatch.setattr(probes, "get_probe", lambda env_id: replace(ego, map_camera=None, map_camera_fovy=None,
                                                                     map_camera_pose=None))
    assert memory_geometry(ENV, "ego").map_camera is None  # a memory without a map still has its geometry
    with pytest.raises(ValueError, match="names none \\(map_camera"):
        memory_geometry(ENV, "ego", start_map=True)
