"""The trust study's rows against a rollout done by hand, and its figures on rows whose answer is known."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.world_models.conftest import moving_square_episode, tiny_model
from wmsuite.eval_harness.trust_study import calibration_figures, signal_figures, trust_rows
from wmsuite.world_models.rollout import WorldModelState, rollout

PROBE = SimpleNamespace(object_xy=slice(0, 2))  # the square's position in environment_state


def test_rows_match_a_rollout_done_by_hand():
    episodes = [moving_square_episode(seed=s) for s in range(3)]  # 12 actions each: 6 chunks of 2
    model = tiny_model(episodes, p_backward=0.5).eval()
    rows = trust_rows(model, episodes, PROBE, depths=(1, 3, 6), seed=5)
    assert rows["depth"].tolist() == [1, 1, 1, 3, 3, 3, 6, 6, 6]
    assert rows["episode"].tolist() == [0, 1, 2] * 3
    for key in ("latent", "object", "round_trip", "round_trip_object", "idm"):
        assert np.isfinite(rows[key]).all() and (rows[key] >= 0).all()
    # the same rollout by hand: the generator of batch 0 is seeded with seed + 0
    with torch.no_grad():
        state = WorldModelState.from_frames(model, [ep.obs["top"][:1] for ep in episodes])
        actions = torch.as_tensor(np.stack([ep.actions for ep in episodes]))
        lat, _ = rollout(model, state, actions[:, :6], generator=torch.Generator().manual_seed(5))
        real = model.codec.encode(torch.as_tensor(np.stack([ep.obs["top"][6] for ep in episodes])).permute(0, 3, 1, 2))
        want = ((lat[:, 5] - real) ** 2).mean(dim=(1, 2, 3))
    np.testing.assert_allclose(rows["latent"][rows["depth"] == 3], want.numpy(), rtol=1e-5)
    with torch.no_grad():  # the start reading: the heads on the real first frame against its real position
        read = model.predict_heads(state.newest)["environment_state"][:, :2].numpy()
    want_start = np.linalg.norm(read - np.stack([ep.env_state[0, :2] for ep in episodes]), axis=-1)
    for d in (1, 3, 6):
        np.testing.assert_allclose(rows["start"][rows["depth"] == d], want_start, rtol=1e-5)


def test_short_episodes_leave_the_deep_rows():
    episodes = [moving_square_episode(t=4, seed=0), moving_square_episode(t=12, seed=1)]
    rows = trust_rows(tiny_model(episodes, p_backward=0.5).eval(), episodes, PROBE, depths=(1, 2, 4))
    assert list(zip(rows["episode"], rows["depth"])) == [(0, 1), (1, 1), (0, 2), (1, 2), (1, 4)]
    with pytest.raises(ValueError, match="depths"):
        trust_rows(tiny_model(episodes), episodes, PROBE, depths=(0,))


def _rows(n_episodes, rng, noise):
    """Rows where the true error is the round-trip error times a log-normal factor."""
    depth = np.tile(np.arange(1, 6), n_episodes)
    episode = np.repeat(np.arange(n_episodes), 5)
    rt = np.exp(rng.normal(-4, 1, len(depth)) + 0.3 * depth)
    obj = rt * np.exp(rng.normal(0, noise, len(depth)))
    return {"episode": episode, "depth": depth, "round_trip": rt, "round_trip_object": rt, "idm": rng.random(len(depth)),
            "latent": obj, "object": obj}


def test_figures_on_rows_whose_answer_is_known():
    rng = np.random.default_rng(0)
    exact = signal_figures(_rows(40, rng, 0.0))
    assert exact["round_trip_vs_object"]["across_episodes_median"] == pytest.approx(1.0)
    assert exact["round_trip_vs_object"]["within_episodes_median"] == pytest.approx(1.0)
    cal, fig = calibration_figures(_rows(400, rng, 0.3), _rows(400, rng, 0.3), features=("round_trip", "depth"))
    assert abs(fig["coverage_68"] - 0.68) < 0.05 and abs(fig["coverage_95"] - 0.95) < 0.03
    assert fig["error_kept"] < fig["error_kept_depth_only"] < fig["error_all"]  # rt knows more than depth
    assert cal.weights[1] == pytest.approx(1.0, abs=0.05)  # log true error = log rt + noise


def test_cross_validation_prefers_the_residual_model_the_rows_were_drawn_from():
    from wmsuite.eval_harness.trust_study import cross_validated_coverage

    rng = np.random.default_rng(1)
    normal = _rows(600, rng, 0.3)
    heavy = _rows(600, rng, 0.0)
    heavy["object"] = heavy["object"] * np.exp(0.3 * rng.standard_t(2, len(heavy["object"])))
    feats = ("round_trip", "depth")
    assert cross_validated_coverage(normal, "object", feats, "normal") < 0.02
    assert cross_validated_coverage(heavy, "object", feats, "t") < 0.02 < \
        cross_validated_coverage(heavy, "object", feats, "normal")
    # a sharp peak with a one-sided tail (some rollouts lose the object): neither shape, the fit's own
    peaked = _rows(600, rng, 0.0)
    m = len(peaked["object"])
    peaked["object"] = peaked["object"] * np.exp(0.1 * rng.laplace(size=m)
                                                 + np.where(rng.random(m) < 0.1, rng.exponential(1.0, m), 0.0))
    gaps = {r: cross_validated_coverage(peaked, "object", feats, r) for r in ("normal", "t", "empirical")}
    assert min(gaps, key=gaps.get) == "empirical" and gaps["empirical"] < 0.02
    with pytest.raises(ValueError, match="folds"):
        cross_validated_coverage(peaked, "object", feats, "normal", folds=1)


def test_rows_carry_the_start_frames_novelty_with_a_bank():
    from wmsuite.world_models.novelty import NoveltyConfig, PatchNovelty

    episodes = [moving_square_episode(seed=s) for s in range(3)]
    bank = PatchNovelty.fit(episodes[0].obs["top"], NoveltyConfig(patch=4, stride=4, bank_size=16, candidates=32))
    rows = trust_rows(tiny_model(episodes, p_backward=0.5).eval(), episodes, PROBE, depths=(1, 3), novelty=bank)
    want = bank.score(np.stack([ep.obs["top"][0] for ep in episodes]))
    for d in (1, 3):
        np.testing.assert_allclose(rows["novelty"][rows["depth"] == d], want, rtol=1e-6)
    assert "novelty" not in trust_rows(tiny_model(episodes, p_backward=0.5).eval(), episodes, PROBE, depths=(1,))


def test_auroc_by_hand():
    from wmsuite.eval_harness.trust_study import auroc

    # pairs (outside, inside): 3 > 1, 3 > 2, 2 = 2 (half), 2 > 1 -> 3.5 of 4
    assert auroc([1.0, 2.0], [3.0, 2.0]) == 0.875
    assert auroc([1.0, 2.0], [3.0, 4.0]) == 1.0 and auroc([3.0, 4.0], [1.0, 2.0]) == 0.0
    rng = np.random.default_rng(0)
    assert abs(auroc(rng.normal(size=4000), rng.normal(size=4000)) - 0.5) < 0.02  # an uninformative score
    with pytest.raises(ValueError, match="non-empty"):
        auroc([], [1.0])


def test_chunk_idm_errors_are_the_idm_errors_of_the_rollout_by_hand():
    from wmsuite.eval_harness.trust_study import chunk_idm_errors

    episodes = [moving_square_episode(t=12, seed=0), moving_square_episode(t=5, seed=1)]  # 6 and 2 whole chunks of 2
    model = tiny_model(episodes).eval()
    errors = chunk_idm_errors(model, episodes, seed=3)
    assert errors.shape == (6 + 2,)
    with torch.no_grad():  # chunk by chunk from the first frames, one generator seeded with seed + 0
        state = WorldModelState.from_frames(model, [ep.obs["top"][:1] for ep in episodes])
        gen, want = torch.Generator().manual_seed(3), []
        for d in range(6):
            act = torch.zeros(2, 2, 2)
            for i, ep in enumerate(episodes):
                part = torch.as_tensor(ep.actions[2 * d : 2 * d + 2])
                act[i, : len(part)] = part
            newest = state.newest
            lat, state = rollout(model, state, act, generator=gen)
            err = (model.inverse_dynamics(newest, lat) - act).abs().mean(dim=(1, 2))
            want += [float(err[0])] + ([float(err[1])] if d < 2 else [])
    np.testing.assert_allclose(errors, want, rtol=1e-6)


def test_gate_settings_are_quantiles_of_the_in_distribution_scores():
    from wmsuite.eval_harness.trust_study import gate_settings

    scores = {"start": np.arange(101.0), "novelty": np.arange(101.0) / 100}  # quantile q is 100 q and q
    assert gate_settings(scores, 0.99) == pytest.approx({"start_limit": 99.0, "novelty_limit": 0.99})
    both = gate_settings(scores, 0.99, 0.9)
    assert both == pytest.approx({"start_limit": 99.0, "start_ramp": 90.0, "novelty_limit": 0.99, "novelty_ramp": 0.9})
    assert gate_settings(scores, None, 0.5) == pytest.approx({"start_ramp": 50.0, "novelty_ramp": 0.5})
    with pytest.raises(ValueError, match="ramp_quantile"):
        gate_settings(scores, 0.9, 0.95)
