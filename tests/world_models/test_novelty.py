"""The scene-novelty bank (world_models/novelty.py): its score against a brute-force nearest patch,
its k-centre selection, its file, and what it says of a real scene edit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmsuite.world_models.novelty import NoveltyConfig, PatchNovelty, _k_centres, patches


def _frames(n: int, seed: int, size: int = 16) -> np.ndarray:
    """Grey frames with a red square at a random place: a toy scene with one movable object."""
    rng = np.random.default_rng(seed)
    out = np.full((n, size, size, 3), 120, np.uint8)
    for f in out:
        y, x = rng.integers(0, size - 4, 2)
        f[y : y + 4, x : x + 4] = (200, 30, 30)
    return out


def test_patches_match_a_slice_by_hand():
    f = np.random.default_rng(0).integers(0, 256, (2, 12, 12, 3), dtype=np.uint8)
    p = patches(f, 4, 4)  # 3 x 3 patches per frame
    assert p.shape == (2, 9, 48)
    # unfold orders a patch's values channel first, then row, then column; patch (1, 2) starts at (4, 8)
    by_hand = torch.as_tensor(f[1, 4:8, 8:12].transpose(2, 0, 1).reshape(-1) / 255.0, dtype=torch.float32)
    torch.testing.assert_close(p[1, 1 * 3 + 2], by_hand)


def test_the_score_is_the_brute_force_worst_nearest_patch():
    cfg = NoveltyConfig(patch=4, stride=2, bank_size=50, candidates=200, frames=10)
    bank = PatchNovelty.fit(_frames(20, 0), cfg)
    new = _frames(3, 1)
    new[0, :3, :3] = (20, 200, 20)  # a green corner nothing in training had
    p = patches(new, 4, 2)  # (3, P, D)
    brute = np.array([max(min(float(((q - b) ** 2).mean()) for b in bank.bank) for q in fp) for fp in p]) ** 0.5
    np.testing.assert_allclose(bank.score(new), brute, rtol=1e-4, atol=1e-5)
    assert bank.score(new)[0] > bank.score(new)[1:].max()


def test_a_bank_member_frame_scores_zero_and_k_centres_are_distinct_and_farthest_first():
    pool = torch.tensor([[0.0], [0.1], [1.0], [0.5], [0.95]])
    chosen = _k_centres(pool, 3, torch.Generator().manual_seed(0), dims=8)
    assert len(set(chosen.tolist())) == 3
    first = float(pool[chosen[0], 0])
    assert float(pool[chosen[1], 0]) == (0.0 if first >= 0.5 else 1.0)  # the farthest from the first
    frames = _frames(4, 2)
    cfg = NoveltyConfig(patch=4, stride=4, bank_size=64, candidates=64, frames=4)
    bank = PatchNovelty.fit(frames, cfg)  # 4 frames x 16 patches: every patch is a candidate and kept
    np.testing.assert_allclose(bank.score(frames), 0.0, atol=1e-3)


def test_the_file_reads_back_and_bad_inputs_are_named(tmp_path):
    cfg = NoveltyConfig(patch=4, stride=2, bank_size=30, candidates=100, frames=10)
    bank = PatchNovelty.fit(_frames(10, 0), cfg)
    back = PatchNovelty.load(bank.save(tmp_path / "novelty.safetensors"))
    assert back.cfg == cfg and back.frame_shape == (16, 16, 3)
    torch.testing.assert_close(back.bank, bank.bank)
    np.testing.assert_allclose(back.score(_frames(2, 5)), bank.score(_frames(2, 5)))
    with pytest.raises(ValueError, match="cut from"):
        bank.score(np.zeros((1, 32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="fewer than bank_size"):
        PatchNovelty.fit(_frames(1, 0), NoveltyConfig(patch=4, stride=4, bank_size=100, candidates=100))
    with pytest.raises(ValueError, match="candidates"):
        NoveltyConfig(bank_size=10, candidates=5)
    from safetensors.torch import save_file

    save_file({"bank": torch.zeros(2, 2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a version-1 patch novelty bank"):
        PatchNovelty.load(tmp_path / "other.safetensors")


def test_a_real_scene_edit_scores_above_every_training_scene_start():
    """PushCube's yellow-cube variant against the training scene, both rendered by the real simulator."""
    from wmsuite.envs import make_env

    def starts(variant: str, seeds: range) -> np.ndarray:
        env = make_env("wmsuite/PushCube-v0", image_size=64, variant=variant)
        frames = [env.reset(seed=s)[0]["pixels"]["top"] for s in seeds]
        env.close()
        return np.stack(frames)

    cfg = NoveltyConfig(bank_size=2000, candidates=20000)
    bank = PatchNovelty.fit(starts("", range(120)), cfg)
    seen, new = bank.score(starts("", range(1000, 1012))), bank.score(starts("cube_color", range(1000, 1012)))
    assert new.min() > seen.max()
