"""A CI sample of experiments/scripts/kill_campaign.py: each resumable command (collect, train-policy,
train-wm, eval) is SIGKILLed at least once, resumed, and must end with the files of an uninterrupted run.
The full campaign (many kills per command) is the script itself."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "scripts" / "kill_campaign.py"
COMMANDS = ("collect", "train-policy", "train-wm", "eval")


def _campaign():
    spec = importlib.util.spec_from_file_location("kill_campaign", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_command_resumes_to_the_uninterrupted_result(tmp_path):
    code = _campaign().main(["--kills", "1", "--tiny", "--commands", *COMMANDS, "--work", str(tmp_path / "work"),
                             "--out", str(tmp_path)])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    results = metrics["commands"]
    assert set(results) == set(COMMANDS)
    failed = {name: r["failed"] for name, r in results.items() if r["failed"]}
    assert metrics["failures"] == 0 and code == 0, failed
    for name, r in results.items():
        assert r["kills"] >= 1, f"{name}: no kill landed in {r['trials']} trials ({r['missed']} missed)"
        assert r["identical"] == r["trials"], name
