"""The latent world model: shapes and dtypes end to end, codecs, checkpoints, learning, direction, IDM."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch

from tests.world_models.conftest import overfit, tiny_model
from wmsuite.world_models import BACKWARD, FORWARD, load_world_model
from wmsuite.world_models.codec import codec_loss, make_codec, reconstruction_psnr
from wmsuite.world_models.config import CodecConfig, WorldModelConfig
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames, sample_windows
from wmsuite.world_models.train import frame_labels, save_model, warm_start


def _windows(model, episodes):
    lat = encode_episodes(model.codec, episode_frames(episodes, "top"))
    return LatentWindows(episodes, lat, model.cfg.context, model.cfg.chunk)


@pytest.mark.parametrize("kind", ["pixel", "patch", "autoencoder_kl"])
def test_codec_shapes_and_dtypes(kind):
    codec = make_codec(CodecConfig(kind=kind, image_size=16, downsample=4, width=16, blocks=1))
    frames = torch.randint(0, 256, (3, 3, 16, 16), dtype=torch.uint8)
    z = codec.encode(frames)
    assert z.dtype == torch.float32 and z.shape == (3, codec.latent_channels, 4, 4)
    out = codec.decode(z)
    assert out.dtype == torch.uint8 and out.shape == frames.shape
    if kind != "pixel":
        loss, logs = codec_loss(codec, frames)
        loss.backward()
        assert torch.isfinite(loss) and logs["codec/mse"] > 0


def test_pixel_codec_is_lossless_after_fitting_stats(episodes):
    codec = make_codec(CodecConfig(kind="pixel", image_size=16, downsample=4))
    frames = torch.cat(episode_frames(episodes, "top"))
    codec.fit_latent_stats(frames)
    z = codec.encode(frames)
    # Normalised to std sigma_data per channel, mean 0 (up to the clamp of constant channels).
    assert z.mean(dim=(0, 2, 3)).abs().max() < 1e-4
    assert torch.equal(codec.decode(z), frames)
    assert reconstruction_psnr(codec, frames) > 90


def test_shapes_through_the_whole_model(episodes):
    model = tiny_model(episodes)
    data = _windows(model, episodes)
    batch = data.batch(range(5))
    k, h, c = model.cfg.context, model.cfg.chunk, model.codec.latent_channels
    assert batch["context"].shape == (5, k, c, 4, 4) and batch["future"].shape == (5, h + k - 1, c, 4, 4)
    loss, logs = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert {"diffusion", "idm", "consistency", "head_success", "head_env_state"} <= set(logs)
    lat = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(0))
    assert lat.shape == (5, h, c, 4, 4) and lat.dtype == torch.float32
    heads = model.predict_heads(lat)
    assert heads["agent_pos"].shape == (5, h, 2) and heads["environment_state"].shape == (5, h, 4)
    assert heads["success_logit"].shape == (5, h) and heads["reward"].shape == (5, h)
    assert model.inverse_dynamics(batch["context"][:, -1], lat).shape == (5, h, 2)
    frames = model.codec.decode(lat.flatten(0, 1))
    assert frames.shape == (5 * h, 3, 16, 16) and frames.dtype == torch.uint8


def test_checkpoint_round_trip_gives_identical_outputs(episodes, tmp_path):
    model = tiny_model(episodes, codec_kind="patch").eval()
    save_model(model, tmp_path, step=3)
    loaded = load_world_model(tmp_path)  # the run dir resolves to latest/
    assert loaded.cfg == model.cfg and loaded.codec_cfg == model.codec_cfg
    batch = _windows(model, episodes).batch(range(4))
    a = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(1))
    b = loaded.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    for key in ("agent_pos", "environment_state", "success_logit", "reward"):
        assert torch.equal(model.predict_heads(a)[key], loaded.predict_heads(a)[key])
    assert torch.equal(model.codec.decode(a[:, 0]), loaded.codec.decode(a[:, 0]))
    stepped = load_world_model(tmp_path / "step_3", sampling_steps=1)
    assert stepped.cfg.sampling_steps == 1


@pytest.mark.parametrize("kind", ["keypoints", "conv"])
def test_frame_heads_kinds_shapes_and_unknown_kind(episodes, kind):
    model = tiny_model(episodes, heads=kind)
    lat = torch.randn(3, 5, model.codec.latent_channels, 4, 4)
    out = model.predict_heads(lat)
    assert out["agent_pos"].shape == (3, 5, 2) and out["environment_state"].shape == (3, 5, 4)
    assert out["success_logit"].shape == (3, 5) and out["reward"].shape == (3, 5)
    with pytest.raises(ValueError, match="heads must be 'keypoints' or 'conv'"):
        WorldModelConfig(heads="mlp")


def test_spatial_keypoints_find_the_peak_in_frame_coordinates():
    from wmsuite.world_models.heads import SpatialKeypoints

    kp = SpatialKeypoints(channels=1, size=5, width=1, keypoints=1)
    kp.trunk = torch.nn.Identity()  # features = the input itself
    with torch.no_grad():
        kp.attention.weight.fill_(50.0)  # attention logits = 50 * input: a near-hard argmax
        kp.attention.bias.zero_()
    for row, col in [(0, 0), (4, 1), (2, 3)]:
        z = torch.zeros(1, 1, 5, 5)
        z[0, 0, row, col] = 1.0
        x, y = kp(z)[0, :2].tolist()
        # x runs left to right and y top to bottom, both over [-1, 1]
        assert x == pytest.approx(-1 + col / 2, abs=1e-6) and y == pytest.approx(-1 + row / 2, abs=1e-6)


def test_checkpoints_from_before_the_heads_option_load_with_conv_heads(episodes, tmp_path):
    import json

    model = tiny_model(episodes, heads="conv").eval()
    path = save_model(model, tmp_path, step=1)
    config = json.loads((path / "config.json").read_text())
    del config["world_model"]["heads"]  # as written before the option existed
    (path / "config.json").write_text(json.dumps(config))
    loaded = load_world_model(path)
    assert loaded.cfg.heads == "conv"
    lat = torch.randn(2, model.codec.latent_channels, 4, 4)
    assert torch.equal(model.predict_heads(lat)["environment_state"], loaded.predict_heads(lat)["environment_state"])


def test_missing_normalisation_stats_is_an_error(episodes):
    from wmsuite.world_models.model import LatentWorldModel

    sized = WorldModelConfig(action_dim=2, state_dim=2, env_state_dim=6, channels=(16,))
    with pytest.raises(ValueError, match="env_state_mean"):
        LatentWorldModel(sized, CodecConfig(), {"state_mean": [0, 0], "state_std": [1, 1]})
    with pytest.raises(ValueError, match="unset"):
        LatentWorldModel(WorldModelConfig(), CodecConfig(), {"state_mean": [0, 0], "state_std": [1, 1]})


def _eval_losses(model, batch):
    torch.manual_seed(123)  # same noise levels, noise and direction draws before and after training
    with torch.no_grad():
        return model.loss(batch)[1]


@pytest.mark.parametrize("prediction", ["edm", "sample"])
def test_tiny_model_overfits_a_handful_of_windows_both_directions(episodes, prediction):
    """Forward and backward (direction flag) windows and the IDM are all learned: the losses fall."""
    model = tiny_model(episodes, p_backward=0.5, context_noise_max=0.0, p_single_frame=0.0, prediction=prediction)
    data = _windows(model, episodes[:2])
    batch = data.batch(range(0, 16, 2))
    before = _eval_losses(model, batch)
    gen_before = _generation_error(model, batch)
    overfit(model, batch)
    after = _eval_losses(model, batch)
    # The EDM loss has a floor (at large noise levels even a memoriser is unsure which window it
    # sees), so the sampled frames are the sharper check: their error falls by an order of magnitude.
    assert after["diffusion"] < 0.5 * before["diffusion"], (before, after)
    gen_after = _generation_error(model, batch)
    assert gen_after < 0.1 * gen_before, (gen_before, gen_after)
    assert after["idm"] < 0.3 * before["idm"], (before, after)
    assert after["head_state"] < 0.3 * before["head_state"], (before, after)
    # The direction flag matters: generating a backward window from its (reversed) context is closer to
    # the true earlier frames than generating it with the forward flag.
    k, h = model.cfg.context, model.cfg.chunk
    ctx_b = batch["future"][:, h - 1 : h - 1 + k].flip(1)
    tgt_b = torch.cat([batch["context"][:, -1:], batch["future"][:, : h - 1]], 1).flip(1)
    act_b = batch["actions"].flip(1)
    gen = torch.Generator().manual_seed(0)
    err_b = (model.generate(ctx_b, act_b, BACKWARD, generator=gen) - tgt_b).pow(2).mean()
    err_f = (model.generate(ctx_b, act_b, FORWARD, generator=gen) - tgt_b).pow(2).mean()
    assert err_b < err_f, (float(err_b), float(err_f))


@pytest.mark.parametrize("prediction", ["edm", "sample"])
def test_denoiser_preconditioning_matches_its_definition(episodes, prediction):
    """With the UNet's output forced to zero, D(x; sigma) is what the skip path alone gives: EDM's
    c_skip * x = sigma_data^2 / (sigma^2 + sigma_data^2) * x, and nothing for clean-frame prediction;
    and the loss weight is 1 / c_out^2 of each."""
    model = tiny_model(episodes, prediction=prediction)
    torch.nn.init.zeros_(model.denoiser.conv_out.weight)
    torch.nn.init.zeros_(model.denoiser.conv_out.bias)
    k, h, c, sd = model.cfg.context, model.cfg.chunk, model.codec.latent_channels, model.cfg.sigma_data
    x = torch.randn(3, h, c, 4, 4)
    sigma = torch.tensor([0.1, 1.0, 4.0])
    with torch.no_grad():
        d = model.denoise(x, sigma, torch.randn(3, k, c, 4, 4), torch.zeros(3, h, 2), torch.ones(3), torch.zeros(3))
    c_skip = sd**2 / (sigma**2 + sd**2) if prediction == "edm" else torch.zeros(3)
    torch.testing.assert_close(d, c_skip.view(3, 1, 1, 1, 1) * x)
    c_out = sigma * sd / (sigma**2 + sd**2).sqrt() if prediction == "edm" else torch.full((3,), sd)
    torch.testing.assert_close(model._loss_weight(sigma), 1 / c_out**2)


def test_unknown_prediction_is_an_error():
    with pytest.raises(ValueError, match="prediction"):
        WorldModelConfig(prediction="v")


def _generation_error(model, batch) -> float:
    """MSE of forward-generated latent frames against the true next frames."""
    h = model.cfg.chunk
    lat = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(0))
    return float((lat - batch["future"][:, :h]).pow(2).mean())


def test_generation_is_seeded(episodes):
    model = tiny_model(episodes)
    batch = _windows(model, episodes).batch(range(3))
    a = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(5))
    b = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(5))
    c = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert np.isfinite(a.numpy()).all()


def test_half_precision_export_loads_back_close(episodes, tmp_path):
    from wmsuite.world_models.export import export_model

    model = tiny_model(episodes).eval()
    save_model(model, tmp_path / "run", step=1)
    export_model(tmp_path / "run", tmp_path / "shipped")
    loaded = load_world_model(tmp_path / "shipped")
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    torch.testing.assert_close(loaded.codec.latent_std, model.codec.latent_std)  # stats stay float32
    batch = _windows(model, episodes).batch(range(3))
    a = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(0))
    b = loaded.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a, b, atol=2e-2, rtol=0)  # float16 weights: ~1e-3 relative each
    export_model(tmp_path / "run", tmp_path / "three", sampling_steps=3)
    assert load_world_model(tmp_path / "three").cfg.sampling_steps == 3
    with pytest.raises(ValueError, match="sampling_steps"):
        export_model(tmp_path / "run", tmp_path / "zero", sampling_steps=0)
    assert not (tmp_path / "zero").exists()
    export_model(tmp_path / "run", tmp_path / "named", env_id="wmsuite/PushCubeEgo-v0")
    assert json.loads((tmp_path / "named" / "config.json").read_text())["env_id"] == "wmsuite/PushCubeEgo-v0"
    with pytest.raises(ValueError, match="not a registered environment"):
        export_model(tmp_path / "run", tmp_path / "unknown", env_id="wmsuite/NoSuchTask-v0")
    assert not (tmp_path / "unknown").exists()
    (tmp_path / "named" / "README.md").write_text("# Model card\n")  # re-exporting keeps the card, new weights
    export_model(tmp_path / "run", tmp_path / "named", sampling_steps=3)
    assert (tmp_path / "named" / "README.md").read_text() == "# Model card\n"
    assert load_world_model(tmp_path / "named").cfg.sampling_steps == 3


def test_motion_weight_adds_exactly_the_weighted_error_of_changed_elements(episodes):
    """loss(w) - loss(0) = w * EDM-weighted error on the elements that changed, and nothing else.

    The square moves every step, so some elements change; in a frozen copy of the windows (every frame
    the same) nothing changes and the weight must not alter the loss at all."""
    model = tiny_model(episodes, motion_weight=0.0)
    batch = _windows(model, episodes).batch(range(6))

    def diffusion(weight: float, b: dict) -> float:
        model.cfg.motion_weight = weight
        torch.manual_seed(7)  # same directions, noise levels and noise for every call
        with torch.no_grad():
            return model.loss(b)[1]["diffusion"]

    base, heavy, heavier = diffusion(0.0, batch), diffusion(3.0, batch), diffusion(6.0, batch)
    assert heavy > base * 1.01  # changed elements exist and carry error
    assert heavier - base == pytest.approx(2 * (heavy - base), rel=1e-4)  # linear in the weight
    frozen = dict(batch)
    still = batch["context"][:, -1:]
    frozen["context"] = still.expand_as(batch["context"]).clone()
    frozen["future"] = still.expand_as(batch["future"]).clone()
    assert diffusion(5.0, frozen) == pytest.approx(diffusion(0.0, frozen), rel=1e-6)



def test_context_motion_weight_ignores_the_answer_and_keeps_the_weighted_optimum_at_the_mean(episodes):
    """Two equally likely answers for one context: the cube stays, or it moves one cell. Per element, the
    weighted-least-squares optimum is sum(w * x) / sum(w). motion_weight weighs an element by whether
    the answer changed it, so the optimum leans to "moved" (11/12 with weight 10, not 1/2);
    context_motion_weight gives both answers the same weight (cells within reach of what moved in the
    context), so the optimum is their mean."""
    model = tiny_model(episodes, motion_reach=1)
    k, h = model.cfg.context, model.cfg.chunk
    c, s = model.codec.latent_channels, model.codec.latent_size
    context = torch.zeros(1, k, c, s, s)
    context[0, 0, :, 1, 2] = 1.0  # something left cell (1, 2) within the context
    stayed = context[:, -1:].expand(1, h, c, s, s).clone()
    moved = stayed.clone()
    moved[..., 1, 3] = 1.0  # the answer that moves an object into cell (1, 3)

    def weights(target_weight: float, context_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
        model.cfg.motion_weight, model.cfg.context_motion_weight = target_weight, context_weight
        return model.motion_weights(context, stayed), model.motion_weights(context, moved)

    w_stay, w_move = weights(0.0, 10.0)
    assert torch.equal(w_stay, w_move)
    reach = torch.ones(s, s)
    reach[0:3, 1:4] = 11.0  # reach 1 around (1, 2)
    assert torch.equal(w_stay[0, 0, 0], reach)

    def optimum(target_weight: float, context_weight: float) -> float:
        w_stay, w_move = weights(target_weight, context_weight)
        return float(((w_stay * stayed + w_move * moved) / (w_stay + w_move))[0, 0, 0, 1, 3])

    assert optimum(0.0, 10.0) == pytest.approx(0.5)
    assert optimum(10.0, 0.0) == pytest.approx(11 / 12)
    assert optimum(10.0, 10.0) == pytest.approx(21 / 32)  # the shipped model's phase 5
    with pytest.raises(ValueError, match="context_motion_weight"):
        WorldModelConfig(context_motion_weight=-1.0)


def test_generated_head_data_pairs_each_generated_frame_with_the_real_frame_it_stands_for(episodes):
    from wmsuite.world_models.data import generated_head_data

    model = tiny_model(episodes).eval()
    lat = torch.cat(encode_episodes(model.codec, episode_frames(episodes, "top")))  # (N, C, s, s)
    gen, idx = generated_head_data(model, episodes, lat, windows=10, chunks=3, seed=0, batch=4)
    assert gen.shape[1:] == lat.shape[1:] and len(gen) == len(idx) and len(gen) % model.cfg.chunk == 0
    starts = np.cumsum([0] + [ep.length + 1 for ep in episodes])[:-1]
    assert not set(idx.tolist()) & set(starts.tolist())  # never an episode's first frame: it is never generated
    assert int(idx.max()) < len(lat)
    # the first generated frame of each rollout follows its start; its step number is right
    step = idx - torch.from_numpy(starts)[torch.bucketize(idx, torch.from_numpy(starts), right=True) - 1]
    assert (step >= 1).all() and (step <= max(ep.length for ep in episodes)).all()


def test_frame_labels_take_what_each_frame_shows():
    """The detected object position replaces the real one, success follows the task's rule on it, and a
    frame where nothing is detected is no success; the real states passed in are left untouched."""
    found = np.array([[0.0, 0.01], [0.3, 0.3], [np.nan, np.nan]])
    rule = lambda s: np.linalg.norm(s[..., :2] - s[..., 4:6], axis=-1) < 0.05  # noqa: E731
    real = np.tile(np.array([0.2, 0.2, 1.0, 0.0, 0.0, 0.0]), (3, 1))  # real cube at (0.2, 0.2), goal at 0
    shown, success = frame_labels(lambda frames: found, slice(0, 2), rule)(np.zeros((3, 8, 8, 3), np.uint8), real)
    np.testing.assert_array_equal(shown[:, :2], [[0.0, 0.01], [0.3, 0.3], [0.2, 0.2]])
    np.testing.assert_array_equal(shown[:, 2:], real[:, 2:])
    assert success.tolist() == [True, False, False] and real[0, 0] == 0.2


def test_frame_labels_take_every_detected_object():
    """With two object slices, each detected object replaces its own entries; success needs every
    object detected and the rule met."""
    found = np.array([[[0.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [np.nan, np.nan]], [[0.3, 0.3], [1.0, 1.02]]])
    rule = lambda s: (np.linalg.norm(s[..., 0:2], axis=-1) < 0.05) & (np.linalg.norm(s[..., 2:4] - 1, axis=-1) < 0.05)  # noqa: E731
    real = np.tile(np.array([0.2, 0.2, 0.5, 0.5]), (3, 1))
    shown, success = frame_labels(lambda frames: found, (slice(0, 2), slice(2, 4)), rule)(
        np.zeros((3, 8, 8, 3), np.uint8), real)
    np.testing.assert_array_equal(shown, [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5], [0.3, 0.3, 1.0, 1.02]])
    assert success.tolist() == [True, False, False]  # row 1: the real second object would fail anyway,
    # and an undetected object is never a success even where the real state would pass
    real[1, 2:] = 1.0
    assert frame_labels(lambda frames: found, (slice(0, 2), slice(2, 4)), rule)(
        np.zeros((3, 8, 8, 3), np.uint8), real)[1].tolist() == [True, False, False]


def test_self_forcing_history_is_the_real_past_and_its_rollout_replaces_the_context(episodes):
    """The R chunks before each window come from the episode itself (frames and true actions), windows
    too early for them are marked invalid, and a self-forced context is exactly the model's own
    R-chunk rollout from there, only in the rows asked for."""
    model = tiny_model(episodes, objective="chained", self_forcing=1.0, self_forcing_chunks=2)
    k, h, span = model.cfg.context, model.cfg.chunk, 2 * model.cfg.chunk
    data = _windows(model, episodes)
    idx = list(range(0, len(data), 3))
    batch = data.batch(idx, history_chunks=2)
    assert batch["history"].shape == batch["context"].shape
    assert batch["history_target"].shape == (len(idx), h + k, *batch["context"].shape[2:])
    assert batch["history_actions"].shape == (len(idx), span, 2)
    for row, i in enumerate(idx):
        item = data.windows[i]
        e, t = int(item["episode_index"]), int(item["t"])
        assert bool(batch["history_valid"][row]) == (t >= span)
        if t >= span:
            rows = np.clip(np.arange(t - span - k + 1, t - span + 1), 0, None)
            torch.testing.assert_close(batch["history"][row], data.latents[e][rows])
            np.testing.assert_array_equal(batch["history_actions"][row].numpy(), episodes[e].actions[t - span : t])
            torch.testing.assert_close(batch["history_target"][row], data.latents[e][t - span : t - span + h + k])
    assert batch["history_valid"].any() and not batch["history_valid"].all()

    use = batch["history_valid"].clone()
    use[use.nonzero()[0]] = False  # leave one valid row out too
    torch.manual_seed(3)
    out = model._self_forced_context(batch["context"], batch["history"], batch["history_actions"], use)
    torch.manual_seed(3)
    context, actions = batch["history"][use], batch["history_actions"][use]
    for r in range(2):
        context = torch.cat([context, model.generate(context, actions[:, r * h : (r + 1) * h])], 1)[:, -k:]
    torch.testing.assert_close(out[use], context)
    torch.testing.assert_close(out[~use], batch["context"][~use])
    assert not torch.allclose(out[use], batch["context"][use])  # an untrained model's rollout is not the past

    seen = []  # what the motion weights compare the target with: the real context, never the self-forced one
    weights = model.motion_weights
    model.motion_weights = lambda context, target: seen.append(context) or weights(context, target)
    model.cfg = dataclasses.replace(model.cfg, p_single_frame=0.0)
    loss, logs = model.loss(batch)
    torch.testing.assert_close(seen[0], batch["context"])
    loss.backward()
    assert np.isfinite(logs["diffusion"])
    assert model.denoiser.conv_in.weight.grad.abs().sum() > 0
    for bad in ({"self_forcing": 1.5}, {"self_forcing_chunks": 0}):
        with pytest.raises(ValueError, match="self_forcing"):
            tiny_model(episodes, objective="chained", **bad)


def test_moving_windows_are_those_whose_object_moves_and_sampling_draws_the_asked_share(episodes):
    """`moving` holds exactly the windows whose square (env_state) moves over the chunk, checked
    against the episodes' own positions; a batch with moving_fraction f takes round(f * B) of them and
    f = 0 is the plain uniform draw (so runs without the option keep their random stream)."""
    model = tiny_model(episodes)
    h = model.cfg.chunk
    data = _windows(model, episodes)
    expected = [i for i, (e, t) in enumerate(data.windows.index)
                if (episodes[e].state[min(t + h, episodes[e].length)] != episodes[e].state[t]).any()]
    assert data.moving.tolist() == expected
    assert 0 < len(expected) < len(data)  # the square stops at the right edge: some windows are still

    gen = torch.Generator().manual_seed(0)
    idx = sample_windows(data, 8, 0.5, gen)
    assert len(idx) == 8 and set(idx[:4]) <= set(expected)
    # only episode 0 moves: a quarter of the windows, so a uniform draw of 16 would miss them
    one = [ep if i == 0 else dataclasses.replace(ep, env_state=np.zeros_like(ep.env_state))
           for i, ep in enumerate(episodes)]
    rare = _windows(model, one)
    assert {rare.windows.index[i][0] for i in rare.moving.tolist()} == {0}
    assert set(sample_windows(rare, 16, 1.0, gen)) <= set(rare.moving.tolist())
    plain = sample_windows(data, 8, 0.0, torch.Generator().manual_seed(1))
    assert plain == torch.randint(len(data), (8,), generator=torch.Generator().manual_seed(1)).tolist()

    still = [dataclasses.replace(ep, env_state=np.zeros_like(ep.env_state)) for ep in episodes]
    with pytest.raises(ValueError, match="no training window moves"):
        sample_windows(_windows(model, still), 8, 0.25, gen)


def test_warm_start_copies_matching_weights_and_keeps_its_own_sizes_and_statistics(episodes):
    source = tiny_model(episodes, seed=0)
    wider = [ep.__class__(**{**ep.__dict__, "env_state": ep.env_state.repeat(2, axis=1) + 1.0}) for ep in episodes]
    model = tiny_model(wider, seed=1, env_state_dim=8)  # another task's state size: heads of another shape
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert "fresh: heads" in warm_start(model, source, "source")
    own, theirs = model.state_dict(), source.state_dict()
    for k, v in own.items():
        if k.endswith(("state_mean", "state_std")):
            assert torch.equal(v, before[k])  # the data's statistics are the new model's own
        elif theirs[k].shape == v.shape:
            assert torch.equal(v, theirs[k]), k
        else:
            assert torch.equal(v, before[k]), k  # no match: left as initialised
    assert not torch.equal(own["env_state_mean"], theirs["env_state_mean"].repeat(2))
    assert any(theirs[k].shape != v.shape for k, v in own.items())  # the test covers a fresh head


def test_compile_inference_keeps_the_state_dict_and_the_answers(episodes):
    model = tiny_model(episodes).eval()
    eager = copy.deepcopy(model)
    keys = list(model.state_dict())
    model.compile_inference(dynamic=False)
    assert list(model.state_dict()) == keys  # checkpoints written after compiling load into an eager model
    torch.manual_seed(0)
    latents = torch.randn(3, model.codec.latent_channels, model.codec.latent_size, model.codec.latent_size)
    with torch.no_grad():
        got, want = model.predict_heads(latents), eager.predict_heads(latents)  # the heads' graph compiles here
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5)
