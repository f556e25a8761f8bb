"""The chunk verifier (#30, policies/verifier.py): best-of-N keeps the best-scored candidate, the
adaptive execution length, and a policy without a chunk critic refused with what to do."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.policies.test_improve import CFG, episode
from wmsuite.policies import save_policy
from wmsuite.policies.improve import improved_config
from wmsuite.policies.train import build_policy
from wmsuite.policies.verifier import Verified, _repeat, best_of_n


def policy_with_critics(method: str = "habc"):
    torch.manual_seed(0)
    return build_policy([episode(0.5, seed=s) for s in range(2)] + [episode(-0.5, seed=5)],
                        improved_config(CFG, method)).eval()


OBS = {"agent_pos": np.zeros((3, 2), np.float32), "environment_state": np.zeros((3, 2), np.float32)}


def test_best_of_n_keeps_the_candidate_the_critic_scores_highest():
    policy = policy_with_critics()
    target = 0.3  # a hand-made critic: the closer a chunk's actions to +0.3 (env units), the better
    policy.critics.chunk_logit = lambda cond, unit: -(policy.normalizer.action_from_unit(unit) - target).abs().mean((1, 2))
    chunk, conf = best_of_n(policy, OBS, candidates=16, generator=torch.Generator().manual_seed(4))
    every = torch.as_tensor(policy.predict_action_chunk(_repeat(OBS, 16), generator=torch.Generator().manual_seed(4)))
    every = every.view(3, 16, *every.shape[1:])  # the same 16 candidates per row, by brute force
    dist = (every - target).abs().mean((2, 3))  # (3, 16)
    torch.testing.assert_close(chunk, every[torch.arange(3), dist.argmin(1)])
    torch.testing.assert_close(conf, torch.sigmoid(-dist.min(1).values))
    assert (dist.min(1).values < dist.mean(1)).all()  # the pick is better than a typical candidate


def test_verified_replans_sooner_when_unsure_and_refuses_a_policy_without_critics(tmp_path):
    save_policy(policy_with_critics(), tmp_path / "habc")
    sure = Verified(str(tmp_path / "habc"), candidates=4, replan_below=0.0)
    assert sure.predict_action_chunk(OBS).shape == (3, 2, 2) and sure.confidence.shape == (3,)
    unsure = Verified(str(tmp_path / "habc"), candidates=4, replan_below=1.0, short=1)
    assert unsure.predict_action_chunk(OBS).shape == (3, 1, 2)  # no confidence reaches 1: one action, then replan
    save_policy(policy_with_critics("afil"), tmp_path / "afil")
    with pytest.raises(ValueError, match="method habc"):
        Verified(str(tmp_path / "afil"))
    with pytest.raises(ValueError, match="replan_below"):
        Verified(str(tmp_path / "habc"), replan_below=2.0)
    save_policy(policy_with_critics(), tmp_path / "run" / "latest")  # a run directory, as --policy takes one
    torch.testing.assert_close(Verified(str(tmp_path / "run")).inner.state_dict(), sure.inner.state_dict())
