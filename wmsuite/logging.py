"""Run logging: a local `metrics.jsonl` always, wandb in offline mode when it is installed.

    log = RunLogger(out_dir, config=to_dict(cfg), project="wmsuite", use_wandb=True)
    log.log({"loss": 0.3}, step=10)
    log.close()

Under data-parallel training (wmsuite/train/dist.py) only rank 0 logs; on the other ranks a RunLogger
writes nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from wmsuite.runs import dumps_strict, write_json


class RunLogger:
    def __init__(self, out_dir: str | Path, config: dict[str, Any] | None = None, project: str = "wmsuite",
                 use_wandb: bool = False, name: str | None = None) -> None:
        from wmsuite.train import dist

        self.out_dir = Path(out_dir)
        self._start = time.time()
        self._wandb = None
        self._file = None
        if not dist.is_main():
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out_dir / "metrics.jsonl", "a", buffering=1)  # noqa: SIM115
        if use_wandb:
            try:
                import wandb
            except ImportError as err:
                raise ImportError("wandb logging needs the extra: pip install 'wmsuite[wandb]'") from err
            os.environ.setdefault("WANDB_MODE", "offline")
            os.environ.setdefault("WANDB_SILENT", "true")
            self._wandb = wandb.init(project=project, name=name or self.out_dir.name, config=config or {},
                                     dir=str(self.out_dir), reinit=True)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if self._file is None:
            return
        row = {"step": step, "time": round(time.time() - self._start, 3), **metrics}
        self._file.write(dumps_strict(row, indent=None) + "\n")
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)

    def rewind(self, step: int, stage: str | None = None) -> None:
        """Forget the rows logged after `step` (of `stage` only: rows carrying `<stage>/lr`): a run
        resumed from a train state saved at `step`, or restarted, redoes those steps and logs them again."""
        if self._file is None:
            return
        path = self.out_dir / "metrics.jsonl"
        self._file.close()
        kept = []
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line a kill cut short
            if not isinstance(row, dict):
                continue
            if row.get("step", 0) <= step or (stage is not None and f"{stage}/lr" not in row):
                kept.append(line + "\n")
        tmp = path.with_name(".metrics.jsonl.tmp")
        tmp.write_text("".join(kept))
        os.replace(tmp, path)
        self._file = open(path, "a", buffering=1)  # noqa: SIM115

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def write_metrics(out_dir: str | Path, metrics: dict[str, Any]) -> Path:
    """Write the figures a benchmark/evaluation printed to `out_dir/metrics.json` (atomically, strict
    JSON: an undefined figure, NaN in memory, is written as null)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return write_json(out / "metrics.json", metrics)
