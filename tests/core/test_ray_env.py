"""Simulator workers on Ray (wmsuite/rollout/ray_env.py) on a local 2-CPU cluster: the Ray vector env
batches exactly as Gymnasium's SyncVectorEnv, and `collect` / `eval` with --backend ray record the
episodes the local engine records for the same seeds. Skipped without the `dist` extra."""

from __future__ import annotations

import json

import numpy as np
import pytest

ray = pytest.importorskip("ray")

ENV = "wmsuite/PushCube-v0"


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_ray_vector_env_batches_as_sync_vector_env():
    from wmsuite.rollout import Backend, make_vector_env

    local = make_vector_env(ENV, 3, asynchronous=False, env_kwargs={"image_size": 32})
    remote = make_vector_env(ENV, 3, env_kwargs={"image_size": 32}, backend=Backend("ray", workers=2))
    try:
        assert remote.single_action_space == local.single_action_space
        assert remote.single_observation_space == local.single_observation_space
        for env in (local, remote):
            env.action_space.seed(0)
        _same(local.reset(seed=[5, 6, 7]), remote.reset(seed=[5, 6, 7]))
        for t in range(6):
            actions = local.action_space.sample()
            _same(local.step(actions), remote.step(actions))
            if t == 2:  # reset the middle sub-env only, as the engine does when one episode ends
                mask = np.array([False, True, False])
                _same(local.reset(seed=[0, 9, 0], options={"reset_mask": mask.copy()}),
                      remote.reset(seed=[0, 9, 0], options={"reset_mask": mask.copy()}))
        with pytest.raises(ValueError, match="reset_mask"):
            remote.reset(seed=[0, 1, 2], options={"reset_mask": np.zeros(3, dtype=bool)})
    finally:
        local.close()
        remote.close()


def _records(path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    keep = ("policy", "sim", "episode", "seed", "success", "length")
    return sorted(({k: r[k] for k in keep} for r in rows if r["sim"] == "real"),
                  key=lambda r: (r["policy"], r["episode"]))


def test_collect_and_eval_with_ray_workers_record_the_local_episodes(tmp_path):
    from tests.eval_harness.test_eval_e2e import _tiny_checkpoint
    from wmsuite.cli import main
    from wmsuite.data import load_episodes

    common = ["collect", "--env", ENV, "--policy", "expert", "--skill", "0.5", "--episodes", "4", "--num-envs", "2",
              "--image-size", "32", "--seed", "11"]
    assert main([*common, "--out", str(tmp_path / "local.hdf5")]) == 0
    assert main([*common, "--out", str(tmp_path / "ray.hdf5"), "--backend", "ray", "--ray-workers", "2"]) == 0
    a, b = load_episodes(tmp_path / "local.hdf5"), load_episodes(tmp_path / "ray.hdf5")
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        assert x.meta["seed"] == y.meta["seed"] and x.success == y.success
        np.testing.assert_array_equal(x.actions, y.actions)
        assert set(x.obs) == set(y.obs) and all(np.array_equal(x.obs[c], y.obs[c]) for c in x.obs)

    _tiny_checkpoint(tmp_path / "wm")
    args = ["eval", "--wm", str(tmp_path / "wm"), "--policies", "expert@0.5", "--episodes", "2",
            "--num-envs", "2", "--videos", "0", "--judge", "head"]
    assert main([*args, "--out", str(tmp_path / "eval-local")]) == 0
    assert main([*args, "--out", str(tmp_path / "eval-ray"), "--backend", "ray", "--ray-workers", "2"]) == 0
    local, remote = _records(tmp_path / "eval-local" / "episodes.jsonl"), _records(tmp_path / "eval-ray" / "episodes.jsonl")
    assert len(local) == 2 and local == remote
