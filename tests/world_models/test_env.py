"""WorldModelEnv: Gymnasium vector-env expectations, real context at reset, the rollout engine, steps that are
`rollout`, and `make_world_model_env`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.core.helpers import ConstantPolicy, CounterEnv
from tests.world_models.conftest import tiny_model
from wmsuite.checkpoint import save_checkpoint
from wmsuite.rollout import RolloutConfig
from wmsuite.rollout import rollout as run_policy
from wmsuite.types import Episode
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.contexts import EpisodeContext, GymResetContext
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.make import make_world_model_env
from wmsuite.world_models.model import LatentWorldModel
from wmsuite.world_models.rollout import WorldModelState, rollout


def _episode_env(episodes, n=3, horizon=3, seed=0):
    return WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=n, horizon=horizon,
                         seed=seed)


def test_spaces_and_step_contract(episodes):
    env = _episode_env(episodes)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
    assert env.single_action_space.shape == (2, 2) and env.action_space.shape == (3, 2, 2)
    obs, info = env.reset(seed=[0, 1, 2])
    assert env.observation_space.contains(obs)
    assert info["is_success"].dtype == bool and info["is_success"].shape == (3,)
    env.action_space.seed(0)
    obs, reward, term, trunc, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    assert reward.shape == (3,) and reward.dtype == np.float32
    assert term.dtype == bool and trunc.dtype == bool and term.shape == trunc.shape == (3,)
    assert info["trust/idm_error"].shape == (3,) and np.isfinite(info["trust/idm_error"]).all()
    assert ((info["trust/success_prob"] >= 0) & (info["trust/success_prob"] <= 1)).all()
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(np.zeros((3, 5, 2), np.float32))


def test_reset_uses_real_context_and_is_seeded(episodes):
    env = _episode_env(episodes)
    obs, _ = env.reset(seed=[2, 0, 1])
    for row, ep_index in enumerate([2, 0, 1]):
        ep = episodes[ep_index]
        # The pixel codec is lossless, so the observation after reset is exactly the real first frame.
        np.testing.assert_array_equal(obs["pixels"]["top"][row], ep.obs["top"][0])
        np.testing.assert_array_equal(obs["agent_pos"][row], ep.state[0])
        np.testing.assert_array_equal(obs["environment_state"][row], ep.env_state[0])
    # Same seeds and actions -> the same imagined trajectory, in a fresh env too.
    acts = np.random.default_rng(0).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = _episode_env(episodes, seed=7)
        env.reset(seed=[2, 0, 1])
        runs.append([env.step(a)[0]["pixels"]["top"] for a in acts])
    np.testing.assert_array_equal(np.stack(runs[0]), np.stack(runs[1]))


def test_reset_mask_resets_only_masked_envs_and_horizon_truncates(episodes):
    env = _episode_env(episodes, horizon=2)
    env.reset(seed=[0, 1, 2])
    chunk = np.zeros((3, 2, 2), np.float32)
    obs1, *_ = env.step(chunk)
    obs, _ = env.reset(seed=[3, None, None], options={"reset_mask": np.array([True, False, False])})
    np.testing.assert_array_equal(obs["pixels"]["top"][0], episodes[3].obs["top"][0])
    np.testing.assert_array_equal(obs["pixels"]["top"][1:], obs1["pixels"]["top"][1:])
    _, _, term, trunc, _ = env.step(chunk)
    assert not trunc[0] and (trunc[1:] | term[1:]).all()  # env 0 restarted its clock; 1 and 2 hit horizon 2


def _counter_model() -> LatentWorldModel:
    """A tiny model sized for CounterEnv (8x8 frames, agent_pos (1,), environment_state (1,), 1-D actions)."""
    torch.manual_seed(0)
    cfg = WorldModelConfig(camera="top", context=2, chunk=3, action_dim=1, state_dim=1, env_state_dim=1,
                           channels=(32,))
    stats = {"state_mean": [0.0], "state_std": [1.0], "env_state_mean": [0.0], "env_state_std": [1.0]}
    return LatentWorldModel(cfg, CodecConfig(kind="pixel", image_size=8, downsample=2), stats)


def _counter_env() -> CounterEnv:
    return CounterEnv(image_size=8)


def test_gym_reset_context_matches_the_real_env():
    env = WorldModelEnv(_counter_model(), GymResetContext(_counter_env), num_envs=2, horizon=4)
    real = _counter_env()
    obs, _ = env.reset(seed=[3, 9])
    for row, seed in enumerate([3, 9]):
        real_obs, _ = real.reset(seed=seed)
        np.testing.assert_array_equal(obs["pixels"]["top"][row], real_obs["pixels"]["top"])
        np.testing.assert_array_equal(obs["agent_pos"][row], real_obs["agent_pos"])


def test_runs_under_the_rollout_engine():
    env = WorldModelEnv(_counter_model(), GymResetContext(_counter_env), num_envs=2, horizon=4)
    policy = ConstantPolicy(value=0.5, horizon=5)  # predicts 5, the env takes chunks of 3
    episodes: list[Episode] = list(run_policy(policy, env, RolloutConfig(episodes=5, seed=10, progress=False)))
    assert sorted(ep.meta["episode_index"] for ep in episodes) == list(range(5))
    real = _counter_env()
    for ep in episodes:
        assert ep.length % 3 == 0 and 3 <= ep.length <= 4 * 3
        np.testing.assert_allclose(ep.actions, 0.5)
        assert ep.terminated or ep.truncated
        assert len(ep.meta["trust"]["trust/idm_error"]) == ep.length // 3
        first, _ = real.reset(seed=ep.meta["seed"])  # the episode starts from the real env's reset
        np.testing.assert_array_equal(ep.obs["top"][0], first["pixels"]["top"])


def test_seed_list_reset_reseeds_sampling_noise(episodes):
    """One env, the same seed list twice: the noise restarts with it (waves of a resumed evaluation)."""
    env = _episode_env(episodes, seed=7)
    acts = np.random.default_rng(1).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    runs = []
    for _ in range(2):
        env.reset(seed=[2, 0, 1])
        runs.append([env.step(a)[0]["pixels"]["top"] for a in acts])
    np.testing.assert_array_equal(np.stack(runs[0]), np.stack(runs[1]))


def test_a_noise_seed_draws_the_same_starts_again_with_other_noise(episodes):
    """noise_seed 0 is the default stream; another one keeps the starts (same first frames, from the
    same seeds) and changes the generated frames, reproducibly."""
    model = tiny_model(episodes, camera="top")
    acts = np.random.default_rng(1).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)

    def run(noise_seed, seed=(2, 0, 1)):
        env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=3, horizon=3, noise_seed=noise_seed)
        first = env.reset(seed=list(seed) if isinstance(seed, tuple) else seed)[0]["pixels"]["top"]
        return first, np.stack([env.step(a)[0]["pixels"]["top"] for a in acts])

    base, other, again = run(0), run(5), run(5)
    plain = WorldModelEnv(model, EpisodeContext(episodes), num_envs=3, horizon=3)
    first = plain.reset(seed=[2, 0, 1])[0]["pixels"]["top"]
    np.testing.assert_array_equal(np.stack([plain.step(a)[0]["pixels"]["top"] for a in acts]), base[1])
    np.testing.assert_array_equal(first, other[0])  # the same real starts
    np.testing.assert_array_equal(other[1], again[1])  # reproducible
    assert not np.array_equal(base[1], other[1])  # other noise, other frames
    assert not np.array_equal(run(0, seed=4)[1], run(5, seed=4)[1])  # an int seed too
    with pytest.raises(ValueError, match="noise_seed"):
        WorldModelEnv(model, EpisodeContext(episodes), num_envs=1, noise_seed=-1)


def test_steps_are_the_rollout_on_the_same_seeds(episodes):
    """N env steps draw the same noise in the same order as one N-chunk `rollout` from the same
    context: same latents (seen through the lossless codec), same final state, same IDM error; and
    info["chunk"] holds every frame of each chunk with its heads' readings."""
    model = tiny_model(episodes, camera="top", context_noise_eval=0.1)
    with torch.no_grad():  # a success head that never fires, so every observation is the chunk's last frame
        model.heads.net[-1].bias[model.cfg.state_dim + model.cfg.env_state_dim] = -30.0
    env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=3, horizon=10, seed=0)
    env.reset(seed=5)  # an int seed: sub-env i gets seed 5 + i, the sampling noise restarts from 5
    h = model.cfg.chunk
    acts = np.random.default_rng(2).uniform(-1, 1, (3, 4 * h, 2)).astype(np.float32)  # 4 chunks
    start = WorldModelState.from_frames(model, [episodes[s % 4].obs["top"][:1] for s in (5, 6, 7)])
    latents, end = rollout(model, start, torch.from_numpy(acts), generator=torch.Generator().manual_seed(5))
    previous = torch.cat([start.newest[:, None], latents], dim=1)  # (3, 4H+1, C, s, s)
    for t in range(4):
        obs, _, term, _, info = env.step(acts[:, t * h : (t + 1) * h])
        assert not term.any()
        want = model.codec.decode(latents[:, (t + 1) * h - 1]).permute(0, 2, 3, 1).numpy()
        np.testing.assert_array_equal(obs["pixels"]["top"], want)
        chunk = latents[:, t * h : (t + 1) * h]  # (3, H, C, s, s): every frame of the step, in info["chunk"]
        every = model.codec.decode(chunk.flatten(0, 1)).unflatten(0, (3, h)).permute(0, 1, 3, 4, 2).numpy()
        np.testing.assert_array_equal(info["chunk"]["pixels"]["top"], every)
        np.testing.assert_array_equal(info["chunk"]["pixels"]["top"][:, -1], want)
        heads = model.predict_heads(chunk)
        np.testing.assert_allclose(info["chunk"]["agent_pos"], heads["agent_pos"].detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(info["chunk"]["environment_state"], heads["environment_state"].detach().numpy(),
                                   atol=1e-6)
        np.testing.assert_array_equal(info["chunk"]["agent_pos"][:, -1], obs["agent_pos"])
        idm = model.inverse_dynamics(previous[:, t * h], latents[:, t * h : (t + 1) * h])
        want_idm = (idm - torch.from_numpy(acts[:, t * h : (t + 1) * h])).abs().mean(dim=(1, 2)).detach().numpy()
        np.testing.assert_array_equal(info["trust/idm_error"], want_idm)
    assert torch.equal(env.state.context, end.context)


def _register(env_id: str, **kwargs) -> str:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=_counter_env, **kwargs)
    return env_id


def test_make_world_model_env_from_a_checkpoint_and_an_env_id(tmp_path):
    model = _counter_model()
    save_checkpoint(tmp_path / "wm", model.state_dict(), model.config_dict())
    env_id = _register("wmsuite_test/Counter-v0", max_episode_steps=10)
    env = make_world_model_env(tmp_path / "wm", env_id, 2, seed=3)
    assert isinstance(env, WorldModelEnv) and env.num_envs == 2
    assert env.chunk == 3 and env.horizon == 4  # 10 steps in chunks of 3, the last one partial
    obs, _ = env.reset(seed=[3, 9])
    real = _counter_env()
    for row, seed in enumerate([3, 9]):
        np.testing.assert_array_equal(obs["pixels"]["top"][row], real.reset(seed=seed)[0]["pixels"]["top"])
    shared = make_world_model_env(model, env_id, 1)  # a loaded model is used as it is
    assert shared.model is model
    with pytest.raises(ValueError, match="import wmsuite.envs"):
        make_world_model_env(model, "wmsuite_test/NotRegistered-v0", 1)
    with pytest.raises(ValueError, match="max_episode_steps"):
        make_world_model_env(model, _register("wmsuite_test/Endless-v0"), 1)


def test_idm_stop_truncates_exactly_the_steps_whose_idm_error_crosses_it(episodes):
    """Without the stop, record every step's IDM error; with the stop at their median, the same seeds
    give the same frames up to the stop, and a sub-env is truncated exactly at its first step above it."""
    model = tiny_model(episodes, camera="top")
    with torch.no_grad():  # the success head never fires: episodes end by the horizon or the stop alone
        model.heads.net[-1].bias[model.cfg.state_dim + model.cfg.env_state_dim] = -30.0
    acts = np.random.default_rng(3).uniform(-1, 1, (5, 3, model.cfg.chunk, 2)).astype(np.float32)

    def run(stop):
        env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=3, horizon=5, seed=0, idm_stop=stop)
        env.reset(seed=[0, 1, 2])
        return [env.step(a) for a in acts]

    free = run(None)
    errors = np.stack([s[4]["trust/idm_error"] for s in free])  # (5 steps, 3 sub-envs)
    assert not any("trust/idm_stop" in s[4] for s in free)
    stop = float(np.median(errors))
    assert (errors[:4] > stop).any()  # some sub-env is stopped before the horizon
    stopped = run(stop)
    for i in range(3):
        first = int(np.argmax(errors[:, i] > stop)) if (errors[:, i] > stop).any() else None
        for t in range(5 if first is None else first + 1):
            _, _, term, trunc, info = stopped[t]
            assert info["trust/idm_stop"][i] == float(t == first) and not term[i]
            assert trunc[i] == (t == first or t == 4)
            np.testing.assert_array_equal(stopped[t][0]["pixels"]["top"][i], free[t][0]["pixels"]["top"][i])
    with pytest.raises(ValueError, match="idm_stop"):
        WorldModelEnv(model, EpisodeContext(episodes), num_envs=1, idm_stop=-1.0)


def test_the_shipped_pushtwocubes_model_runs_with_both_cubes_tracked():
    """assets/wm/pushtwocubes loads and steps PushTwoCubes with the tracked judge over both cubes: the
    observation is the real env's format and each tracked cube starts where the real one stands."""
    import wmsuite.envs  # noqa: F401  (registers the ids)
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

    probe = get_probe("wmsuite/PushTwoCubes-v0")
    model = load_world_model("assets:wm/pushtwocubes")
    tracking = ObjectTracking(agent_xy=probe.agent_xy, object_xy=probe.object_xy, reach=probe.reach,
                              others_xy=probe.others_xy)
    env = make_world_model_env(model, probe.env_id, 2, seed=0, judge="tracked", tracking=tracking,
                               success_fn=probe.success_from_env_state, static_state=probe.static_state)
    obs, _ = env.reset(seed=[0, 1])
    assert obs["environment_state"].shape == (2, 12) and env._trackers["tracked"].positions.shape == (2, 2, 2)
    np.testing.assert_array_equal(env._trackers["tracked"].positions[:, 1], obs["environment_state"][:, 4:6])  # the green cube
    obs, _, terminated, truncated, info = env.step(np.zeros((2, *env.single_action_space.shape), np.float32))
    assert obs["pixels"]["top"].shape == (2, 64, 64, 3) and "judge/tracked" in info
    env.close()


def test_the_shipped_pickplace_model_reads_its_real_start_and_steps():
    """assets/wm/pickplace loads and steps PickPlace in the real env's format under its task's judge
    (latched, the probe's auto_judge); its state head reads the real start's cube within a few
    centimetres (the start is the real first frame)."""
    import wmsuite.envs  # noqa: F401  (registers the ids)
    from wmsuite.envs.probes import get_probe
    from wmsuite.world_models import ObjectTracking, load_world_model, make_world_model_env

    probe = get_probe("wmsuite/PickPlace-v0")
    model = load_world_model("assets:wm/pickplace")
    assert model.cfg.camera == "front" and model.cfg.action_dim == 4
    env = make_world_model_env(model, probe.env_id, 2, seed=0, judge=probe.auto_judge,
                               success_fn=probe.success_from_env_state,
                               tracking=ObjectTracking.from_probe(probe), static_state=probe.static_state)
    obs, _ = env.reset(seed=[3, 4])
    real_env = gym.make(probe.env_id)
    real = np.stack([real_env.reset(seed=s)[0]["environment_state"] for s in (3, 4)])
    real_env.close()
    np.testing.assert_array_equal(obs["environment_state"], real)
    read = model.predict_heads(env.state.context[:, -1])["environment_state"].detach().numpy()
    assert np.abs(read[:, :2] - real[:, :2]).max() < 0.03  # the cube's x, y read off the encoded frame
    obs, _, _, _, info = env.step(np.zeros((2, *env.single_action_space.shape), np.float32))
    assert obs["pixels"]["front"].shape == (2, 64, 64, 3)
    assert {"judge/state", "judge/tracked", "judge/latched"} <= set(info)
    np.testing.assert_array_equal(obs["environment_state"][:, 3:], real[:, 3:])  # the target held at its start
    env.close()


def test_the_shipped_backward_copy_plays_a_real_push_back_to_where_it_started():
    """assets/wm/pushcube-back fits both shipped PushCube simulators (their codec, context, chunk and
    action size) and, played back from the real frames that end a push of a real expert episode with
    the push's actions reversed, puts the cube (read by the simulator's heads) back near where the
    push started it; the forward-only simulator asked to do the same does not."""
    from wmsuite.envs.experts import make_expert
    from wmsuite.envs.probes import get_probe
    from wmsuite.eval_harness.abstention import CalibratedTrust
    from wmsuite.rollout import RolloutConfig, make_vector_env, rollout
    from wmsuite.specs import CALIBRATION, file_digest, resolve_asset
    from wmsuite.world_models import load_world_model, resolve_checkpoint
    from wmsuite.world_models.trust import check_backward_model, round_trip_error

    sim, back = load_world_model("assets:wm/pushcube"), load_world_model("assets:wm/pushcube-back")
    check_backward_model(sim, back)
    check_backward_model(load_world_model("assets:wm/pushcube-fast"), back)
    assert back.cfg.p_backward == 1.0
    where = {name: resolve_checkpoint(resolve_asset(f"assets:wm/{name}")) for name in ("pushcube", "pushcube-fast")}
    digest = {name: file_digest(path) for name, path in where.items()}
    calibration = resolve_checkpoint(resolve_asset("assets:wm/pushcube-back")) / CALIBRATION  # and its novelty bank
    assert CalibratedTrust.load(calibration, sim.cfg.chunk, simulator=digest["pushcube"]).calibrator.novelty_limit
    with pytest.raises(ValueError, match="fitted on the rollouts of another world model"):
        CalibratedTrust.load(calibration, sim.cfg.chunk, simulator=digest["pushcube-fast"])
    probe = get_probe("wmsuite/PushCube-v0")
    env = make_vector_env(probe.env_id, 1, asynchronous=False)
    ep = next(rollout(make_expert(probe.env_id, skill=1.0, seed=0), env, RolloutConfig(episodes=1, seed=5,
                                                                                        progress=False)))
    env.close()
    cube = probe.object_xy_from_env_state(ep.env_state)  # (T+1, 2) metres
    n, k = 12, sim.cfg.context
    t0 = int(np.argmax(np.linalg.norm(cube[n:] - cube[:-n], axis=1)))  # the window where the cube moves most
    moved = float(np.linalg.norm(cube[t0 + n] - cube[t0]))
    assert moved > 0.04  # a real push: the check below means something
    frames = torch.from_numpy(ep.obs["top"][t0 : t0 + n + 1].transpose(0, 3, 1, 2).copy())  # (n+1, 3, S, S)
    latents = sim.codec.encode(frames)  # (n+1, C, s, s)
    actions = torch.from_numpy(ep.actions[t0 : t0 + n]).float()[None]  # (1, n, A)
    env_state = torch.from_numpy(ep.env_state[t0]).float()[None]  # (1, E)
    out = round_trip_error(sim, latents[:1], latents[None, n - k + 1 :], actions, env_state, backward=back,
                           generator=torch.Generator().manual_seed(0))
    landed = float(out["env_state"][0, probe.object_xy].norm())
    own = round_trip_error(sim, latents[:1], latents[None, n - k + 1 :], actions, env_state,
                           generator=torch.Generator().manual_seed(0))  # no copy: the simulator itself
    assert landed < 0.25 * moved < float(own["env_state"][0, probe.object_xy].norm()), (landed, moved)
