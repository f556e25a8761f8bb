"""Interventions in the rollout engine (#30): an expert takes over where the policy drifts, hands back
after its steps, and the episode's intervention mask says which actions were whose."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.core.helpers import ConstantPolicy, CounterEnv
from wmsuite.rollout import Intervention, RolloutConfig, rollout


def walk(n: int = 1, goal: float = 50.0, horizon: int = 12) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: CounterEnv(goal=goal, horizon=horizon) for _ in range(n)],
                                    autoreset_mode=gym.vector.AutoresetMode.DISABLED)


class WrongFirst(ConstantPolicy):
    """+1 chunks, except -1 at each episode's first query (per sub-env: it has per-env memory)."""

    def __init__(self):
        super().__init__(1.0, horizon=2)
        self.fresh = set()

    def reset_envs(self, idx):
        self.fresh |= {int(i) for i in idx}

    def predict_action_chunk(self, obs, env_indices=None):
        out = super().predict_action_chunk(obs)
        for r, i in enumerate(env_indices):
            if i in self.fresh:
                out[r] = -1.0
                self.fresh.discard(i)
        return out


@pytest.mark.parametrize(("threshold", "expected"), [(1.0, True), (3.0, False)])
def test_an_expert_that_disagrees_by_more_than_the_threshold_takes_every_chunk(threshold, expected):
    guard = Intervention(ConstantPolicy(-1.0, horizon=2), threshold=threshold, steps=2)
    eps = list(rollout(ConstantPolicy(1.0, horizon=2), walk(), RolloutConfig(episodes=2, seed=0, progress=False),
                       intervene=guard))
    for e in eps:  # mean |(+1) - (-1)| = 2 per action entry
        assert e.length == 12 and e.intervention.shape == (12,)
        assert e.intervention.all() == expected and e.intervention.any() == expected
        np.testing.assert_array_equal(e.actions[:, 0], -1.0 if expected else 1.0)  # what ran is recorded


def test_the_expert_keeps_control_for_its_steps_then_hands_back():
    # the policy drifts once (its first chunk); steps = 5 with chunks of 2: the expert runs 3 chunks
    guard = Intervention(ConstantPolicy(1.0, horizon=2), threshold=0.5, steps=5)
    eps = list(rollout(WrongFirst(), walk(n=2), RolloutConfig(episodes=3, seed=0, progress=False), intervene=guard))
    assert len(eps) == 3
    for e in eps:
        np.testing.assert_array_equal(e.intervention, [True] * 6 + [False] * 6)
        np.testing.assert_array_equal(e.actions[:, 0], 1.0)  # the -1 chunk never ran


def test_chunk_envs_get_per_action_intervention_flags():
    from tests.core.test_rollout import ChunkEnv

    env = gym.vector.SyncVectorEnv([ChunkEnv], autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    guard = Intervention(ConstantPolicy(-0.5, horizon=3), threshold=0.1, steps=1)
    eps = list(rollout(ConstantPolicy(0.5, horizon=3), env, RolloutConfig(episodes=1, progress=False), intervene=guard))
    assert eps[0].intervention.shape == (eps[0].length,) and eps[0].intervention.all()


def test_bad_settings_and_a_stateful_expert_without_env_indices_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        Intervention(ConstantPolicy(), threshold=-1)
    with pytest.raises(ValueError, match="steps"):
        Intervention(ConstantPolicy(), steps=0)

    class Remembers(ConstantPolicy):
        def reset_envs(self, idx):
            pass

    with pytest.raises(ValueError, match="env_indices"):  # refused before any rollout
        Intervention(Remembers(), threshold=0.5)


def test_collect_with_interventions_records_the_mask(tmp_path, capsys):
    """A policy pushing the wrong way, watched by the scripted expert: every action it would take is
    the expert's, marked in the file, and episodes succeed that the policy alone never finishes. A
    shaky policy (the expert plus noise) keeps control where it agrees and loses it where it does not."""
    import json

    from wmsuite.cli import main
    from wmsuite.data import load_episodes

    inner = 'wmsuite.envs.experts:make_expert{"env_id": "wmsuite/PushCube-v0", "skill": 1.0}'
    wrong = "wmsuite.policies.wrappers:ActionScale" + json.dumps({"inner": inner, "scale": -1.0})
    shaky = "wmsuite.policies.wrappers:ActionNoise" + json.dumps({"inner": inner, "std": 0.8})
    common = ["collect", "--env", "wmsuite/PushCube-v0", "--trust-code", "--episodes", "4", "--num-envs", "1",
              "--image-size", "16", "--seed", "7"]
    assert main([*common, "--policy", wrong, "--out", str(tmp_path / "alone.hdf5")]) == 0
    assert main([*common, "--policy", wrong, "--out", str(tmp_path / "helped.hdf5"), "--intervene", "expert@1"]) == 0
    assert "the expert took" in capsys.readouterr().out
    alone, helped = load_episodes(tmp_path / "alone.hdf5"), load_episodes(tmp_path / "helped.hdf5")
    assert not any(e.intervention.any() for e in alone) and not any(e.success for e in alone)
    assert all(e.intervention.all() for e in helped) and all(e.success for e in helped)
    assert main([*common, "--policy", shaky, "--out", str(tmp_path / "shaky.hdf5"), "--intervene", "expert@1",
                 "--intervene-steps", "2"]) == 0
    mask = np.concatenate([e.intervention for e in load_episodes(tmp_path / "shaky.hdf5")])
    assert 0.05 < mask.mean() < 0.95  # taken over and handed back
