"""Smoke runs of train-wm, eval-wm and bench wm with tiny sizes on real PushCube episodes."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch

from wmsuite.cli import main
from wmsuite.data import write_episodes
from wmsuite.rollout import RolloutConfig, rollout
from wmsuite.world_models import load_world_model

pytestmark = pytest.mark.slow  # ~1 min on 2 shared cores: a real env, three commands


@pytest.fixture(scope="module")
def pushcube_file(tmp_path_factory):
    from wmsuite.envs import make_env
    from wmsuite.envs.experts import make_expert

    env = gym.vector.SyncVectorEnv([lambda: make_env("wmsuite/PushCube-v0")],
                                   autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    eps = list(rollout(make_expert("wmsuite/PushCube-v0", skill=0.5, seed=0), env,
                       RolloutConfig(episodes=3, seed=0, progress=False)))
    path = tmp_path_factory.mktemp("data") / "pushcube.hdf5"
    write_episodes(path, eps, {"env_name": "wmsuite/PushCube-v0"})
    return path


def test_train_eval_bench_commands(pushcube_file, tmp_path):
    run = tmp_path / "wm"
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "3", "--save-every", "2",
                 "--channels", "16", "16", "--batch-size", "4", "--log-every", "1", "--heads-steps", "2",
                 "--heads-batch-size", "8"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any({"diffusion", "idm", "consistency"} <= set(r) for r in rows)
    assert "heads/success" in rows[-1]  # stage 'all' ends with the heads fine-tuning
    model = load_world_model(run)
    assert model.cfg.channels == (16, 16) and (run / "step_2").is_dir()
    # --resume continues from latest/ to the new step count, here with self forcing switched on
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "4", "--resume",
                 "--channels", "16", "16", "--batch-size", "4", "--self-forcing", "1",
                 "--self-forcing-chunks", "1"]) == 0
    resumed = json.loads((run / "latest" / "config.json").read_text())
    assert resumed["step"] == 4 and resumed["world_model"]["self_forcing"] == 1.0
    # --resume-prediction switches the denoiser's output parameterisation and goes on training
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "5", "--resume",
                 "--resume-prediction", "sample", "--batch-size", "4"]) == 0
    switched = json.loads((run / "latest" / "config.json").read_text())
    assert switched["step"] == 5 and switched["world_model"]["prediction"] == "sample"
    # the heads stage fine-tunes the frame heads of latest/ and keeps the optimizer state for --resume
    before = load_world_model(run)
    assert before.cfg.heads == "keypoints"
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--stage", "heads",
                 "--heads-steps", "3", "--heads-batch-size", "8", "--heads-labels", "detector"]) == 0
    after = load_world_model(run)
    assert not torch.equal(before.heads.net[-1].weight, after.heads.net[-1].weight)
    assert torch.equal(before.denoiser.conv_in.weight, after.denoiser.conv_in.weight)
    assert (run / "latest" / "optimizer" / "model.safetensors").is_file()
    # --heads-kind replaces heads of the other kind by new ones and trains them
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--stage", "heads",
                 "--heads-steps", "2", "--heads-batch-size", "8", "--heads-kind", "conv"]) == 0
    swapped = load_world_model(run)
    assert swapped.cfg.heads == "conv" and isinstance(swapped.heads.net[0], torch.nn.Conv2d)
    # ... and the old heads' optimizer moments are dropped, so --resume starts a fresh optimizer
    assert not (run / "latest" / "optimizer").exists()
    # (here with a warm restart of the learning-rate schedule: its warm-up begins again at step 5)
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "6", "--resume",
                 "--batch-size", "4", "--restart-schedule", "--lr", "1e-3", "--log-every", "1"]) == 0
    assert json.loads((run / "latest" / "config.json").read_text())["step"] == 6
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 5 and last["lr"] == pytest.approx(1e-3 / 50)

    out = tmp_path / "eval"
    assert main(["eval-wm", "--wm", str(run), "--data", str(pushcube_file), "--out", str(out),
                 "--horizons", "1", "8"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("psnr", "ssim", "object_error", "success_agreement", "success_head_accuracy", "idm_error_real",
                "idm_error_generated"):
        assert key in m, key
    assert set(m["psnr"]) == {"1", "8"} and m["count"]["1"] == 3
    assert 0.0 <= m["success_agreement"] <= 1.0
    # --replays with only nudges the frame shows (3 cm): no replay counts, so the real outcome is the
    # only one, the ceiling is 1 and the agreement over replays is the plain agreement
    assert main(["eval-wm", "--wm", str(run), "--data", str(pushcube_file), "--out", str(out / "rp"),
                 "--horizons", "1", "--replays", "--replay-shifts-mm", "0", "30", "--replay-turns-deg", "0"]) == 0
    rp = json.loads((out / "rp" / "metrics.json").read_text())
    assert rp["replay_nudges"] == 3 and rp["replay_identical_starts"] == [0, 0, 0]
    assert rp["success_agreement_ceiling"] == 1.0
    assert rp["success_agreement_sampler_episodes"] == rp["success_agreement_mode_episodes"] == 1.0
    assert rp["success_agreement_replays"] == pytest.approx(rp["success_agreement"])
    # two rollouts of every episode: the first is the single run's (same noise), the figures pool both
    assert main(["eval-wm", "--wm", str(run), "--data", str(pushcube_file), "--out", str(out / "r2"),
                 "--horizons", "1", "8", "--repeats", "2"]) == 0
    m2 = json.loads((out / "r2" / "metrics.json").read_text())
    per = m2["success_agreement_per_repeat"]
    assert len(per) == 2 and per[0] == m["success_agreement"] and m2["count"]["1"] == 6
    assert m2["success_agreement"] == pytest.approx(sum(per) / 2)

    bench = tmp_path / "bench"
    assert main(["bench", "wm", "--wm", str(run), "--batch-sizes", "1", "2", "--steps", "1", "--repeats", "1",
                 "--sim-steps", "5", "--out", str(bench)]) == 0
    b = json.loads((bench / "metrics.json").read_text())
    assert b["wm_frames_per_s"] > 0 and b["sim_steps_per_s"] > 0 and "wm_frames_per_s_b1" in b


def test_weight_average_checkpoints_hold_the_average_and_resume_trains_the_raw_weights(pushcube_file, tmp_path):
    from wmsuite.checkpoint import load_checkpoint

    run = tmp_path / "wm"
    tiny = ["--channels", "16", "16", "--batch-size", "4", "--heads-steps", "2", "--heads-batch-size", "8"]
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "3", "--save-every", "3",
                 "--ema-decay", "0.5", "--lr", "1e-2", *tiny]) == 0
    averaged, config = load_checkpoint(run / "latest")
    online, _ = load_checkpoint(run / "latest" / "online")
    assert config["ema_decay"] == 0.5
    name = "denoiser.conv_in.weight"
    assert not torch.equal(averaged[name], online[name])  # the checkpoint is not the raw weights
    assert torch.equal(averaged["codec.latent_std"], online["codec.latent_std"])  # the frozen codec is copied
    # --resume trains the raw weights on and averages on from the checkpoint's average: one step with
    # decay 0.5 puts the new average halfway between the old one and the new raw weights
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--steps", "4", "--resume",
                 "--ema-decay", "0.5", "--lr", "1e-2", *tiny]) == 0
    averaged4, config4 = load_checkpoint(run / "latest")
    online4, _ = load_checkpoint(run / "latest" / "online")
    assert config4["step"] == 4
    assert not torch.equal(online4[name], online[name])
    torch.testing.assert_close(averaged4[name], 0.5 * averaged[name] + 0.5 * online4[name])
    # the heads stage rewrites latest/ but keeps the raw weights and the optimizer state for --resume
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--stage", "heads",
                 "--heads-steps", "2", "--heads-batch-size", "8"]) == 0
    after, config_h = load_checkpoint(run / "latest")
    assert config_h["ema_decay"] == 0.5 and torch.equal(after[name], averaged4[name])
    assert torch.equal(load_checkpoint(run / "latest" / "online")[0][name], online4[name])
    assert (run / "latest" / "optimizer" / "model.safetensors").is_file()
