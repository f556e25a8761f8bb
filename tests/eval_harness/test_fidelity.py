"""The teacher-forced contact check scores an oracle world model and a frozen one as they must be scored.

Real PushCube episodes from the expert (skill 1: the cube is pushed in most chunks); the oracle returns
the true next frames of each window, the frozen model repeats the newest context frame (a world model
that never learned contact). Detector error on 64 px frames is a few mm, so the bounds are 1 cm.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from wmsuite.envs import get_probe
from wmsuite.eval_harness.fidelity import contact_fidelity
from wmsuite.world_models.codec import make_codec
from wmsuite.world_models.config import CodecConfig


class _TableModel:
    """`generate` answers from a table: the context's bytes -> the frames to return (or repeat the newest)."""

    def __init__(self, episodes, oracle: bool, k: int = 4, h: int = 4) -> None:
        self.cfg = SimpleNamespace(camera="top", context=k, chunk=h)
        self.codec = make_codec(CodecConfig(kind="pixel", downsample=4))
        frames = torch.cat([torch.from_numpy(ep.obs["top"]).permute(0, 3, 1, 2) for ep in episodes])
        self.codec.fit_latent_stats(frames)
        self.oracle, self.table = oracle, {}
        for ep in episodes:
            z = self.codec.encode(torch.from_numpy(ep.obs["top"]).permute(0, 3, 1, 2))  # (T+1, C, s, s)
            for t in range(0, ep.length - h + 1, h):
                ctx = z[torch.arange(t - k + 1, t + 1).clamp_min(0)]
                self.table[ctx.numpy().tobytes()] = z[t + 1 : t + 1 + h]

    def generate(self, context, actions, direction=1, steps=None, generator=None, instruction=None):  # (B, K, C, s, s) -> (B, H, C, s, s)
        if self.oracle:
            return torch.stack([self.table[c.numpy().tobytes()] for c in context])
        return context[:, -1:].expand(-1, self.cfg.chunk, -1, -1, -1)


PROBE = get_probe("wmsuite/PushCube-v0")


def test_contact_check_separates_an_oracle_from_a_model_that_never_moves_the_cube(pushed_episodes):
    oracle = contact_fidelity(_TableModel(pushed_episodes, oracle=True), pushed_episodes, PROBE)
    frozen = contact_fidelity(_TableModel(pushed_episodes, oracle=False), pushed_episodes, PROBE)
    assert oracle["moving_windows"] >= 5 and oracle["moving_windows"] == frozen["moving_windows"]
    assert oracle["real_displacement"] > 0.02
    # the oracle's cube moves as far as the real one and ends where it does (detector error only)
    assert abs(oracle["generated_displacement"] - oracle["real_displacement"]) < 0.01
    assert oracle["moving_end_error"] < 0.01
    # the frozen model's cube stays put, so its end error is the whole real displacement
    assert frozen["generated_displacement"] < 0.01
    assert frozen["moving_end_error"] == pytest.approx(frozen["real_displacement"], abs=0.01)
    assert np.isfinite(frozen["still_end_error"]) and frozen["still_end_error"] < 0.01


def test_contact_ratios_follow_the_generated_cube(pushed_episodes):
    """Head-on windows: the oracle's cube-to-pusher ratio is the real one, the frozen model's is ~0; the
    same for the progress along the real path (1 for the oracle)."""
    oracle = contact_fidelity(_TableModel(pushed_episodes, oracle=True), pushed_episodes, PROBE)
    frozen = contact_fidelity(_TableModel(pushed_episodes, oracle=False), pushed_episodes, PROBE)
    assert oracle["headon_windows"] >= 3 and oracle["headon_windows"] == frozen["headon_windows"]
    assert oracle["headon_ratio_real"] > 0.5  # a square push carries the cube with the pusher
    assert oracle["headon_ratio_generated"] == pytest.approx(oracle["headon_ratio_real"], abs=0.15)
    assert frozen["headon_ratio_generated"] < 0.2
    # Progress along the real path: the oracle's cube goes as far as the real one, the frozen one nowhere.
    assert oracle["along_ratio"] == pytest.approx(1.0, abs=0.15)
    assert oracle["headon_along_ratio"] == pytest.approx(1.0, abs=0.15)
    assert abs(frozen["along_ratio"]) < 0.2 and abs(frozen["headon_along_ratio"]) < 0.2
    n = oracle["headon_windows"] + oracle["glancing_windows"]
    assert n <= oracle["moving_windows"]


def test_contact_thresholds_come_from_the_probe(pushed_episodes):
    """A probe with a larger moving threshold and a wider head-on band counts windows by its own numbers."""
    real_moves = np.array([np.linalg.norm(ep.env_state[t + 4, :2] - ep.env_state[t, :2])
                           for ep in pushed_episodes for t in range(0, ep.length - 3, 4)])  # the windows, by hand
    cut = float(np.median(real_moves[real_moves > 0.01]))  # half of the default's moving windows
    model = _TableModel(pushed_episodes, oracle=True)
    base = contact_fidelity(model, pushed_episodes, PROBE)
    high = contact_fidelity(model, pushed_episodes, dataclasses.replace(PROBE, moving_threshold=cut))
    assert base["moving_windows"] == (real_moves > 0.01).sum()
    assert high["moving_windows"] == (real_moves > cut).sum() < base["moving_windows"]
    wide = contact_fidelity(model, pushed_episodes, dataclasses.replace(PROBE, head_on_offset=0.03))
    assert wide["headon_windows"] > base["headon_windows"]


def test_a_probe_without_a_detector_for_the_camera_is_refused(pushed_episodes):
    model = _TableModel(pushed_episodes, oracle=False)
    for probe in (dataclasses.replace(PROBE, object_xy_from_frames=None), dataclasses.replace(PROBE, camera="front")):
        with pytest.raises(ValueError, match="no detector"):
            contact_fidelity(model, pushed_episodes, probe)


class _ChunkIntegrator:
    """A world model whose latent integrates the actions, but not causally within a chunk: frame m of a
    chunk is the newest context frame plus (m+1)/H of the chunk's summed actions. With an episode's
    constant action c, frame t is then c * t exactly when every chunk it came from held real actions."""

    def __init__(self, k: int = 2, h: int = 4) -> None:
        self.cfg = SimpleNamespace(camera="top", context=k, chunk=h, action_dim=1, memory_frames=0)
        self.codec = SimpleNamespace(encode=lambda frames: torch.zeros(len(frames), 1, 1, 1))

    def generate(self, context, actions, direction=1, steps=None, generator=None, instruction=None):  # (B, K, 1, 1, 1) -> (B, H, 1, 1, 1)
        frac = torch.arange(1, self.cfg.chunk + 1, dtype=torch.float32) / self.cfg.chunk  # (H,)
        return context[:, -1:] + (frac[None, :] * actions.sum(dim=(1, 2))[:, None])[..., None, None, None]

    def inverse_dynamics(self, previous, latents):  # (B, 1, 1, 1), (B, H, 1, 1, 1) -> (B, H, 1)
        frames = torch.cat([previous[:, None], latents], dim=1)
        return (frames[:, 1:] - frames[:, :-1]).flatten(2)

    def predict_heads(self, latents):
        lead = latents.shape[:-3]
        return {"success_logit": latents.reshape(*lead), "environment_state": torch.zeros(*lead, 6)}


def test_open_loop_frames_at_an_episode_end_come_from_its_own_actions_only():
    """Episodes ending inside a chunk: the padding after the end must not reach the scored frames (with
    zero padding, the 14-step episode's last frame would be 12c + c, not 14c)."""
    from wmsuite.eval_harness.fidelity import rollout_open_loop

    lengths, rates = [5, 8, 10, 14, 4], [1.0, 2.0, -1.0, 0.5, 3.0]
    episodes = [SimpleNamespace(length=t, actions=np.full((t, 1), c, np.float32),
                                obs={"top": np.zeros((t + 1, 8, 8, 3), np.uint8)}) for t, c in zip(lengths, rates)]
    out = rollout_open_loop(_ChunkIntegrator(), episodes)
    assert out["latents"].shape == (5, 17, 1, 1, 1) and out["idm_error"].shape == (5, 16)
    for i, (t, c) in enumerate(zip(lengths, rates)):
        assert out["latents"][i, t].item() == pytest.approx(c * t)  # the scored last frame
        # every step up to the end recovers its true action: no padding leaked into those frames
        np.testing.assert_allclose(out["idm_error"][i, :t], 0.0, atol=1e-6)
        assert out["success_prob"][i, t] == pytest.approx(torch.sigmoid(torch.tensor(c * t)).item(), abs=1e-6)


class _BackwardTable:
    """A model that plays episodes backward exactly: `generate` in direction BACKWARD answers each
    context of the time-reversed episodes with the frames that really came before it (any other
    direction is an error); `frozen` repeats the newest frame instead."""

    def __init__(self, episodes, frozen: bool = False, k: int = 4, h: int = 4) -> None:
        from wmsuite.world_models.data import time_reversed

        self.cfg = SimpleNamespace(camera="top", context=k, chunk=h, action_dim=PROBE.action_dim,
                                   env_state_dim=PROBE.env_state_dim, p_backward=1.0, sampling_steps=1, memory_frames=0)
        self.codec = make_codec(CodecConfig(kind="pixel", downsample=4))
        self.codec.fit_latent_stats(torch.cat([torch.from_numpy(ep.obs["top"]).permute(0, 3, 1, 2)
                                               for ep in episodes]))
        self.frozen, self.table = frozen, {}
        for ep in map(time_reversed, episodes):
            z = self.codec.encode(torch.from_numpy(ep.obs["top"]).permute(0, 3, 1, 2))  # (T+1, C, s, s)
            for t in range(ep.length - h + 1):
                self.table[z[torch.arange(t - k + 1, t + 1).clamp_min(0)].numpy().tobytes()] = z[t + 1 : t + 1 + h]

    def eval(self):
        return self

    def generate(self, context, actions, direction=1, steps=None, generator=None, instruction=None):
        from wmsuite.world_models.model import BACKWARD

        assert direction == BACKWARD
        still = context[:, -1:].expand(-1, self.cfg.chunk, -1, -1, -1)  # (B, H, C, s, s)
        if self.frozen:
            return still
        # contexts past an episode's end (the batch runs to its longest episode) are not scored
        return torch.stack([self.table.get(c.numpy().tobytes(), s) for c, s in zip(context, still)])

    def inverse_dynamics(self, previous, frames):
        return torch.zeros(*frames.shape[:2], self.cfg.action_dim)

    def predict_heads(self, latents):
        lead = latents.shape[:-3]
        return {"success_logit": torch.zeros(lead), "environment_state": torch.zeros(*lead, self.cfg.env_state_dim)}


def test_backward_fidelity_scores_each_frame_against_the_one_that_really_came_before(pushed_episodes):
    from wmsuite.eval_harness.fidelity import evaluate_fidelity
    from wmsuite.world_models.data import time_reversed
    from wmsuite.world_models.model import BACKWARD

    ep = pushed_episodes[0]
    back = time_reversed(ep)
    assert np.array_equal(back.obs["top"][0], ep.obs["top"][-1]) and np.array_equal(back.actions[0], ep.actions[-1])
    twice = time_reversed(back)
    for name in ("state", "actions", "rewards", "env_state", "intervention", "sim_states"):
        assert np.array_equal(getattr(twice, name), getattr(ep, name)), name
    assert np.array_equal(twice.obs["top"], ep.obs["top"]) and twice.success == ep.success

    horizons = (1, 8, 16)
    exact = evaluate_fidelity(_BackwardTable(pushed_episodes), pushed_episodes, PROBE, horizons, direction=BACKWARD)
    frozen = evaluate_fidelity(_BackwardTable(pushed_episodes, frozen=True), pushed_episodes, PROBE, horizons,
                               direction=BACKWARD)
    assert exact["direction"] == "backward" and "success_agreement" not in exact
    for hz in map(str, horizons):  # the exact model's frames are the real earlier frames (codec and detector only)
        assert exact["psnr"][hz] > 40 and exact["object_error"][hz] < 0.01
    assert frozen["object_error"]["16"] > exact["object_error"]["16"] + 0.02  # the cube was pushed on the way
    for result in (exact, frozen):  # one entry per rollout, the mean over those found is the figure
        for hz in map(str, horizons):
            windows = result["object_error_windows"][hz]
            assert len(windows) == result["count"][hz]
            found = [e for e in windows if e is not None]
            assert len(found) / len(windows) == pytest.approx(result["object_detect_rate"][hz])
            assert np.mean(found) == pytest.approx(result["object_error"][hz])
