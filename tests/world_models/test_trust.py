"""Trust signals: the round trip against an oracle world model whose dynamics invert exactly, and
the calibrator against synthetic data drawn from the model it assumes."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from tests.world_models.conftest import tiny_model
from wmsuite.world_models.calibrator import Calibrator
from wmsuite.world_models.model import FORWARD
from wmsuite.world_models.rollout import WorldModelState, rollout
from wmsuite.world_models.trust import check_backward_model, round_trip_chunks, round_trip_error

K, H, A, C, S = 3, 2, 2, 2, 3  # context, chunk, action size, latent channels, latent side
RATE = 0.8  # the oracle's contraction per forward frame


@dataclass
class OracleConfig:
    context: int = K
    chunk: int = H
    action_dim: int = A


class Oracle:
    """Exact, invertible dynamics on latents: frame j+1 = R frame j + P(a_j) (+ `bias` per forward
    frame), with R = `RATE` times the identity and P a fixed linear map from actions to latents;
    backward, frame m = (frame m+1 - P(a_m)) / R. R != 1 makes the order of the actions matter. The
    environment state is each latent channel's spatial mean (E = C)."""

    def __init__(self, bias: float = 0.0) -> None:
        self.cfg, self.bias, self.calls = OracleConfig(), bias, 0
        self.pattern = torch.randn(A, C, S, S, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def generate(self, context, actions, direction=FORWARD, steps=None, generator=None, instruction=None):
        self.calls += 1
        x, out = context[:, -1], []  # (B, C, s, s): the frame the chunk starts from
        for j in range(actions.shape[1]):
            push = torch.einsum("ba,acxy->bcxy", actions[:, j], self.pattern)  # (B, C, s, s)
            x = RATE * x + push + self.bias if direction == FORWARD else (x - push) / RATE
            out.append(x)
        return torch.stack(out, dim=1)  # (B, H, C, s, s)

    def predict_heads(self, latents):
        return {"environment_state": latents.mean(dim=(-1, -2))}


def _imagine(model, n, b=4, seed=0):
    """A rollout of n actions from a real f_0 repeated K times (as at a reset): f_0 (B, C, s, s), the
    K newest frames f_{n-K+1} .. f_n (B, K, C, s, s), the actions (B, n, A)."""
    gen = torch.Generator().manual_seed(seed)
    f0 = torch.randn(b, C, S, S, generator=gen, dtype=torch.float64)
    chunks = math.ceil(n / H)  # whole chunks forward; frames past f_n are not used
    actions = torch.rand(b, chunks * H, A, generator=gen, dtype=torch.float64) * 2 - 1
    state = WorldModelState(f0[:, None].expand(b, K, C, S, S).clone())
    latents, after = rollout(model, state, actions)  # (B, chunks*H, C, s, s)
    frames = torch.cat([state.context, latents], dim=1)  # index K-1+j holds f_j
    current = frames[:, n : n + K]
    if n % H == 0:
        assert torch.equal(current, after.context)  # the same context the rollout carries
    return f0, current, actions[:, :n]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6, 7, 8])
def test_an_exact_model_comes_back_to_its_start(n):
    model = Oracle()
    f0, current, actions = _imagine(model, n)
    model.calls = 0
    out = round_trip_error(model, f0, current, actions, start_env_state=f0.mean(dim=(-1, -2)))
    torch.testing.assert_close(out["estimate"], f0, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["latent"], torch.zeros(4, dtype=f0.dtype), atol=1e-5, rtol=0)
    torch.testing.assert_close(out["env_state"], torch.zeros(4, C, dtype=f0.dtype), atol=1e-5, rtol=0)
    assert model.calls == round_trip_chunks(n, K, H)  # the cost helper counts the generate calls


class NoisyOracle(Oracle):
    """The oracle whose backward steps add N(0, noise^2) per entry from the generator: the backward
    pass's own sampling noise, which R samples average out of the mean estimate."""

    def __init__(self, noise: float) -> None:
        super().__init__()
        self.noise = noise

    def generate(self, context, actions, direction=FORWARD, steps=None, generator=None, instruction=None):
        out = super().generate(context, actions, direction, steps, generator)
        if direction == FORWARD:
            return out
        return out + self.noise * torch.randn(out.shape, generator=generator, dtype=out.dtype)


def test_more_backward_samples_average_the_backward_noise_out():
    model = NoisyOracle(noise=0.1)
    f0, current, actions = _imagine(model, 6, b=64)
    err = {r: round_trip_error(model, f0, current, actions, generator=torch.Generator().manual_seed(0),
                               samples=r)["latent"].mean().item() for r in (1, 16)}
    # the mean of R estimates has 1/R of one estimate's noise variance; the exact model adds no drift
    assert err[16] < err[1] / 8
    with pytest.raises(ValueError, match="samples"):
        round_trip_error(model, f0, current, actions, samples=0)


class WrongWayBack(Oracle):
    """The oracle as a simulator that cannot step backward: each of its backward frames drifts by
    `drift`. Counts its heads' calls, which a separate backward model must not replace."""

    def __init__(self, drift: float) -> None:
        super().__init__()
        self.drift, self.head_calls = drift, 0

    def generate(self, context, actions, direction=FORWARD, steps=None, generator=None, instruction=None):
        out = super().generate(context, actions, direction, steps, generator)
        return out if direction == FORWARD else out + self.drift

    def predict_heads(self, latents):
        self.head_calls += 1
        return super().predict_heads(latents)


class Headless(Oracle):
    def predict_heads(self, latents):
        raise AssertionError("the backward model's heads read the landing point")


@pytest.mark.parametrize("n", [4, 7])
def test_a_separate_backward_model_plays_the_rollout_back_and_the_simulator_reads_it(n):
    sim, back = WrongWayBack(drift=0.3), Headless()
    f0, current, actions = _imagine(Oracle(), n)  # an exact forward rollout
    env = f0.mean(dim=(-1, -2))
    own = round_trip_error(sim, f0, current, actions, start_env_state=env)
    assert (own["latent"] > 0.01).all()  # the simulator's own way back drifts
    sim.calls = 0
    out = round_trip_error(sim, f0, current, actions, start_env_state=env, backward=back)
    torch.testing.assert_close(out["latent"], torch.zeros(4, dtype=f0.dtype), atol=1e-5, rtol=0)
    torch.testing.assert_close(out["env_state"], torch.zeros(4, C, dtype=f0.dtype), atol=1e-5, rtol=0)
    assert sim.calls == 0 and back.calls == round_trip_chunks(n, K, H) and sim.head_calls == 2


def test_a_backward_copy_must_step_backward_and_share_the_simulators_latents(episodes):
    sim = tiny_model(episodes)  # forward only
    with pytest.raises(ValueError, match="simulator was trained forward only"):
        check_backward_model(sim)
    check_backward_model(tiny_model(episodes, p_backward=0.5))  # a model that plays itself back
    copy = tiny_model(episodes, p_backward=1.0)
    check_backward_model(sim, copy)  # same codec, same shapes
    with pytest.raises(ValueError, match="round-trip model was trained forward only"):
        check_backward_model(sim, tiny_model(episodes))
    with pytest.raises(ValueError, match="chunk is 3, the simulator's 2"):
        check_backward_model(sim, tiny_model(episodes, p_backward=1.0, chunk=3))
    with torch.no_grad():
        copy.codec.latent_std.mul_(1.5)
    with pytest.raises(ValueError, match="codec differs"):
        check_backward_model(sim, copy)


def test_round_trip_cost_by_hand():
    # K=3, H=2: f_0 leaves the context at N=3; N-K+1 frames to regenerate, in chunks of 2
    assert [round_trip_chunks(n, 3, 2) for n in range(8)] == [0, 0, 0, 1, 1, 2, 2, 3]
    assert round_trip_chunks(10, 1, 4) == 3  # 10 frames back with a one-frame context
    with pytest.raises(ValueError, match="depth"):
        round_trip_chunks(-1, 3, 2)


def test_a_forward_bias_shows_in_the_round_trip_and_grows_with_it_and_with_depth():
    depths, biases = [3, 4, 5, 6, 8], [0.01, 0.02, 0.05]
    err = np.zeros((len(biases), len(depths)))
    for i, bias in enumerate(biases):
        for j, n in enumerate(depths):
            model = Oracle(bias)
            f0, current, actions = _imagine(model, n, seed=j)
            out = round_trip_error(model, f0, current, actions, start_env_state=f0.mean(dim=(-1, -2)))
            # by hand: f_{N-K+1} carries bias * (1 + R + .. + R^(L-1)), L = N-K+1 (f_{N-K+2} .. f_N are
            # never revisited); the L exact backward steps undo the actions and divide that by R^L
            drift = bias * sum(RATE ** -i for i in range(1, n - K + 2))
            torch.testing.assert_close(out["latent"], torch.full((4,), drift**2, dtype=f0.dtype))
            torch.testing.assert_close(out["env_state"], torch.full((4, C), drift, dtype=f0.dtype))
            err[i, j] = out["latent"].mean().item()
    assert np.all(err > 0)
    assert np.all(np.diff(err, axis=0) > 0) and np.all(np.diff(err, axis=1) > 0)


def test_a_real_model_gives_finite_reproducible_errors(episodes):
    model = tiny_model(episodes, context=2, chunk=2).eval()
    k, c, s, e = model.cfg.context, model.codec.latent_channels, model.codec.latent_size, model.cfg.env_state_dim
    gen = torch.Generator().manual_seed(0)
    start, current = torch.randn(2, c, s, s, generator=gen), torch.randn(2, k, c, s, s, generator=gen)
    actions, env = torch.rand(2, 5, 2, generator=gen), torch.randn(2, e, generator=gen)
    one = round_trip_error(model, start, current, actions, env, generator=torch.Generator().manual_seed(1))
    two = round_trip_error(model, start, current, actions, env, generator=torch.Generator().manual_seed(1))
    assert one["latent"].shape == (2,) and one["env_state"].shape == (2, e)
    assert torch.isfinite(one["latent"]).all() and torch.isfinite(one["env_state"]).all()
    assert torch.equal(one["latent"], two["latent"]) and torch.equal(one["env_state"], two["env_state"])


def test_shapes_that_do_not_fit_are_named():
    model = Oracle()
    f0, current, actions = _imagine(model, 4)
    with pytest.raises(ValueError, match=r"current must be \(B, K=3.*\(4, 2, 2, 3, 3\)"):
        round_trip_error(model, f0, current[:, 1:], actions)
    with pytest.raises(ValueError, match=r"start must be .*\(4, 2, 3, 3\).*got \(3, 2, 3, 3\)"):
        round_trip_error(model, f0[:3], current, actions)
    with pytest.raises(ValueError, match=r"actions must be \(B=4, N, A=2\).*got \(4, 4, 3\)"):
        round_trip_error(model, f0, current, torch.zeros(4, 4, 3))
    with pytest.raises(ValueError, match=r"actions must be .*got \(4, 4\)"):
        round_trip_error(model, f0, current, actions[..., 0])
    with pytest.raises(ValueError, match=r"start_env_state must be \(B=4, E\); got \(2, 2\)"):
        round_trip_error(model, f0, current, actions, start_env_state=torch.zeros(2, 2))


# ---------------------------------------------------------------------------------------------- calibrator
TRUTH = {"intercept": -1.0, "round_trip": 0.8, "idm": 0.3, "depth": 0.05}
NOISE = 0.4  # the standard deviation of log(true error) around the truth


def _draw(m, seed, idm=True):
    """Rows from the calibrator's own model: log(err) = a + b log C [+ c log idm] + d depth + N(0, s^2)."""
    rng = np.random.default_rng(seed)
    feats = {"round_trip": np.exp(rng.normal(-4.0, 1.0, m)), "depth": rng.integers(1, 20, m).astype(float)}
    log_err = TRUTH["intercept"] + TRUTH["round_trip"] * np.log(feats["round_trip"]) + TRUTH["depth"] * feats["depth"]
    if idm:
        feats["idm"] = np.exp(rng.normal(-2.0, 0.5, m))
        log_err += TRUTH["idm"] * np.log(feats["idm"])
    return feats, np.exp(log_err + rng.normal(0.0, NOISE, m))


@pytest.mark.parametrize("idm", [True, False])
def test_the_calibrator_recovers_its_model_and_its_intervals_cover(idm):
    feats, err = _draw(4000, seed=0, idm=idm)
    cal = Calibrator.fit(feats, err)
    assert cal.features == (("round_trip", "idm", "depth") if idm else ("round_trip", "depth"))
    want = [TRUTH["intercept"], TRUTH["round_trip"], *([TRUTH["idm"]] if idm else []), TRUTH["depth"]]
    np.testing.assert_allclose(cal.weights, want, atol=0.08)
    assert abs(cal.sigma - NOISE) < 0.02
    held, held_err = _draw(4000, seed=1, idm=idm)  # a fresh draw
    for level in (0.68, 0.95):
        assert abs(cal.coverage(held, held_err, level) - level) < 0.03


def test_student_t_residuals_cover_heavy_tails_where_a_normal_fit_over_covers_the_core():
    rng = np.random.default_rng(3)

    def draw(m):
        depth = rng.integers(1, 17, m).astype(float)
        return {"depth": depth}, np.exp(-4.0 + 0.1 * depth + 0.3 * rng.standard_t(3, m))

    feats, err = draw(6000)
    held, held_err = draw(6000)
    normal, heavy = Calibrator.fit(feats, err), Calibrator.fit(feats, err, residuals="t")
    assert heavy.dof == pytest.approx(3, abs=0.5) and heavy.sigma == pytest.approx(0.3, abs=0.02)
    np.testing.assert_allclose(heavy.weights, [-4.0, 0.1], atol=0.03)
    assert normal.coverage(held, held_err, 0.68) > 0.72  # sigma inflated by the tails
    for level in (0.68, 0.95):
        assert abs(heavy.coverage(held, held_err, level) - level) < 0.02
    # trust is the t model's probability, by hand from scipy's t distribution
    from scipy.stats import t as student_t

    mu, _ = heavy.predict({"depth": [4.0]})
    want = student_t.cdf((math.log(0.03) - mu[0]) / heavy.sigma, heavy.dof)
    np.testing.assert_allclose(heavy.trust({"depth": [4.0]}, tau=0.03), [want])
    assert Calibrator.from_json(json.loads(json.dumps(heavy.to_json()))) == heavy
    with pytest.raises(ValueError, match="residuals"):
        Calibrator.fit(feats, err, residuals="laplace")


def test_empirical_residuals_keep_a_peaked_shape_that_normal_and_t_fits_miss():
    rng = np.random.default_rng(4)

    def draw(m):  # residuals peaked at 0 with long, one-sided tails (a few rollouts lose the object)
        depth = rng.integers(1, 17, m).astype(float)
        r = 0.1 * rng.laplace(size=m) + np.where(rng.random(m) < 0.1, rng.exponential(1.0, m), 0.0)
        return {"depth": depth}, np.exp(-4.0 + 0.1 * depth + r)

    feats, err = draw(6000)
    held, held_err = draw(6000)
    fits = {r: Calibrator.fit(feats, err, residuals=r) for r in ("normal", "t", "empirical")}
    emp = fits["empirical"]
    assert len(emp.residual_quantiles) == 101 and emp.dof is None
    for level in (0.68, 0.95):
        assert abs(emp.coverage(held, held_err, level) - level) < 0.02
    # the parametric shapes miss by more at one level or the other
    assert max(abs(fits[r].coverage(held, held_err, lv) - lv) for r in ("normal", "t") for lv in (0.68, 0.95)) > 0.04
    # trust is the share of the fit's residuals at or below log(tau) - mu
    mu, _ = emp.predict({"depth": [4.0]})
    resid = np.log(err) - Calibrator.fit(feats, err).predict(feats)[0]
    want = np.mean(resid <= math.log(0.03) - mu[0])
    np.testing.assert_allclose(emp.trust({"depth": [4.0]}, tau=0.03), [want], atol=0.01)
    assert Calibrator.from_json(json.loads(json.dumps(emp.to_json()))) == emp


def test_empirical_residuals_by_hand():
    # residual quantiles -1, 0, 2 at probabilities 0, 1/2, 1, read by linear interpolation
    cal = Calibrator(("depth",), (0.0, 0.0), sigma=1.0, residual_quantiles=(-1.0, 0.0, 2.0))
    low, high = cal.interval({"depth": [3.0]}, level=0.5)  # the 0.25 and 0.75 quantiles: -0.5, 1.0
    np.testing.assert_allclose([low[0], high[0]], [math.exp(-0.5), math.exp(1.0)])
    trust = cal.trust({"depth": [0.0] * 4}, tau=math.exp(1.0))  # P(r <= 1) = 0.5 + 0.5 * (1 / 2)
    np.testing.assert_allclose(trust, [0.75] * 4)
    np.testing.assert_allclose(cal.trust({"depth": [0.0, 0.0]}, tau=math.exp(-2.0)), [0.0, 0.0])  # below the range
    np.testing.assert_allclose(cal.trust({"depth": [0.0]}, tau=math.exp(5.0)), [1.0])  # above it
    with pytest.raises(ValueError, match="non-decreasing"):
        Calibrator(("depth",), (0.0, 0.0), sigma=1.0, residual_quantiles=(1.0, 0.0))
    with pytest.raises(ValueError, match="not both"):
        Calibrator(("depth",), (0.0, 0.0), sigma=1.0, dof=3.0, residual_quantiles=(-1.0, 1.0))


def test_fit_by_hand():
    # log error [0, 1, 1, 2] on depth [0, 1, 2, 3]: slope Sxy/Sxx = 3/5, intercept 1 - 0.6 * 1.5,
    # residuals (-0.1, 0.3, -0.3, 0.1), sigma = sqrt(0.2 / (4 rows - 2 weights))
    cal = Calibrator.fit({"depth": [0, 1, 2, 3]}, np.exp([0.0, 1.0, 1.0, 2.0]))
    np.testing.assert_allclose(cal.weights, [0.1, 0.6], atol=1e-12)
    assert cal.sigma == pytest.approx(math.sqrt(0.1), abs=1e-12)


def test_interval_by_hand():
    cal = Calibrator(("round_trip", "depth"), (0.5, 2.0, -0.1), sigma=0.2, eps=1e-6)
    mu, sigma = cal.predict({"round_trip": [math.e - 1e-6, 1.0], "depth": [0.0, 10.0]})
    np.testing.assert_allclose(mu, [0.5 + 2.0, 0.5 + 2.0 * math.log(1.0 + 1e-6) - 1.0])
    np.testing.assert_allclose(sigma, [0.2, 0.2])
    low, high = cal.interval({"round_trip": [math.e - 1e-6], "depth": [0.0]}, level=0.95)
    z95 = 1.959963984540054  # the standard normal's 97.5% quantile, from tables
    np.testing.assert_allclose([low[0], high[0]], [math.exp(2.5 - z95 * 0.2), math.exp(2.5 + z95 * 0.2)])
    # a row exactly at the edge is inside; one just beyond is not
    feats = {"round_trip": [math.e - 1e-6] * 3, "depth": [0.0] * 3}
    assert cal.coverage(feats, [high[0], high[0] * 1.001, math.exp(2.5)], level=0.95) == pytest.approx(2 / 3)


def test_json_round_trip_predicts_identically():
    feats, err = _draw(200, seed=2)
    cal = Calibrator.fit(feats, err)
    back = Calibrator.from_json(json.loads(json.dumps(cal.to_json())))
    assert back == cal
    for a, b in zip(cal.interval(feats, 0.9), back.interval(feats, 0.9)):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="log_normal_calibrator"):
        Calibrator.from_json({**cal.to_json(), "version": 2})


def test_bad_calibration_inputs_are_refused():
    feats, err = _draw(50, seed=3)
    with pytest.raises(ValueError, match="non-finite"):
        Calibrator.fit({**feats, "depth": np.r_[np.nan, feats["depth"][1:]]}, err)
    with pytest.raises(ValueError, match="must be >= 0"):
        Calibrator.fit({**feats, "round_trip": -feats["round_trip"]}, err)
    with pytest.raises(ValueError, match="finite and > 0"):
        Calibrator.fit(feats, np.r_[0.0, err[1:]])
    with pytest.raises(ValueError, match="finite and > 0"):
        Calibrator.fit(feats, np.r_[np.inf, err[1:]])
    with pytest.raises(ValueError, match="at least 5 rows, got 4"):
        Calibrator.fit({k: v[:4] for k, v in feats.items()}, err[:4])
    with pytest.raises(ValueError, match="different lengths"):
        Calibrator.fit({**feats, "idm": feats["idm"][:-1]}, err)
    with pytest.raises(ValueError, match=r"true_error must be \(M=50,\)"):
        Calibrator.fit(feats, err[:-1])
    with pytest.raises(ValueError, match="unknown features"):
        Calibrator.fit({**feats, "roundtrip": feats["round_trip"]}, err)
    with pytest.raises(ValueError, match="collinear"):
        Calibrator.fit({**feats, "depth": np.full(50, 7.0)}, err)
    cal = Calibrator.fit(feats, err)
    with pytest.raises(ValueError, match=r"missing \['idm'\]"):
        cal.predict({"round_trip": feats["round_trip"], "depth": feats["depth"]})
    with pytest.raises(ValueError, match="level"):
        cal.interval(feats, 1.0)
    with pytest.raises(ValueError, match="sigma"):
        Calibrator(("depth",), (0.0, 1.0), sigma=-1.0)


@pytest.mark.parametrize("copy", [False, True])
def test_the_learned_simulator_reports_one_round_trip_per_episode_and_imagines_the_same(episodes, copy):
    """With round_trip=True every imagined episode ends with one `trust/round_trip` value, the one
    `round_trip_error` gives from the env's own start latent, context and actions (played back by
    the simulator itself, or by a backward copy with weights of its own), and the imagined episodes
    are those of the env without it (the backward passes draw their own noise)."""
    sim = dict(p_backward=0.0 if copy else 0.5, camera="top")
    back = tiny_model(episodes, seed=1, p_backward=1.0, camera="top") if copy else None
    from wmsuite.rollout import RolloutConfig
    from wmsuite.rollout import rollout as run_policy
    from wmsuite.world_models.contexts import EpisodeContext
    from wmsuite.world_models.env import WorldModelEnv

    class Push:
        def reset(self):
            pass

        def predict_action_chunk(self, obs):
            return np.full((len(obs["agent_pos"]), 2, 2), 0.5, np.float32)

    def run(round_trip):
        env = WorldModelEnv(tiny_model(episodes, **sim), EpisodeContext(episodes), num_envs=2, horizon=3,
                            seed=0, round_trip=round_trip, round_trip_model=back if round_trip else None)
        return list(run_policy(Push(), env, RolloutConfig(episodes=4, seed=0, progress=False, record_frames=True)))

    with_rt, without = run(True), run(False)
    for a, b in zip(with_rt, without):
        np.testing.assert_array_equal(a.obs["top"], b.obs["top"])
        values = a.meta["trust"]["trust/round_trip"]
        assert len(values) == 1 and math.isfinite(values[0]) and values[0] >= 0
        assert "trust/round_trip" not in b.meta["trust"]
        assert len(a.meta["trust"]["trust/idm_error"]) == a.length // 2  # the per-step signals are all there

    # the value is round_trip_error's on the env's state at the episode's end
    env = WorldModelEnv(tiny_model(episodes, **sim), EpisodeContext(episodes), num_envs=2, horizon=2,
                        seed=0, round_trip=True, round_trip_model=back)
    env.reset(seed=[0, 1])
    start = env.state.context[:, -1].clone()
    chunks = [np.full((2, 2, 2), v, np.float32) for v in (0.5, -0.25)]
    env.step(chunks[0])
    _, _, term, trunc, info = env.step(chunks[1])
    assert (term | trunc).all() and info["_trust/round_trip"].all()
    gen = torch.Generator().manual_seed(env._gen.initial_seed())
    acts = torch.as_tensor(np.concatenate(chunks, 1))
    want = round_trip_error(env.model, start, env.state.context, acts, generator=gen, backward=back)["latent"]
    np.testing.assert_allclose(info["trust/round_trip"], want.numpy(), rtol=1e-5, atol=1e-7)
    if copy:  # the copy, not the simulator, played it back
        gen = torch.Generator().manual_seed(env._gen.initial_seed())
        own = round_trip_error(env.model, start, env.state.context, acts, generator=gen)["latent"]
        assert not np.allclose(info["trust/round_trip"], own.numpy(), rtol=1e-3)
    with pytest.raises(ValueError, match="add round_trip=True"):
        WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=2, horizon=2,
                      round_trip_model=tiny_model(episodes, p_backward=1.0, camera="top"))
    with pytest.raises(ValueError, match="forward only"):
        WorldModelEnv(tiny_model(episodes, camera="top"), EpisodeContext(episodes), num_envs=2, horizon=2,
                      round_trip=True)


def test_trust_scores_are_calibrated_probabilities_of_a_tolerable_error():
    feats, err = _draw(4000, seed=4)
    tau = float(np.median(err))
    cal = Calibrator.fit(feats, err, tau=tau)
    held, held_err = _draw(4000, seed=5)
    trust = cal.trust(held)
    assert trust.shape == (4000,) and np.all((trust >= 0) & (trust <= 1))
    within = held_err <= tau
    assert abs(trust.mean() - within.mean()) < 0.03  # calibrated on the whole
    for lo, hi in ((0.0, 0.2), (0.4, 0.6), (0.8, 1.0)):  # and within bins of the score
        sel = (trust >= lo) & (trust < hi)
        assert sel.sum() > 100 and abs(within[sel].mean() - trust[sel].mean()) < 0.05
    assert np.array_equal(Calibrator.from_json(json.loads(json.dumps(cal.to_json()))).trust(held), trust)


def test_the_start_gate_zeroes_the_trust_of_scenes_read_wrong_at_their_start():
    cal = Calibrator(("depth",), (math.log(0.1), 0.0), sigma=0.5, tau=0.1, start_limit=0.02)
    trust = cal.trust({"depth": [1.0, 1.0, 1.0], "start": [0.01, 0.02, 0.03]})
    np.testing.assert_allclose(trust, [0.5, 0.5, 0.0])  # at the limit is inside; beyond it is not trusted
    with pytest.raises(ValueError, match="start"):
        cal.trust({"depth": [1.0]})
    assert Calibrator.from_json(json.loads(json.dumps(cal.to_json()))) == cal
    with pytest.raises(ValueError, match="start_limit"):
        Calibrator(("depth",), (0.0, 0.0), sigma=0.5, start_limit=0.0)
    both = Calibrator(("depth",), (math.log(0.1), 0.0), sigma=0.5, tau=0.1, start_limit=0.02, novelty_limit=0.3)
    trust = both.trust({"depth": [1.0] * 4, "start": [0.01, 0.03, 0.01, 0.03], "novelty": [0.1, 0.1, 0.4, 0.4]})
    np.testing.assert_allclose(trust, [0.5, 0.0, 0.0, 0.0])  # either gate alone zeroes a start
    with pytest.raises(ValueError, match="novelty"):
        both.trust({"depth": [1.0], "start": [0.01]})
    assert Calibrator.from_json(json.loads(json.dumps(both.to_json()))) == both
    assert "novelty_limit" not in cal.to_json()  # a file without the gate reads as before
    fitted = Calibrator(("depth",), (0.0, 0.0), sigma=0.5, simulator="ab" * 32)
    assert Calibrator.from_json(json.loads(json.dumps(fitted.to_json()))).simulator == "ab" * 32
    assert "simulator" not in cal.to_json()


def test_a_ramp_closes_a_gate_linearly_from_its_start_to_the_limit():
    cal = Calibrator(("depth",), (math.log(0.1), 0.0), sigma=0.5, tau=0.1, novelty_limit=0.3, novelty_ramp=0.2)
    trust = cal.trust({"depth": [1.0] * 6, "novelty": [0.1, 0.2, 0.25, 0.3, 0.4, math.nan]})
    # 0.5 from the fit, scaled by (0.3 - x) / (0.3 - 0.2) between ramp and limit; a missing reading stays open
    np.testing.assert_allclose(trust, [0.5, 0.5, 0.25, 0.0, 0.0, 0.5])
    assert Calibrator.from_json(json.loads(json.dumps(cal.to_json()))) == cal
    hard = Calibrator(("depth",), (math.log(0.1), 0.0), sigma=0.5, tau=0.1, novelty_limit=0.3)
    np.testing.assert_allclose(hard.trust({"depth": [1.0] * 2, "novelty": [0.25, math.nan]}), [0.5, 0.5])
    with pytest.raises(ValueError, match="novelty_ramp"):
        Calibrator(("depth",), (0.0, 0.0), sigma=0.5, novelty_limit=0.3, novelty_ramp=0.3)
    with pytest.raises(ValueError, match="start_ramp"):
        Calibrator(("depth",), (0.0, 0.0), sigma=0.5, start_ramp=0.01)  # a ramp without its limit


def test_trust_by_hand_and_without_a_tolerance():
    cal = Calibrator(("depth",), (math.log(0.1), 0.0), sigma=0.5)
    # log(0.1) is the predicted median: a tolerance at the median gives 1/2, one sigma above it Phi(1)
    np.testing.assert_allclose(cal.trust({"depth": [3.0]}, tau=0.1), [0.5])
    np.testing.assert_allclose(cal.trust({"depth": [3.0]}, tau=0.1 * math.exp(0.5)), [0.8413447460685429])
    with pytest.raises(ValueError, match="tolerated error"):
        cal.trust({"depth": [3.0]})
    with pytest.raises(ValueError, match="tau"):
        Calibrator(("depth",), (0.0, 0.0), sigma=0.5, tau=-1.0)


def test_the_learned_simulator_reports_the_start_reading_error_when_an_episode_ends(episodes):
    """With start_reading, the end step reports |heads' reading of the real start frame - real start
    state| over the slice, the same number computed by hand from the episode's first frame."""
    from wmsuite.world_models.contexts import EpisodeContext
    from wmsuite.world_models.env import WorldModelEnv

    model = tiny_model(episodes, camera="top")
    env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=2, horizon=2, seed=0, start_reading=slice(0, 2))
    env.reset(seed=[0, 1])
    _, _, term, trunc, info = env.step(np.zeros((2, 2, 2), np.float32))
    assert not (term | trunc).any() and not info["_trust/start_error"].any()  # masked until the end
    _, _, term, trunc, info = env.step(np.zeros((2, 2, 2), np.float32))
    assert (term | trunc).all() and info["_trust/start_error"].all()
    with torch.no_grad():
        first = WorldModelState.from_frames(model, [episodes[s % len(episodes)].obs["top"][:1] for s in (0, 1)]).newest
        read = model.predict_heads(first)["environment_state"][:, :2].numpy()
    real = np.stack([episodes[s % len(episodes)].env_state[0, :2] for s in (0, 1)])
    np.testing.assert_allclose(info["trust/start_error"], np.linalg.norm(read - real, axis=-1), rtol=1e-5)
    with pytest.raises(ValueError, match="start_reading"):
        WorldModelEnv(model, EpisodeContext(episodes), num_envs=1, start_reading=slice(50, 60))


def test_the_learned_simulator_reports_the_start_frames_novelty_when_an_episode_ends(episodes):
    """With a novelty bank, the end step reports the bank's score of each sub-env's real start frame."""
    from wmsuite.world_models.contexts import EpisodeContext
    from wmsuite.world_models.env import WorldModelEnv
    from wmsuite.world_models.novelty import NoveltyConfig, PatchNovelty

    model = tiny_model(episodes, camera="top")
    frames = episodes[0].obs["top"]
    bank = PatchNovelty.fit(frames, NoveltyConfig(patch=4, stride=4, bank_size=32, candidates=64))
    env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=2, horizon=1, seed=0, novelty=bank)
    env.reset(seed=[0, 1])
    _, _, term, trunc, info = env.step(np.zeros((2, 2, 2), np.float32))
    assert (term | trunc).all() and info["_trust/novelty"].all()
    starts = np.stack([episodes[s % len(episodes)].obs["top"][0] for s in (0, 1)])
    np.testing.assert_allclose(info["trust/novelty"], bank.score(starts), rtol=1e-6)
