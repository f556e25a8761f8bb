"""`wmsuite select`: choose a learned simulator on a zoo's validation split, report it on the test
split, and again leaving each policy family out (eval_harness/selection.py).

    wmsuite eval --zoo assets:zoo/pushcube-families.json --split validation --wm A --out runs/sel/a-val
    wmsuite eval --zoo assets:zoo/pushcube-families.json --split test --wm A --out runs/sel/a-test
    ... the same for every candidate B, C (another checkpoint, --judge, --sampling-steps) ...
    wmsuite select --candidates a=runs/sel/a-val,runs/sel/a-test b=runs/sel/b-val,runs/sel/b-test --out runs/sel

Reads each run's metrics.json; writes OUT/metrics.json: the chosen candidate and its test figures
(`test`, overall and per family) and the leave-one-family-out figures (`lofo_test`), whose rows each
come from the candidate chosen without that family's validation policies.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from wmsuite.eval_harness.selection import HIGHER_IS_BETTER, LOWER_IS_BETTER, select
from wmsuite.runs import write_json

_CANDIDATE = re.compile(r"^([A-Za-z0-9._@+-]+)=([^,]+)(?:,([^,]+))?$")


@dataclass
class SelectConfig:
    candidates: tuple[str, ...] = ()
    """Each 'name=VALIDATION_RUN,TEST_RUN': the output directories of `wmsuite eval --split validation`
    and `--split test` with one candidate's settings. ',TEST_RUN' may be left out for a candidate that
    is never chosen (it is refused if it is)."""
    criterion: str = "mean_abs_error"
    """What the choice minimises on validation policies: mean_abs_error or mmrv (lower is better), or
    maximises: pearson, spearman or kendall."""
    out: str = "runs/select"
    """Output directory (metrics.json)."""

    def __post_init__(self) -> None:
        if self.criterion not in LOWER_IS_BETTER + HIGHER_IS_BETTER:
            raise ValueError(f"--criterion must be one of {', '.join(LOWER_IS_BETTER + HIGHER_IS_BETTER)}, "
                             f"got {self.criterion!r}")


CONFIG = SelectConfig


def _load(path: str, split: str) -> dict:
    file = Path(path) / "metrics.json"
    if not file.is_file():
        raise FileNotFoundError(f"no metrics.json in {path}; run `wmsuite eval --split {split} --out {path}` first")
    metrics = json.loads(file.read_text())
    wrong = sorted({r.get("split", "") for r in metrics.get("policies", [])} - {split})
    if wrong:
        raise ValueError(f"{file} holds policies of split {', '.join(repr(w) for w in wrong)}, not only {split!r}; "
                         f"evaluate with --split {split}")
    return metrics


def run(cfg: SelectConfig) -> int:
    if not cfg.candidates:
        raise ValueError("give at least one --candidates name=VALIDATION_RUN,TEST_RUN")
    candidates = {}
    for text in cfg.candidates:
        m = _CANDIDATE.match(text)
        if not m:
            raise ValueError(f"--candidates takes 'name=VALIDATION_RUN[,TEST_RUN]', got {text!r}")
        if m.group(1) in candidates:
            raise ValueError(f"the candidate name {m.group(1)!r} is given twice")
        candidates[m.group(1)] = (_load(m.group(2), "validation"), _load(m.group(3), "test") if m.group(3) else None)
    result = select(candidates, cfg.criterion)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", result)

    def line(label: str, f: dict) -> str:
        return (f"{label:<34} n={f['n_policies']:<3} Pearson {f.get('pearson', math.nan):.3f}  "
                f"MMRV {f.get('mmrv', math.nan):.3f}  mean |error| {f.get('mean_abs_error', math.nan):.3f}")

    for name, f in result["validation"].items():
        print(line(f"validation, {name}", f))
    print(line(f"test, chosen {result['chosen']}", result["test"]))
    for family, f in result["test"].get("families", {}).items():
        print(line(f"  family {family}", f))
    print(line("test, leave-one-family-out", result["lofo_test"]))
    for family, pick in result["lofo_choice"].items():
        print(f"  family {family}: chosen without it: {pick}")
    print(f"metrics: {out / 'metrics.json'}")
    return 0
