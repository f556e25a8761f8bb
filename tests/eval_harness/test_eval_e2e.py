"""`wmsuite eval` end to end on a tiny world model: the real simulator, the learned one built from a
checkpoint, the episode log, the metrics, the resume and the videos, checked against facts known
independently of the code under test (what the scripted experts reach, what the checkpoint holds)."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from wmsuite.eval_harness.ppi import ppi_mean

ENV = "wmsuite/PushCube-v0"
POLICIES = ("expert@0.0", "expert@1.0")  # the scripted experts: skill 0 always fails in some way, skill 1 is competent


def _tiny_checkpoint(path, p_backward: float = 0.0) -> dict:
    """An untrained LatentWorldModel sized for PushCube, whose success head never fires (bias -20), so
    every imagined episode runs to the horizon. Returns what the test knows about it."""
    import wmsuite.envs  # noqa: F401  (registers the id)
    from wmsuite.checkpoint import save_checkpoint
    from wmsuite.world_models.config import CodecConfig, WorldModelConfig
    from wmsuite.world_models.model import LatentWorldModel

    real = gym.make(ENV)
    space, steps = real.observation_space, gym.spec(ENV).max_episode_steps
    camera = next(iter(space["pixels"]))
    state_dim, env_dim = space["agent_pos"].shape[0], space["environment_state"].shape[0]
    action_dim = real.action_space.shape[0]
    real.close()
    torch.manual_seed(0)
    cfg = WorldModelConfig(camera=camera, context=4, chunk=4, action_dim=action_dim, state_dim=state_dim,
                           env_state_dim=env_dim, channels=(16, 16), sampling_steps=1, p_backward=p_backward)
    stats = {"state_mean": [0.0] * state_dim, "state_std": [1.0] * state_dim,
             "env_state_mean": [0.0] * env_dim, "env_state_std": [1.0] * env_dim}
    model = LatentWorldModel(cfg, CodecConfig(kind="pixel", image_size=64, downsample=4), stats)
    with torch.no_grad():
        model.heads.net[-1].bias[state_dim + env_dim] = -20.0  # the success logit
    save_checkpoint(path, model.state_dict(), model.config_dict())
    return {"chunk": cfg.chunk, "max_steps": steps}


@pytest.mark.slow
def test_eval_end_to_end_on_a_tiny_world_model(tmp_path, capsys):
    from wmsuite.cli import main

    facts = _tiny_checkpoint(tmp_path / "wm")
    out = tmp_path / "eval"
    argv = ["eval", "--wm", str(tmp_path / "wm"), "--policies", *POLICIES, "--episodes", "4", "--num-envs", "2",
            "--videos", "1", "--judge", "head", "--out", str(out)]
    assert main(argv) == 0
    assert "episodes to run" in capsys.readouterr().out

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_policies"] == 2 and metrics["episodes_per_policy"] == 4
    rows = {p["name"]: p for p in metrics["policies"]}
    assert set(rows) == set(POLICIES)
    assert rows["expert@1.0"]["real_success"] > rows["expert@0.0"]["real_success"]
    for p in rows.values():
        assert 0.0 <= p["predicted_success"] <= 1.0
        assert p["predicted_success"] == 0.0  # the success head never fires

    lines = (out / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 * 2 * 4
    assert {(r["policy"], r["sim"], r["episode"]) for r in records} == {
        (p, s, i) for p in POLICIES for s in ("real", "wm") for i in range(4)}
    assert all(r["seed"] == r["episode"] for r in records)  # episode i starts from seed 0 + i in both simulators
    horizon = math.ceil(facts["max_steps"] / facts["chunk"])  # world-model steps of the learned simulator
    for r in records:
        if r["sim"] == "wm":
            assert r["length"] == horizon * facts["chunk"] and not r["success"]
            assert math.isfinite(r["trust_idm_error_mean"])
        else:
            assert r["length"] <= facts["max_steps"] and "trust_idm_error_mean" not in r
    for name, p in rows.items():  # the per-policy trust figures are the episodes' means
        wm = [r for r in records if r["policy"] == name and r["sim"] == "wm"]
        assert p["idm_error"] == pytest.approx(np.mean([r["trust_idm_error_mean"] for r in wm]))
        assert p["trust_success_prob_max"] == pytest.approx(np.mean([r["trust_success_prob_max"] for r in wm]))

    video = out / "video_expert@0.0.mp4"
    assert video.is_file() and video.stat().st_size > 0
    stamp = video.stat().st_mtime_ns

    # the same command again: everything is there, nothing runs, the same figures come back
    assert main(argv) == 0
    assert "episodes to run" not in capsys.readouterr().out
    assert (out / "episodes.jsonl").read_text().splitlines() == lines
    again = json.loads((out / "metrics.json").read_text())
    assert _figures(again) == _figures(metrics)
    assert video.stat().st_mtime_ns == stamp

    # few real episodes: the real simulator runs the first two, the same as in the full run, and each
    # row adds the prediction-powered estimate from those two pairs and the two other imagined episodes
    few = tmp_path / "few"
    assert main([*argv[:-1], str(few), "--real-episodes", "2", "--videos", "0"]) == 0
    fewer = [json.loads(line) for line in (few / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["episode"] for r in fewer if r["sim"] == "real" and r["policy"] == POLICIES[1]) == [0, 1]
    keep = ("policy", "sim", "episode", "success", "length")
    assert [{k: r[k] for k in keep} for r in fewer if r["sim"] == "real"] == \
        [{k: r[k] for k in keep} for r in records if r["sim"] == "real" and r["episode"] < 2]
    for p in json.loads((few / "metrics.json").read_text())["policies"]:
        out_of = {s: [float(r["success"]) for r in sorted(fewer, key=lambda r: r["episode"])
                      if r["policy"] == p["name"] and r["sim"] == s] for s in ("real", "wm")}
        est = ppi_mean(out_of["real"], out_of["wm"][:2], out_of["wm"][2:])
        assert p["ppi_success"] == pytest.approx(est.value) and p["ppi_ci"] == pytest.approx([est.low, est.high])


@pytest.mark.slow
def test_round_trip_and_a_calibrator_give_every_policy_a_mean_trust(tmp_path, capsys):
    from wmsuite.cli import main
    from wmsuite.world_models.calibrator import Calibrator

    facts = _tiny_checkpoint(tmp_path / "wm", p_backward=0.5)
    cal = Calibrator(("round_trip", "idm", "depth"), (-1.0, 0.5, 0.2, 0.01), sigma=0.7, tau=0.5)
    (tmp_path / "wm" / "calibration.json").write_text(json.dumps(cal.to_json()))  # found beside the model
    out = tmp_path / "eval"
    argv = ["eval", "--wm", str(tmp_path / "wm"), "--policies", *POLICIES, "--episodes", "2", "--num-envs", "2",
            "--videos", "0", "--judge", "head", "--round-trip", "--out", str(out)]
    assert main(argv) == 0
    assert "mean trust" in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    for p in metrics["policies"]:  # the calibrator's trust of each episode's own signals, averaged
        wm = [r for r in records if r["policy"] == p["name"] and r["sim"] == "wm"]
        assert all(r["trust_round_trip_mean"] > 0 for r in wm)  # an untrained model does not come back
        want = cal.trust({"round_trip": [r["trust_round_trip_mean"] for r in wm],
                          "idm": [r["trust_idm_error_mean"] for r in wm],
                          "depth": [math.ceil(r["length"] / facts["chunk"]) for r in wm]})
        assert 0 <= p["mean_trust"] <= 1 and p["mean_trust"] == pytest.approx(want.mean())
    assert "trust_error_spearman" in metrics and metrics["abstention"]["curve"][0]["coverage"] == 1.0
    assert metrics["calibration"]["path"] == str(tmp_path / "wm" / "calibration.json")
    assert (out / "selective.png").read_bytes()[:4] == b"\x89PNG"
    # a calibrator fitted on another simulator's rollouts is refused before any rollout; one fitted on
    # this simulator's (its digest recorded) is taken
    from wmsuite.specs import file_digest

    for digest, ok in (("0" * 64, False), (file_digest(tmp_path / "wm"), True)):
        (tmp_path / "mine").mkdir(exist_ok=True)
        mine = Calibrator(cal.features, cal.weights, cal.sigma, tau=cal.tau, simulator=digest)
        (tmp_path / "mine" / "calibration.json").write_text(json.dumps(mine.to_json()))
        call = [*argv[:-1], str(tmp_path / f"sim-{ok}"), "--calibration", str(tmp_path / "mine" / "calibration.json")]
        assert (main(call) == 0) == ok
        if not ok:
            assert "another world model" in capsys.readouterr().err
            assert not (tmp_path / "sim-False" / "episodes.jsonl").exists()
    # an explicit calibrator that is not there is named before any rollout
    assert main([*argv[:-1], str(tmp_path / "other"), "--calibration", str(tmp_path / "nothere.json")]) != 0
    assert "nothere.json does not exist" in capsys.readouterr().err
    assert not (tmp_path / "other" / "episodes.jsonl").exists()
    # a calibrator that gates on novelty reads the bank beside it: every start is scored, and a limit
    # below every score leaves no episode trusted; without the bank it is refused before any rollout
    from wmsuite.world_models.novelty import NoveltyConfig, PatchNovelty

    gated = tmp_path / "gated"
    gated.mkdir()
    strict = Calibrator(cal.features, cal.weights, cal.sigma, tau=cal.tau, novelty_limit=1e-9)
    (gated / "calibration.json").write_text(json.dumps(strict.to_json()))
    call = [*argv[:-1], str(tmp_path / "nov"), "--calibration", str(gated / "calibration.json")]
    assert main(call) != 0 and "novelty.safetensors" in capsys.readouterr().err
    assert not (tmp_path / "nov" / "episodes.jsonl").exists()
    frames = np.random.default_rng(0).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    PatchNovelty.fit(frames, NoveltyConfig(bank_size=64, candidates=200)).save(gated / "novelty.safetensors")
    assert main(call) == 0
    nov = json.loads((tmp_path / "nov" / "metrics.json").read_text())
    assert all(p["mean_trust"] == 0.0 for p in nov["policies"])
    wm = [json.loads(line) for line in (tmp_path / "nov" / "episodes.jsonl").read_text().splitlines()]
    assert all(r["trust_novelty_mean"] > 0 for r in wm if r["sim"] == "wm")
    assert "novelty" in json.loads((tmp_path / "nov" / "run.json").read_text())["identity"]


@pytest.mark.slow
def test_a_backward_copy_plays_the_round_trip_and_leaves_the_imagined_episodes_as_they_were(tmp_path, capsys):
    from wmsuite.cli import main
    from wmsuite.world_models.calibrator import Calibrator

    _tiny_checkpoint(tmp_path / "wm")  # the simulator: forward only
    _tiny_checkpoint(tmp_path / "back", p_backward=1.0)  # its backward copy
    cal = Calibrator(("round_trip", "idm", "depth"), (-1.0, 0.5, 0.2, 0.01), sigma=0.7, tau=0.5)
    (tmp_path / "back" / "calibration.json").write_text(json.dumps(cal.to_json()))  # found beside the copy
    base = ["eval", "--wm", str(tmp_path / "wm"), "--policies", *POLICIES, "--episodes", "2", "--num-envs", "2",
            "--videos", "0", "--judge", "head"]
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0
    assert main([*base, "--round-trip", "--round-trip-wm", str(tmp_path / "back"), "--out", str(tmp_path / "rt")]) == 0

    def wm_records(run):
        lines = (tmp_path / run / "episodes.jsonl").read_text().splitlines()
        return sorted((r for r in map(json.loads, lines) if r["sim"] == "wm"), key=lambda r: (r["policy"], r["episode"]))

    plain, rt = wm_records("plain"), wm_records("rt")
    assert len(plain) == len(rt) == 4
    for a, b in zip(plain, rt):
        assert all(r["trust_round_trip_mean"] > 0 for r in rt)
        assert {k: v for k, v in b.items() if k in a and k != "wall_time_s"} == \
            {k: v for k, v in a.items() if k != "wall_time_s"}  # the simulator imagined the same episodes
    metrics = json.loads((tmp_path / "rt" / "metrics.json").read_text())
    assert metrics["calibration"]["path"] == str(tmp_path / "back" / "calibration.json")
    assert "round_trip_wm" in json.loads((tmp_path / "rt" / "run.json").read_text())["identity"]
    capsys.readouterr()
    # a copy that cannot step backward is refused before any rollout
    assert main([*base, "--round-trip", "--round-trip-wm", str(tmp_path / "wm"), "--out", str(tmp_path / "x")]) == 2
    assert "round-trip model was trained forward only" in capsys.readouterr().err
    assert not (tmp_path / "x" / "episodes.jsonl").exists()
    with pytest.raises(SystemExit) as exit_:  # a config error: the parser stops with code 2
        main([*base, "--round-trip-wm", str(tmp_path / "back"), "--out", str(tmp_path / "y")])
    assert exit_.value.code == 2 and "add --round-trip" in capsys.readouterr().err


def _figures(metrics: dict) -> str:
    """Every figure but the wall time, as text (a constant prediction makes some NaN, and NaN != NaN)."""
    return json.dumps({k: v for k, v in metrics.items() if k != "wall_time_s"}, sort_keys=True)


EXPERT = 'wmsuite.envs.experts:make_expert{{"env_id": "{env}", "skill": {skill}}}'


@pytest.mark.slow
def test_a_noise_seed_imagines_the_same_starts_again_and_leaves_the_real_episodes(tmp_path):
    from wmsuite.cli import main

    _tiny_checkpoint(tmp_path / "wm")
    base = ["eval", "--wm", str(tmp_path / "wm"), "--policies", POLICIES[1], "--episodes", "2", "--num-envs", "2",
            "--videos", "0", "--judge", "head"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--noise-seed", "3", "--out", str(tmp_path / "b")]) == 0

    def records(run, sim):
        lines = (tmp_path / run / "episodes.jsonl").read_text().splitlines()
        return sorted((r for r in map(json.loads, lines) if r["sim"] == sim), key=lambda r: r["episode"])

    drop = ("wall_time_s",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in records("a", "real")] == \
        [{k: v for k, v in r.items() if k not in drop} for r in records("b", "real")]
    a, b = records("a", "wm"), records("b", "wm")
    assert [r["seed"] for r in a] == [r["seed"] for r in b]  # the same starts
    assert [r["trust_idm_error_mean"] for r in a] != [r["trust_idm_error_mean"] for r in b]  # other frames
    assert json.loads((tmp_path / "b" / "run.json").read_text())["identity"]["noise_seed"] == 3
    assert "noise_seed" not in json.loads((tmp_path / "a" / "run.json").read_text())["identity"]
    # the study script on the pair: the tiny model never imagines a success, so nothing flips and every
    # real success is a misjudged episode
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "experiments" / "scripts" / "sampling_disagreement.py"
    subprocess.run([sys.executable, str(script), str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                    str(tmp_path / "d")], check=True, capture_output=True)
    fig = json.loads((tmp_path / "d" / "metrics.json").read_text())
    real = [r["success"] for r in records("a", "real")]
    assert fig["flipped"] == 0.0 and fig["episodes"] == 2
    assert fig["misjudged_all"] == pytest.approx(sum(real) / len(real))


@pytest.mark.slow
def test_real_from_reuses_the_real_episodes_of_an_earlier_evaluation(tmp_path, capsys):
    from wmsuite.cli import main

    _tiny_checkpoint(tmp_path / "wm")
    base = ["eval", "--wm", str(tmp_path / "wm"), "--episodes", "2", "--num-envs", "2", "--videos", "0", "--judge", "head"]
    assert main([*base, "--policies", POLICIES[1], "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--policies", POLICIES[1], "--noise-seed", "3", "--out", str(tmp_path / "ref")]) == 0
    capsys.readouterr()
    # another setting of the learned side, both policies: the one `a` holds is copied, the other runs
    assert main([*base, "--policies", *POLICIES, "--noise-seed", "3", "--real-from", str(tmp_path / "a"),
                 "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "reused" in out and f"{POLICIES[0]} runs" in out
    assert f"{POLICIES[1]} in real" not in out and f"{POLICIES[0]} in real" in out  # only the new one played

    def rows(run):
        lines = (tmp_path / run / "episodes.jsonl").read_text().splitlines()
        return {(r["policy"], r["sim"], r["episode"]): r for r in map(json.loads, lines)}

    ref, b = rows("ref"), rows("b")
    assert all(b[k] == v for k, v in ref.items())  # as if b had played them itself
    assert json.loads((tmp_path / "b" / "real.json").read_text())["num_envs"] == 2
    # real episodes that ran in other waves are refused before anything runs, naming the setting
    one_wave = [x if x != "2" else "1" for x in base]  # --episodes 1, --num-envs 1
    assert main([*one_wave, "--policies", POLICIES[1], "--real-from", str(tmp_path / "a"), "--out",
                 str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "num_envs 2" in err and not (tmp_path / "c" / "episodes.jsonl").exists()
    assert main([*base, "--policies", POLICIES[1], "--real-from", str(tmp_path / "nothere"),
                 "--out", str(tmp_path / "d")]) == 2


@pytest.mark.slow
def test_labels_reruns_and_untrusted_manifests(tmp_path, capsys, monkeypatch):
    """Policies whose short labels collide are told apart; a rerun with other settings or another world
    model is refused, naming the difference; a manifest's code runs only with --trust-code."""
    from wmsuite.cli import main

    monkeypatch.delenv("WMSUITE_DEBUG", raising=False)
    _tiny_checkpoint(tmp_path / "wm")
    out = tmp_path / "eval"
    good, bad = EXPERT.format(env=ENV, skill=1.0), EXPERT.format(env=ENV, skill=0.0)
    argv = ["eval", "--wm", str(tmp_path / "wm"), "--policies", good, bad, "--episodes", "4", "--num-envs", "2",
            "--videos", "0", "--out", str(out)]
    assert main(argv) == 0
    rows = {p["name"]: p for p in json.loads((out / "metrics.json").read_text())["policies"]}
    assert len(rows) == 2  # both short labels are 'make_expert': each gets its whole spec instead
    by_spec = {p["spec"]: p for p in rows.values()}
    assert by_spec[good]["real_success"] > by_spec[bad]["real_success"]  # two policies ran, not one twice

    capsys.readouterr()
    assert main(["eval", "--wm", str(tmp_path / "wm"), "--policies", f"x={good}", f"x={bad}", "--out",
                 str(tmp_path / "dup")]) == 2
    assert "label 'x' names two policies" in capsys.readouterr().err

    for change, named in ((["--seed", "1"], "seed: now 1, recorded 0"), (["--num-envs", "1"], "num_envs"),
                          (["--no-hold-static"], "hold_static")):
        assert main(argv + change) == 2
        assert named in capsys.readouterr().err
    labelled = ["eval", "--wm", str(tmp_path / "wm"), "--episodes", "2", "--num-envs", "2", "--videos", "0", "--out",
                str(tmp_path / "lab"), "--policies", "a=expert@1.0"]
    assert main(labelled) == 0
    capsys.readouterr()
    assert main([*labelled, "b=expert@0.0"]) == 0  # one more policy: only it runs
    ran = capsys.readouterr().out
    assert "b in real" in ran and "a in real" not in ran
    assert main([*labelled[:-1], "a=expert@0.5"]) == 2  # another policy under a recorded label
    assert "policies.a.spec: now expert@0.5, recorded expert@1.0" in capsys.readouterr().err
    truncated = tmp_path / "wm2"  # another world model (its weights cut short) into the same --out
    truncated.mkdir()
    (truncated / "config.json").write_text((tmp_path / "wm" / "config.json").read_text())
    (truncated / "model.safetensors").write_bytes((tmp_path / "wm" / "model.safetensors").read_bytes()[:1000])
    assert main([*argv[:2], str(truncated), *argv[3:]]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors" in err and err.count("\n") == 2  # one error line (and the debug hint)
    assert (out / "metrics.json").is_file()  # the earlier run's files are untouched

    assert main([*argv, "--seed", "1", "--force-new"]) == 0  # starting over moves the old run aside
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("eval.replaced-")]
    assert len(moved) == 1 and (moved[0] / "episodes.jsonl").is_file()
    assert json.loads((out / "metrics.json").read_text())["seed"] == 1

    marker = tmp_path / "pwned"
    manifest = tmp_path / "zoo.json"
    manifest.write_text(json.dumps({"policies": [
        {"name": "a", "spec": "expert@1.0"},
        {"name": "b", "spec": f'os:system{{"command": "touch {marker}"}}'}]}))
    capsys.readouterr()
    assert main(["eval", "--wm", str(tmp_path / "wm"), "--zoo", str(manifest), "--out", str(tmp_path / "z")]) == 2
    assert "--trust-code" in capsys.readouterr().err and not marker.exists()
    nested = json.dumps({"inner": f'os:system{{"command": "touch {marker}"}}', "offset": [0.0, 0.0]})
    manifest.write_text(json.dumps({"policies": [
        {"name": "a", "spec": "expert@1.0"}, {"name": "b", "spec": f"wmsuite.policies.wrappers:ActionOffset{nested}"}]}))
    assert main(["eval", "--wm", str(tmp_path / "wm"), "--zoo", str(manifest), "--out", str(tmp_path / "z")]) == 2
    assert "--trust-code" in capsys.readouterr().err and not marker.exists()


@pytest.mark.slow
def test_eval_runs_an_env_that_a_user_module_registers(tmp_path, capsys):
    """Gymnasium's 'package.module:Ns/Name-v0' form on both sides (#29): the real side makes the user's
    env, the learned side takes its horizon and resets from it; only probe features ask for a probe."""
    from tests.eval_harness.user_env import ENV_ID
    from wmsuite.cli import main

    facts = _tiny_checkpoint(tmp_path / "wm")
    env = f"tests.eval_harness.user_env:{ENV_ID}"
    base = ["eval", "--env", env, "--wm", str(tmp_path / "wm"), "--policies", "tests.eval_harness.user_env:Drift",
            "--episodes", "2", "--num-envs", "2"]
    assert main([*base, "--judge", "state", "--out", str(tmp_path / "state")]) == 2
    assert f"--judge state needs the task's success rule, and {env} has no task probe" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "eval")]) == 0  # --judge auto is the success head here
    records = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["sim"], r["episode"]) for r in records) == [("real", 0), ("real", 1), ("wm", 0), ("wm", 1)]
    horizon = math.ceil(gym.spec(ENV_ID).max_episode_steps / facts["chunk"]) * facts["chunk"]
    assert all(r["length"] == horizon for r in records if r["sim"] == "wm")  # the head never fires
    assert all(r["length"] <= gym.spec(ENV_ID).max_episode_steps for r in records if r["sim"] == "real")


def test_frames_the_world_model_cannot_take_are_refused_before_any_rollout(tmp_path, capsys):
    from tests.eval_harness.user_env import SMALL_ID
    from wmsuite.cli import main

    _tiny_checkpoint(tmp_path / "wm")  # generates 64x64 frames
    base = ["eval", "--wm", str(tmp_path / "wm"), "--policies", "tests.eval_harness.user_env:Drift", "--episodes", "2",
            "--num-envs", "2"]
    assert main([*base, "--image-size", "84", "--out", str(tmp_path / "a")]) == 2
    assert "--image-size 84, but the world model" in capsys.readouterr().err
    assert main([*base, "--env", f"tests.eval_harness.user_env:{SMALL_ID}", "--out", str(tmp_path / "b")]) == 2
    assert "renders 32x32 frames on 'top', and the world model" in capsys.readouterr().err
    assert not (tmp_path / "a" / "episodes.jsonl").exists() and not (tmp_path / "b" / "episodes.jsonl").exists()


def test_task_probes_are_found_under_gymnasiums_module_form():
    from wmsuite.cli.eval_setup import task_probe
    from wmsuite.envs import PROBES

    assert task_probe("wmsuite.envs:wmsuite/PushCube-v0") is PROBES["wmsuite/PushCube-v0"]
    assert task_probe("tests.eval_harness.user_env:user/RoundedPushCube-v0") is None
