"""`wmsuite eval-wm --replays` on PickPlace through its task probe, with a tiny untrained world model
built by the library, on episodes recorded by `wmsuite collect` (which stores the env id eval-wm then
reads); and no task is named in eval_harness/."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import wmsuite.eval_harness
from wmsuite.checkpoint import save_checkpoint
from wmsuite.cli import main
from wmsuite.data import load_episodes, write_episodes
from wmsuite.world_models import CodecConfig, LatentWorldModel, WorldModelConfig

ENV_ID = "wmsuite/PickPlace-v0"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Three skilled PickPlace episodes, as `wmsuite collect` writes them."""
    data = tmp_path_factory.mktemp("pickplace") / "episodes.hdf5"
    assert main(["collect", "--env", ENV_ID, "--policy", "expert", "--skill", "1.0", "--episodes", "3",
                 "--num-envs", "1", "--seed", "5", "--out", str(data)]) == 0
    return data


def _tiny_world_model(path: Path, episodes: list, camera: str) -> Path:
    """An untrained LatentWorldModel of PickPlace's sizes, saved as a checkpoint directory."""
    torch.manual_seed(0)
    state = np.concatenate([ep.state for ep in episodes])  # (N, 4)
    env_state = np.concatenate([ep.env_state for ep in episodes])  # (N, 6)
    stats = {"state_mean": state.mean(0).tolist(), "state_std": state.std(0).tolist(),
             "env_state_mean": env_state.mean(0).tolist(), "env_state_std": env_state.std(0).tolist()}
    model = LatentWorldModel(
        WorldModelConfig(camera=camera, context=2, chunk=4, action_dim=4, state_dim=4, env_state_dim=6,
                         channels=(16, 16), sampling_steps=1),
        CodecConfig(kind="pixel", image_size=64, downsample=4), stats)
    frames = torch.from_numpy(np.concatenate([ep.obs[camera] for ep in episodes])).permute(0, 3, 1, 2)
    model.codec.fit_latent_stats(frames)
    save_checkpoint(path, model.state_dict(), model.config_dict())
    return path


def test_eval_wm_with_replays_runs_on_pick_place_through_its_probe(recorded, tmp_path, capsys):
    episodes = load_episodes(recorded)
    wm = _tiny_world_model(tmp_path / "wm", episodes, camera="front")
    out = tmp_path / "eval"
    # no --env: the task comes from the data file; nudges of a micrometre leave every first frame as it is
    assert main(["eval-wm", "--wm", str(wm), "--data", str(recorded), "--horizons", "1", "8", "--replays",
                 "--replay-shifts-mm", "0", "0.001", "--replay-turns-deg", "0", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["env"] == ENV_ID and m["episodes"] == 3
    assert m["real_success_rate"] == pytest.approx(np.mean([ep.success for ep in episodes]))
    assert m["count"] == {"1": 3, "8": 3}
    # the detector reads the front camera the model generates: its figures exist, in metres on the table
    assert 0.0 <= m["object_detect_rate"]["1"] <= 1.0
    assert m["object_error"]["1"] is None or 0.0 <= m["object_error"]["1"] < 0.6
    assert m["contact"] is not None and m["contact"]["moving_windows"] >= 1  # the cube is carried to the target
    assert m["success_agreement_detector"] is not None
    # every micrometre nudge renders the episode's own first frame, so all three of them are replayed
    assert m["replay_nudges"] == 3 and m["replay_identical_starts"] == [3, 3, 3]
    assert len(m["replay_p_success"]) == 3 and m["replay_end_shift_median"] is not None
    assert 0.5 <= m["success_agreement_ceiling"] <= 1.0 and m["success_agreement_replays"] is not None
    printed = capsys.readouterr().out
    assert "object err m" in printed and "cube" not in printed


def test_eval_wm_skips_the_detector_figures_for_another_camera(recorded, tmp_path, capsys):
    """A wrist-camera model: PickPlace's detector reads the front camera, so its figures are left out."""
    episodes = load_episodes(recorded, limit=1)
    wm = _tiny_world_model(tmp_path / "wm", episodes, camera="wrist")
    out = tmp_path / "eval"
    assert main(["eval-wm", "--wm", str(wm), "--data", str(recorded), "--max-episodes", "1", "--horizons", "1",
                 "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["object_error"] == {"1": None} and m["object_detect_rate"] == {"1": None}
    assert m["contact"] is None and m["success_agreement_detector"] is None
    assert m["state_error"]["1"] is not None and m["success_agreement_state"] is not None
    assert "reads the 'front' camera, the world model generates 'wrist'" in capsys.readouterr().out


def test_a_data_file_without_an_env_id_needs_env(pushed_episodes, tmp_path):
    from wmsuite.cli.common import recorded_env_id

    data = write_episodes(tmp_path / "bare.hdf5", pushed_episodes[:1])  # no env_args, no meta env id
    episodes = load_episodes(data)
    with pytest.raises(ValueError, match="pass --env"):
        recorded_env_id(str(data), episodes)
    tagged = [dataclasses.replace(ep, meta={**ep.meta, "env_id": "wmsuite/PushCube-v0"}) for ep in episodes]
    assert recorded_env_id(str(data), tagged) == "wmsuite/PushCube-v0"


def test_no_module_of_eval_harness_names_a_task():
    root = Path(wmsuite.eval_harness.__file__).parent
    named = {str(p.relative_to(root)): hit for p in sorted(root.rglob("*.py"))
             if (hit := re.findall(r"PushCube|push_cube|pusher|nudge_cube", p.read_text()))}
    assert not named, f"task names in eval_harness/: {named}"
