"""PushCube's scene variants (out-of-distribution scenes for trust studies): valid Gymnasium envs that
change what the variant names and nothing else."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from wmsuite.envs import make_env
from wmsuite.envs.push_cube import CUBE_HALVES, OOD_SPLITS, VARIANTS

ENV = "wmsuite/PushCube-v0"
ACTIONS = np.array([[0.6, 0.3]] * 6 + [[-0.4, 0.8]] * 6, np.float32)


def _run(variant: str, seed: int = 3):
    env = make_env(ENV, variant=variant)
    obs, _ = env.reset(seed=seed)
    frames, states = [obs["pixels"]["top"]], [np.r_[obs["agent_pos"], obs["environment_state"]]]
    for a in ACTIONS:
        obs, *_ = env.step(a)
        frames.append(obs["pixels"]["top"])
        states.append(np.r_[obs["agent_pos"], obs["environment_state"]])
    env.close()
    return np.stack(frames), np.stack(states)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v])
def test_a_variant_changes_the_picture_and_keeps_what_it_does_not_name(variant):
    check_env(make_env(ENV, variant=variant).unwrapped, skip_render_check=True)
    frames, states = _run(variant)
    base_frames, base_states = _run("")
    changed = np.any(frames[0] != base_frames[0], axis=-1).mean()  # share of pixels that differ at reset
    assert changed > 0.002, f"{variant} looks like the training scene"
    assert np.array_equal(states[0], base_states[0])  # the same layout from the same seed
    if variant not in CUBE_HALVES:  # only a resized cube changes the physics
        np.testing.assert_array_equal(states, base_states)


def test_the_default_scene_is_the_training_scene_and_unknown_variants_are_named():
    a, _ = _run("")
    env = make_env(ENV)
    obs, _ = env.reset(seed=3)
    assert np.array_equal(obs["pixels"]["top"], a[0])
    with pytest.raises(ValueError, match="variant must be one of"):
        make_env(ENV, variant="purple_sky")


def test_the_validation_and_test_variants_are_apart_and_cover_every_variant():
    val, test = set(OOD_SPLITS["validation"]), set(OOD_SPLITS["test"])
    assert not val & test and val | test == {v for v in VARIANTS if v}
