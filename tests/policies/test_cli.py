"""Smoke runs of the policy commands with tiny sizes: train-policy (and resume), eval-policy on the
real PushCube simulator, bench policies, and the shipped zoo manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wmsuite.assets
from tests.core.helpers import make_episode
from wmsuite.cli import main
from wmsuite.data import write_episodes

TINY_ARGS = ["--policy.image-size", "16", "--policy.channels", "8", "16", "--policy.feature-dim", "32",
             "--policy.hidden-dim", "64", "--policy.head-layers", "2", "--policy.horizon", "4",
             "--policy.n-action-steps", "2", "--policy.num-inference-steps", "3"]


def test_train_resume_eval_bench(tmp_path, capsys):
    data = tmp_path / "eps.hdf5"
    write_episodes(data, [make_episode(t=10, size=16, seed=i) for i in range(3)], {"env_name": "test"})
    run = tmp_path / "run"
    args = ["train-policy", "--data", str(data), "--policy.kind", "diffusion", "--out", str(run),
            "--train.batch-size", "8", "--train.save-every", "2", *TINY_ARGS, "--threads", "1"]
    assert main([*args, "--train.steps", "4"]) == 0
    assert (run / "step_4").is_dir() and (run / "latest" / "model.safetensors").is_file()
    from wmsuite.policies import load_policy

    policy = load_policy(run)  # a run directory loads its latest/
    assert policy.cfg.kind == "diffusion" and policy.cfg.cameras == ("top",)  # cameras: every camera of the data
    capsys.readouterr()
    assert main([*args, "--train.steps", "4"]) == 2  # refuses to overwrite a run: one error line naming --resume
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--train.steps", "6", "--resume"]) == 0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 6 and (run / "step_6").is_dir()
    capsys.readouterr()
    assert main([*args, "--policy.cameras", "front", "--resume"]) == 2  # another config: refused, naming it
    assert "policy.cameras: now" in capsys.readouterr().err
    fresh = [a if a != str(run) else str(tmp_path / "run2") for a in args]
    assert main([*fresh, "--policy.cameras", "front"]) == 2  # a camera the data lacks: one clear error
    assert "lacks" in capsys.readouterr().err

    out = tmp_path / "eval"
    assert main(["eval-policy", "--env", "wmsuite/PushCube-v0", "--policy", str(run), "--episodes", "2",
                 "--num-envs", "1", "--videos", "1", "--out", str(out), "--threads", "1"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {"success_rate", "ci_low", "ci_high", "episodes", "mean_length"} <= set(metrics)
    assert metrics["episodes"] == len(rows) == 2
    assert metrics["success_rate"] == sum(r["success"] for r in rows) / 2
    assert metrics["mean_length"] == sum(r["length"] for r in rows) / 2
    assert metrics["ci_low"] <= metrics["success_rate"] <= metrics["ci_high"]
    assert (out / "videos" / "episode_0000.mp4").stat().st_size > 0
    # a state-only env (--cameras empty) cannot feed a policy of pixels: one error before any episode
    assert main(["eval-policy", "--env", "wmsuite/PushCube-v0", "--policy", str(run), "--episodes", "2",
                 "--videos", "0", "--cameras", "--out", str(tmp_path / "none")]) == 2
    assert "leaves out" in capsys.readouterr().err and not (tmp_path / "none" / "episodes.jsonl").exists()

    bench = tmp_path / "bench"
    assert main(["bench", "policies", "--policies", str(run), "flow", "--steps", "1", "3", "--batch-sizes", "1",
                 "--repeats", "1", "--out", str(bench)]) == 0
    figures = json.loads((bench / "metrics.json").read_text())
    assert figures["run/steps3/batch1_ms"] > 0 and figures["flow/steps1/batch1_ms"] > 0
    for name in ("run/steps1/batch1", "run/steps3/batch1", "flow/steps1/batch1", "flow/steps3/batch1"):
        assert figures[f"{name}_chunks_per_s"] == pytest.approx(1000 / figures[f"{name}_ms"])  # batch 1


def test_expert_eval_matches_its_episodes(tmp_path):
    out = tmp_path / "eval"
    assert main(["eval-policy", "--env", "wmsuite/PushCube-v0", "--policy", "expert", "--skill", "1.0",
                 "--episodes", "3", "--seed", "7", "--num-envs", "1", "--videos", "0", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in rows) == [7, 8, 9]


def test_state_only_env_gives_the_same_episodes(tmp_path):
    """--cameras empty renders nothing; the simulation is the same: a state policy (the expert, which
    fails some episodes at skill 0.5) records the same actions, states and outcomes, without frames."""
    from wmsuite.data import load_episodes

    common = ["--env", "wmsuite/PushCube-v0", "--policy", "expert", "--skill", "0.5", "--episodes", "3",
              "--seed", "11", "--num-envs", "1"]
    for name, cams in (("full", []), ("state", ["--cameras"])):
        assert main(["collect", *common, *cams, "--out", str(tmp_path / f"{name}.hdf5")]) == 0
        assert main(["eval-policy", *common, *cams, "--videos", "0", "--out", str(tmp_path / name)]) == 0
    full, state = load_episodes(tmp_path / "full.hdf5"), load_episodes(tmp_path / "state.hdf5")
    assert all(ep.obs for ep in full) and not any(ep.obs for ep in state)
    for a, b in zip(full, state, strict=True):
        assert a.success == b.success and a.length == b.length
        assert (a.actions == b.actions).all() and (a.env_state == b.env_state).all()
    rows = [(tmp_path / n / "episodes.jsonl").read_text() for n in ("full", "state")]
    assert rows[0] == rows[1] and '"success": false' in rows[0]  # the same episodes, a failure among them


ZOO = sorted((Path(wmsuite.assets.__file__).parent / "zoo").glob("*.json"))


@pytest.mark.parametrize("manifest", ZOO, ids=[p.stem for p in ZOO])
def test_zoo_manifest(manifest):
    """Shipped zoos: >= 10 policies spanning the success range, each spec loadable as --policy."""
    from wmsuite.cli.common import resolve_policy

    zoo = json.loads(manifest.read_text())
    policies = zoo["policies"]
    assert len(policies) >= 10
    rates = [p["real_success"] for p in policies]
    assert min(rates) <= 0.2 and max(rates) >= 0.8
    for p in policies:
        assert {"name", "spec", "real_success", "episodes"} <= set(p)
        assert p["episodes"] >= 50 and 0.0 <= p["real_success"] <= 1.0
        policy = resolve_policy(p["spec"], env_id=zoo["env_id"])
        assert hasattr(policy, "predict_action_chunk")
