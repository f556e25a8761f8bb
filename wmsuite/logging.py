"""Run logging: a local `metrics.jsonl` always, wandb in offline mode when it is installed.

    log = RunLogger(out_dir, config=to_dict(cfg), project="wmsuite", use_wandb=True)
    log.log({"loss": 0.3}, step=10)
    log.close()
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class RunLogger:
    def __init__(self, out_dir: str | Path, config: dict[str, Any] | None = None, project: str = "wmsuite",
                 use_wandb: bool = False, name: str | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out_dir / "metrics.jsonl", "a", buffering=1)  # noqa: SIM115
        self._start = time.time()
        self._wandb = None
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
        row = {"step": step, "time": round(time.time() - self._start, 3), **metrics}
        self._file.write(json.dumps(row, default=float) + "\n")
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)

    def close(self) -> None:
        self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def write_metrics(out_dir: str | Path, metrics: dict[str, Any]) -> Path:
    """Write the figures a benchmark/evaluation printed to `out_dir/metrics.json` (atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".metrics.json.tmp"
    tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True, default=float))
    os.replace(tmp, out / "metrics.json")
    return out / "metrics.json"
