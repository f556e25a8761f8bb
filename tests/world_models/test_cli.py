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


HEADS = ["--heads.generated-windows", "64"]  # few generated frames: the heads stage is the slow part
TINY = ["--model.channels", "16", "16", "--dynamics.batch-size", "4", "--heads-train.steps", "2",
        "--heads-train.batch-size", "8", *HEADS]


def test_train_eval_bench_commands(pushcube_file, tmp_path, capsys):
    run = tmp_path / "wm"
    data = ["--data", str(pushcube_file), "--out", str(run)]
    assert main(["train-wm", *data, "--dynamics.steps", "3", "--dynamics.save-every", "2",
                 "--dynamics.log-every", "1", *TINY]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any({"diffusion", "idm", "consistency", "dynamics/lr"} <= set(r) for r in rows)
    assert "heads/success" in rows[-1]  # stage 'all' ends with the heads fine-tuning
    model = load_world_model(run)
    assert model.cfg.channels == (16, 16) and model.cfg.camera == "top" and (run / "step_2").is_dir()
    assert (model.cfg.action_dim, model.cfg.state_dim, model.cfg.env_state_dim) == (2, 2, 6)  # sized from the data
    capsys.readouterr()
    stamp = (run / "latest" / "model.safetensors").stat().st_mtime_ns
    assert main(["train-wm", *data, "--dynamics.steps", "3", *TINY]) == 2  # never writes over a run without --resume
    assert "--resume" in capsys.readouterr().err
    assert (run / "latest" / "model.safetensors").stat().st_mtime_ns == stamp
    # --resume continues from the train state to the new step count; the model config defaults to the
    # checkpoint's (no --model.channels needed), here with the chained objective (self forcing) switched on
    assert main(["train-wm", *data, "--dynamics.steps", "4", "--resume", "--dynamics.batch-size", "4",
                 "--model.objective", "chained", "--model.self-forcing", "1", "--model.self-forcing-chunks", "1",
                 "--stage", "dynamics"]) == 0
    resumed = json.loads((run / "latest" / "config.json").read_text())
    assert resumed["step"] == 4 and resumed["world_model"]["self_forcing"] == 1.0
    assert resumed["world_model"]["channels"] == [16, 16]
    # --model.prediction on --resume switches the denoiser's output parameterisation and goes on training
    assert main(["train-wm", *data, "--dynamics.steps", "5", "--resume", "--model.prediction", "sample",
                 "--dynamics.batch-size", "4", "--stage", "dynamics"]) == 0
    switched = json.loads((run / "latest" / "config.json").read_text())
    assert switched["step"] == 5 and switched["world_model"]["prediction"] == "sample"
    # the architecture cannot change on --resume: one clear error before any training
    capsys.readouterr()
    assert main(["train-wm", *data, "--dynamics.steps", "6", "--resume", "--model.channels", "32", "32",
                 "--stage", "dynamics"]) == 2
    assert "--model.channels (32, 32) (checkpoint: (16, 16))" in capsys.readouterr().err
    # the heads stage fine-tunes the frame heads of latest/ alone and keeps the dynamics' train state
    before = load_world_model(run)
    assert before.cfg.heads == "keypoints"
    assert main(["train-wm", *data, "--stage", "heads", "--heads-train.steps", "3", "--heads-train.batch-size", "8",
                 "--heads.labels", "detector", *HEADS]) == 0
    after = load_world_model(run)
    assert not torch.equal(before.heads.net[-1].weight, after.heads.net[-1].weight)
    assert torch.equal(before.denoiser.conv_in.weight, after.denoiser.conv_in.weight)
    assert (run / "train_state" / "dynamics" / "model.safetensors").is_file()
    # --model.heads of the other kind replaces the heads by new ones and trains them
    assert main(["train-wm", *data, "--stage", "heads", "--heads-train.steps", "2", "--heads-train.batch-size", "8",
                 "--model.heads", "conv", *HEADS]) == 0
    swapped = load_world_model(run)
    assert swapped.cfg.heads == "conv" and isinstance(swapped.heads.net[0], torch.nn.Conv2d)
    # ... and the dynamics' train state (old heads) is dropped, so --resume starts a fresh optimizer from
    # latest/ (here with a warm restart of the learning-rate schedule: its warm-up begins again at step 5)
    assert not (run / "train_state" / "dynamics").exists()
    assert main(["train-wm", *data, "--dynamics.steps", "6", "--resume", "--dynamics.batch-size", "4",
                 "--dynamics.restart-schedule", "--dynamics.lr", "1e-3", "--dynamics.log-every", "1",
                 "--stage", "dynamics"]) == 0
    assert json.loads((run / "latest" / "config.json").read_text())["step"] == 6
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 6 and last["dynamics/lr"] == pytest.approx(1e-3 / 50)  # the lr of step index 5

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
    # --backward: the same episodes played backward, next to the forward figures (a model that steps backward)
    capsys.readouterr()
    assert main(["eval-wm", "--wm", str(run), "--data", str(pushcube_file), "--backward", "--out", str(out / "b")]) == 2
    assert "--backward needs a model trained with backward windows" in capsys.readouterr().err
    from tests.eval_harness.test_eval_e2e import _tiny_checkpoint

    _tiny_checkpoint(tmp_path / "bwd", p_backward=0.5)
    assert main(["eval-wm", "--wm", str(tmp_path / "bwd"), "--data", str(pushcube_file), "--horizons", "1", "8",
                 "--backward", "--out", str(out / "b")]) == 0
    assert "played backward" in capsys.readouterr().out
    mb = json.loads((out / "b" / "metrics.json").read_text())
    assert mb["backward"]["direction"] == "backward" and mb["backward"]["count"] == mb["count"]
    assert all(v > 0 for v in mb["backward"]["psnr"].values()) and "success_agreement" in mb

    bench = tmp_path / "bench"
    assert main(["bench", "wm", "--wm", str(run), "--batch-sizes", "1", "2", "--steps", "1", "--repeats", "1",
                 "--sim-steps", "5", "--out", str(bench)]) == 0
    b = json.loads((bench / "metrics.json").read_text())
    assert b["wm_frames_per_s"] > 0 and b["sim_steps_per_s"] > 0
    # the headline is the largest batch's figure (no batch 64 here), and the ratio is of the figures it names
    assert b["wm_frames_per_s"] == b["wm_frames_per_s_b2"] and b["wm_frames_per_s_b1"] > 0
    assert b["ratio_b64"] == pytest.approx(b["wm_frames_per_s"] / b["sim_steps_per_s"])
    chunk = load_world_model(run).cfg.chunk  # every step returns one frame and consumes a chunk of actions
    assert b["wm_action_steps_per_s_b2"] == pytest.approx(b["wm_frames_per_s_b2"] * chunk)
    assert not any(k.startswith("round_trip") for k in b)  # a forward-only model: no round-trip figure
    assert b["compiled"] == 0 and b["device"] == "cpu" and 0 < b["first_step_s_b1"] < 60  # eager: no compile in it


def test_bench_times_the_round_trip_of_a_model_that_steps_backward(tmp_path, capsys):
    from tests.eval_harness.test_eval_e2e import _tiny_checkpoint

    facts = _tiny_checkpoint(tmp_path / "wm", p_backward=0.5)  # context 4, chunk 4
    assert main(["bench", "wm", "--wm", str(tmp_path / "wm"), "--batch-sizes", "1", "2", "--steps", "1",
                 "--repeats", "1", "--sim-steps", "5", "--round-trip-depth", "3", "--out", str(tmp_path / "b")]) == 0
    assert "round trip after 3 chunks" in capsys.readouterr().out
    b = json.loads((tmp_path / "b" / "metrics.json").read_text())
    for batch in (1, 2):
        assert b[f"round_trip_ms_b{batch}"] > 0 and b[f"round_trip_cost_b{batch}"] > 0
    from wmsuite.envs import make_env
    from wmsuite.eval_harness.bench_wm import bench_round_trip
    from wmsuite.world_models import load_world_model

    model = load_world_model(tmp_path / "wm")
    r = bench_round_trip(model, lambda: make_env("wmsuite/PushCube-v0"), [1], depth=3, repeats=1)
    # 12 forward actions with context 4: back from frame 12 to frame 0 is 9 frames, 3 chunks of 4
    assert r[1]["chunks"] == 3 and facts["chunk"] == 4
    # a forward-only simulator is timed with a backward copy of it
    _tiny_checkpoint(tmp_path / "fwd")
    assert main(["bench", "wm", "--wm", str(tmp_path / "fwd"), "--round-trip-wm", str(tmp_path / "wm"),
                 "--batch-sizes", "1", "--steps", "1", "--repeats", "1", "--sim-steps", "5",
                 "--round-trip-depth", "3", "--out", str(tmp_path / "c")]) == 0
    assert json.loads((tmp_path / "c" / "metrics.json").read_text())["round_trip_ms_b1"] > 0
    capsys.readouterr()
    assert main(["bench", "wm", "--wm", str(tmp_path / "fwd"), "--round-trip-wm", str(tmp_path / "fwd"),
                 "--out", str(tmp_path / "d")]) == 2
    assert "round-trip model was trained forward only" in capsys.readouterr().err


def test_weight_average_checkpoints_hold_the_average_and_resume_trains_the_raw_weights(pushcube_file, tmp_path):
    from wmsuite.checkpoint import load_checkpoint

    run = tmp_path / "wm"
    data = ["--data", str(pushcube_file), "--out", str(run)]
    assert main(["train-wm", *data, "--dynamics.steps", "3", "--dynamics.save-every", "3",
                 "--dynamics.ema-decay", "0.5", "--dynamics.lr", "1e-2", *TINY]) == 0
    averaged, config = load_checkpoint(run / "latest")
    state, _ = load_checkpoint(run / "train_state" / "dynamics")
    raw = {k[len("model.module."):]: v for k, v in state.items() if k.startswith("model.module.")}
    assert config["ema_decay"] == 0.5
    name = "denoiser.conv_in.weight"
    assert not torch.equal(averaged[name], raw[name])  # the checkpoint is not the raw weights
    assert torch.equal(averaged["codec.latent_std"], raw["codec.latent_std"])  # the frozen codec is copied
    # --resume trains the raw weights on and averages on from the saved average: one more step with
    # decay d = min(0.5, (1 + 4) / (10 + 4)) puts the new average at d * old + (1 - d) * new raw weights
    assert main(["train-wm", *data, "--dynamics.steps", "4", "--resume", "--dynamics.ema-decay", "0.5",
                 "--dynamics.lr", "1e-2", "--stage", "dynamics", *TINY]) == 0
    averaged4, config4 = load_checkpoint(run / "latest")
    state4, _ = load_checkpoint(run / "train_state" / "dynamics")
    raw4 = state4[f"model.module.{name}"]
    assert config4["step"] == 4 and not torch.equal(raw4, raw[name])
    d = 5 / 14
    torch.testing.assert_close(averaged4[name], d * averaged[name] + (1 - d) * raw4)
    # the heads stage rewrites latest/ but keeps the raw weights and the optimizer state for --resume
    assert main(["train-wm", *data, "--stage", "heads", "--heads-train.steps", "2",
                 "--heads-train.batch-size", "8", *HEADS]) == 0
    after, config_h = load_checkpoint(run / "latest")
    assert config_h["ema_decay"] == 0.5 and torch.equal(after[name], averaged4[name])
    assert torch.equal(load_checkpoint(run / "train_state" / "dynamics")[0][f"model.module.{name}"], raw4)


def test_train_wm_with_the_cycle_objective(pushcube_file, tmp_path):
    run = tmp_path / "wm"
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run),
                 "--dynamics.steps", "3", "--dynamics.log-every", "1", "--model.objective", "cycle",
                 "--model.p-backward", "0.5", "--model.cycle-stage-steps", "1", "--model.cycle-horizon", "4",
                 *TINY]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("cycle" in r for r in rows)  # from step 1 on the curriculum imagines 3 chunks
    assert json.loads((run / "latest" / "config.json").read_text())["world_model"]["objective"] == "cycle"


def test_train_wm_init_from_warm_starts_on_the_sources_architecture_and_codec(pushcube_file, tmp_path, capsys):
    first = tmp_path / "first"
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(first), "--dynamics.steps", "2", *TINY]) == 0
    second = tmp_path / "second"
    with pytest.raises(SystemExit) as exit_:  # a config error: the parser stops with code 2
        main(["train-wm", "--data", str(pushcube_file), "--out", str(second), "--init-from", str(first),
              "--stage", "codec"])
    assert exit_.value.code == 2 and "--init-from starts a new run" in capsys.readouterr().err
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(second), "--init-from", str(first),
                 "--dynamics.steps", "1", "--dynamics.batch-size", "4", "--heads-train.steps", "2",
                 "--heads-train.batch-size", "8", *HEADS]) == 0
    assert "warm start from" in capsys.readouterr().out
    config = json.loads((second / "latest" / "config.json").read_text())
    assert config["world_model"]["channels"] == [16, 16]  # the source's, without --model.channels
    assert not (second / "codec").exists()  # the source's codec, not a new one
    assert json.loads((second / "run.json").read_text())["state"]["init_from"] == str(first)
    # the heads pass of a warm-started run goes on without repeating --init-from
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(second), "--stage", "heads",
                 "--heads-train.steps", "2", "--heads-train.batch-size", "8", *HEADS]) == 0


def test_train_wm_init_from_adds_a_camera(pushcube_file, tmp_path, capsys):
    """--init-from a one-camera model with --model.camera naming it and a second camera: the run widens
    the source (world_models/add_camera.py) and trains a two-camera model on the source's codec."""
    import dataclasses

    from wmsuite.data.hdf5 import read_episodes

    two = tmp_path / "two_cameras.hdf5"  # PushCube's episodes with a second, mirrored view
    write_episodes(two, [dataclasses.replace(ep, obs={**ep.obs, "side": ep.obs["top"][:, :, ::-1]})
                         for ep in read_episodes(pushcube_file)], {"env_name": "wmsuite/PushCube-v0"})
    first = tmp_path / "first"
    assert main(["train-wm", "--data", str(two), "--out", str(first), "--model.camera", "top",
                 "--dynamics.steps", "1", *TINY]) == 0
    second = tmp_path / "second"
    assert main(["train-wm", "--data", str(two), "--out", str(second), "--init-from", str(first),
                 "--model.camera", "top+side", "--stage", "dynamics", "--dynamics.steps", "1",
                 "--dynamics.batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "adding cameras" in out and "fresh: none" in out
    model = load_world_model(second / "latest")
    assert model.cfg.camera == "top+side" and model.codec.cfg.cameras == 2
    assert main(["train-wm", "--data", str(two), "--out", str(tmp_path / "third"), "--init-from", str(first),
                 "--model.camera", "side+top", "--stage", "dynamics", "--dynamics.steps", "1"]) == 2
    assert "must start with the warm start's cameras" in capsys.readouterr().err
    other = tmp_path / "other"  # as many cameras, another one (PushCubeEgo's warm start): the source's weights as they are
    assert main(["train-wm", "--data", str(two), "--out", str(other), "--init-from", str(first),
                 "--model.camera", "side", "--stage", "dynamics", "--dynamics.steps", "1",
                 "--dynamics.batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "adding cameras" not in out and "now read 'side'" in out
    model = load_world_model(other / "latest")
    assert model.cfg.camera == "side" and model.codec.cfg.cameras == 1


def test_a_cycle_fine_tune_of_a_forward_only_model_is_warned_about(pushcube_file, tmp_path, capsys):
    run = tmp_path / "wm"
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--dynamics.steps", "1",
                 "--stage", "all", *TINY]) == 0
    capsys.readouterr()
    assert main(["train-wm", "--data", str(pushcube_file), "--out", str(run), "--resume", "--stage", "dynamics",
                 "--dynamics.steps", "2", "--dynamics.batch-size", "4", "--model.objective", "cycle",
                 "--model.p-backward", "0.5", "--model.cycle-stage-steps", "1", "--model.cycle-horizon", "4"]) == 0
    assert "trained forward only" in capsys.readouterr().out
