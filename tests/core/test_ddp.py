"""Data-parallel training (wmsuite/train/dist.py) with 2 gloo processes under torchrun on CPU: the
same weights after k steps as one process with the same global batch, resume, rank 0 alone writing,
and the training commands launched by torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.core import ddp_worker
from wmsuite.checkpoint import load_checkpoint
from wmsuite.train import dist

WORKER = str(Path(__file__).with_name("ddp_worker.py"))
ROOT = Path(__file__).parents[2]


def _run(args: list[str], ok: bool = True) -> subprocess.CompletedProcess:
    """`args` launched by torchrun on 2 processes (which must succeed where `ok`)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(out / "latest")[0]


def test_two_processes_take_one_process_steps_and_resume(tmp_path):
    weights = {}
    for procs in (1, 2):  # 4 steps on 1 or 2 processes, then each resumed to 6 on one process
        out = tmp_path / f"procs{procs}"
        if procs == 1:
            ddp_worker.main(str(out), 4, False)
        else:
            _run([WORKER, str(out), "4"])
        weights[procs, 4] = _weights(out)
        ddp_worker.main(str(out), 6, True)  # another process count than the one that saved the state
        weights[procs, 6] = _weights(out)
    for step in (4, 6):  # the exported (EMA) weights; float32 sums in another order
        assert set(weights[2, step]) == set(weights[1, step])
        for k, ref in weights[1, step].items():
            torch.testing.assert_close(weights[2, step][k], ref, rtol=0, atol=1e-6)
    rows = {p: [json.loads(line) for line in (tmp_path / f"procs{p}" / "metrics.jsonl").read_text().splitlines()]
            for p in (1, 2)}
    assert [r["step"] for r in rows[2]] == list(range(1, 7))  # rank 0 alone logged its 4 steps, each once
    for a, b in zip(rows[2], rows[1], strict=True):  # the logged loss is the global batch's
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-7)


def test_a_failing_rank_ends_the_launch_with_its_error(tmp_path):
    started = time.monotonic()
    done = _run([WORKER, str(tmp_path), "fail"], ok=False)
    assert done.returncode != 0 and "rank 1 failed on purpose" in done.stderr
    assert time.monotonic() - started < 2 * dist.LEAVE_TIMEOUT_S  # no rank waited for ever at exit


def test_shard_splits_every_tensor_and_refuses_uneven_batches():
    batch = ({"x": torch.arange(8).view(4, 2), "y": torch.arange(4)}, torch.Generator(), 7)
    parts = [dist.shard(batch, i, 2) for i in range(2)]
    assert torch.equal(torch.cat([p[0]["x"] for p in parts]), batch[0]["x"])
    assert torch.equal(parts[1][0]["y"], torch.tensor([2, 3])) and parts[1][2] == 7 and parts[1][1] is batch[1]
    with pytest.raises(ValueError, match="divisible"):
        dist.shard({"x": torch.zeros(5, 2)}, 0, 2)
    with pytest.raises(ValueError, match="shard=False"):
        dist.shard({"x": torch.zeros(4), "y": torch.zeros(3)}, 0, 2)
    assert dist.on_main(lambda a: {"a": a}, 3) == {"a": 3}  # one process: just the call


def test_training_commands_under_torchrun(tmp_path):
    from tests.core.helpers import make_episode
    from tests.policies.test_cli import TINY_ARGS
    from wmsuite.data import write_episodes
    from wmsuite.policies import load_policy
    from wmsuite.policies.lm.model import load_lm

    data = tmp_path / "eps.hdf5"
    write_episodes(data, [make_episode(t=10, size=16, seed=i) for i in range(3)], {"env_name": "test"})
    run = tmp_path / "policy"
    args = ["-m", "wmsuite", "train-policy", "--data", str(data), "--out", str(run), "--train.batch-size", "8",
            "--train.save-every", "2", "--train.log-every", "1", *TINY_ARGS, "--threads", "1"]
    _run([*args, "--train.steps", "2"])
    _run([*args, "--train.steps", "4", "--resume"])
    assert load_policy(run).cfg.kind == "flow" and (run / "step_4").is_dir()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # rank 0 alone logs
    assert json.loads((run / "run.json").read_text())["command"] == "train-policy"

    lm = tmp_path / "lm"
    _run(["-m", "wmsuite", "train-lm", "--out", str(lm), "--threads", "1", "--lm.hidden", "32", "--lm.mlp", "64",
          "--grpo.prompts", "4", "--grpo.group-size", "4", "--eval-problems", "16", "--train.save-every", "2",
          "--train.steps", "2"])
    rows = [json.loads(line) for line in (lm / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 2] and load_lm(lm / "latest")[1]["step"] == 2

    wm = tmp_path / "wm"
    _run(["-m", "wmsuite", "train-wm", "--data", str(data), "--out", str(wm), "--model.channels", "16", "16",
          "--codec.image-size", "16", "--dynamics.batch-size", "4", "--dynamics.steps", "2", "--dynamics.save-every", "2",
          "--heads-train.steps", "2", "--heads-train.batch-size", "8", "--heads.generated-windows", "16"])
    from wmsuite.world_models import load_world_model

    assert load_world_model(wm).cfg.channels == (16, 16)
    stages = [next(k.split("/")[0] for k in r if k.endswith("/lr")) for r in map(json.loads, (wm / "metrics.jsonl").open())
              if any(k.endswith("/lr") for k in r)]
    assert stages == ["dynamics", "heads"]  # one row each (log_every > steps): rank 0 alone logs
