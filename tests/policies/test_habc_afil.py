"""Hand-made cases for HABC's credit, critics' targets, gate and weights, and AFIL's guidance
arithmetic (#30): each against values worked out by hand."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from wmsuite.policies.config import PolicyConfig
from wmsuite.policies.guidance import failure_guide, guidance_strength, guided
from wmsuite.policies.model import ActionHead
from wmsuite.policies.weighting import (
    AUTONOMOUS,
    DEMO,
    INTERVENTION,
    advantages,
    credit,
    efficiency_targets,
    gate,
    transition_weights,
)

F, T = False, True


def test_credit_gives_an_intervened_episode_outcome_only_to_the_stretch_that_reached_it():
    mask = np.array([F, F, T, T, F, F, F])
    source, outcome = credit(True, mask)
    np.testing.assert_array_equal(source, [AUTONOMOUS] * 2 + [INTERVENTION] * 2 + [AUTONOMOUS] * 3)
    np.testing.assert_array_equal(outcome, [0, 0, np.nan, np.nan, 1, 1, 1])  # drifted, then succeeded
    _, outcome = credit(False, mask)
    np.testing.assert_array_equal(outcome, [0, 0, np.nan, np.nan, 0, 0, 0])
    _, outcome = credit(True, np.array([F, T, F, T]))  # ends with the expert: no autonomous stretch succeeded
    np.testing.assert_array_equal(outcome, [0, np.nan, 0, np.nan])
    source, outcome = credit(True, np.zeros(3, bool))  # an episode the policy ran alone
    assert (source == AUTONOMOUS).all() and (outcome == 1).all()
    source, outcome = credit(False, np.zeros(2, bool), demonstration=True)
    assert (source == DEMO).all() and (outcome == 0).all()
    with pytest.raises(ValueError, match="intervention mask"):
        credit(True, None)


def test_efficiency_targets_and_advantages():
    v_next = torch.tensor([-0.3, -0.3, 0.7])
    steps = torch.tensor([4, 4, 2])
    end = torch.tensor([F, T, F])
    torch.testing.assert_close(efficiency_targets(v_next, steps, end, horizon=40), torch.tensor([-0.4, -0.1, 0.65]))
    a_v, a_e = advantages(torch.tensor([0.5, 0.5, 0.5]), torch.tensor([0.8, 0.2, 0.4]), torch.tensor([-0.5, -0.5, 0.0]),
                          v_next, steps, end, horizon=40)
    torch.testing.assert_close(a_v, torch.tensor([0.3, 0.5, -0.1]))  # the successful end counts as viable (1)
    torch.testing.assert_close(a_e, torch.tensor([0.1, 0.4, 0.65]))


def test_gate_trusts_viability_where_success_is_unlikely_and_efficiency_where_it_is_likely():
    a_v, a_e = torch.tensor([0.3, 0.3, 0.2]), torch.tensor([-0.6, -0.6, -0.4])
    g = gate(torch.tensor([0.0, 1.0, 0.5]), a_v, a_e)
    torch.testing.assert_close(g, torch.tensor([1 + math.tanh(0.3), 1 + math.tanh(-0.6), 1 + math.tanh(-0.1)]))
    assert ((g > 0) & (g < 2)).all()


def test_weights_and_their_normalisation():
    source = torch.tensor([DEMO, INTERVENTION, AUTONOMOUS, AUTONOMOUS, AUTONOMOUS])
    outcome = torch.tensor([float("nan"), float("nan"), 1.0, 0.0, 1.0])
    g = torch.tensor([0.2, 0.2, 1.8, 1.9, 1.4])  # a gate on a demonstration or failure is ignored
    w = transition_weights(source, outcome, g)
    raw = torch.tensor([1.0, 1.0, 1.8, 0.0, 1.4])
    torch.testing.assert_close(w, raw / (5.2 / 4))  # mean of the four positive weights is 1.3
    assert w[w > 0].mean() == pytest.approx(1.0)
    none = transition_weights(torch.tensor([AUTONOMOUS]), torch.tensor([0.0]), torch.tensor([1.5]))
    assert none.tolist() == [0.0]


def test_guidance_strength_vanishes_where_the_heads_agree():
    s = torch.tensor([[[1.0, 2.0]], [[1.0, 0.0]], [[1.0, 0.0]]])  # (3, H=1, A=2)
    f = torch.tensor([[[2.0, 4.0]], [[0.0, 1.0]], [[-1.0, 0.0]]])  # parallel, orthogonal, opposite
    torch.testing.assert_close(guidance_strength(s, f, 2.0), torch.tensor([0.0, 1.0, 2.0]))
    out = guided(s, f, 2.0)
    torch.testing.assert_close(out[0], s[0])  # agreement: nothing changes
    torch.testing.assert_close(out[1], s[1] + 1.0 * (s[1] - f[1]))
    torch.testing.assert_close(out[2], s[2] + 2.0 * (s[2] - f[2]))


@pytest.mark.parametrize("kind", ["flow", "diffusion"])
def test_a_failure_head_equal_to_the_policy_head_leaves_sampling_unchanged(kind):
    torch.manual_seed(0)
    cfg = PolicyConfig(kind=kind, horizon=4, n_action_steps=2, cameras=(), hidden_dim=32, head_layers=2,
                       num_inference_steps=5)
    head = ActionHead(cfg, action_dim=2, cond_dim=6)
    cond, noise = torch.randn(3, 6), torch.randn(3, 4, 2)
    plain = head.sample(cond, noise)
    same = head.sample(cond, noise, guide=failure_guide(copy.deepcopy(head), cond, scale=3.0))
    torch.testing.assert_close(same, plain, atol=1e-5, rtol=1e-5)
    other = ActionHead(cfg, action_dim=2, cond_dim=6)  # a head that disagrees moves the sample
    moved = head.sample(cond, noise, guide=failure_guide(other, cond, scale=3.0))
    assert (moved - plain).abs().max() > 1e-3
    with pytest.raises(ValueError, match="scale"):
        failure_guide(other, cond, scale=-1.0)
