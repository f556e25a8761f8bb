"""Reuse the real simulator's episodes of an earlier evaluation (`wmsuite eval --real-from DIR`).

The real side of an evaluation does not depend on the learned simulator: a real episode is fixed by
the env and its keywords, the seed, the waves (`num_envs`), how often the policy is queried
(`act_every`, the world model's chunk), the device learned policies compute on and the policy's spec
and files. Comparing several world
models, judges or trust settings on one zoo therefore needs the real episodes once, and on robosuite
they cost more than the imagined ones. Every evaluation writes those settings to `real.json` beside
its `episodes.jsonl`; a later evaluation with the same settings copies the real records of the
policies both hold (same name, spec and file digests) into its own log before it runs anything, so
its figures equal those of a run that played the real episodes itself. Any other setting that
differs is refused with what to change; a policy the earlier run lacks simply runs.

    key = real_key(env_id, env_kwargs, num_envs, seed, act_every, device, policies)
    copied = real_records(src, key, counts)   # name -> its records; checks src before anything is written
    ...                                        # open the run's --out
    add_records(out, copied)
    write_real_key(out, key)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from wmsuite.runs import dumps_strict

REAL_KEY = "real.json"
GLOBAL_FIELDS = ("env", "env_kwargs", "num_envs", "seed", "act_every", "device")
"""The settings every reused record must share; per policy, its spec and file digests must match too."""


def real_key(env_id: str, env_kwargs: dict[str, Any], num_envs: int, seed: int, act_every: int, device: str,
             policies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What fixes an evaluation's real episodes; `policies`: name -> {"spec", "files"} (spec_fingerprint)."""
    return {"env": env_id, "env_kwargs": dict(env_kwargs), "num_envs": int(num_envs), "seed": int(seed),
            "act_every": int(act_every), "device": device, "policies": policies}


def write_real_key(out: Path, key: dict[str, Any]) -> None:
    """Write `key` to out/real.json atomically (a run's own policies may grow on a rerun, so it is rewritten)."""
    tmp = out / (REAL_KEY + ".tmp")
    tmp.write_text(dumps_strict(key) + "\n")
    os.replace(tmp, out / REAL_KEY)


def real_records(src: Path, key: dict[str, Any], counts: int) -> dict[str, list[dict[str, Any]]]:
    """The real records of the evaluation in `src` that this run (`key`) would play itself: name ->
    its episodes 0..counts-1, for each policy `src` holds whole under the same name, spec and files.
    Reads only; raises ValueError where `src` is no evaluation or ran its real episodes with other
    settings, so a refusal leaves nothing behind."""
    from wmsuite.eval_harness.evaluate import log_rows

    src = Path(src)
    if not (src / "episodes.jsonl").exists():
        raise ValueError(f"--real-from {src}: no episodes.jsonl there; name the --out folder of an earlier "
                         "wmsuite eval")
    if not (src / REAL_KEY).exists():
        raise ValueError(f"--real-from {src}: no {REAL_KEY} there (an evaluation written before wmsuite recorded "
                         "its real-side settings); run its real episodes again without --real-from")
    theirs = json.loads((src / REAL_KEY).read_text())
    for field in GLOBAL_FIELDS:
        if theirs.get(field) != key[field]:
            raise ValueError(f"--real-from {src}: its real episodes ran with {field} {theirs.get(field)!r}, this "
                             f"run has {key[field]!r}; match it (the real episodes depend on it) or drop --real-from")
    held: dict[str, dict[int, dict[str, Any]]] = {}
    for _, row in log_rows((src / "episodes.jsonl").read_text()):
        if row.get("sim") == "real":
            held.setdefault(row["policy"], {}).setdefault(int(row["episode"]), row)
    return {name: [held[name][i] for i in range(counts)] for name, policy in key["policies"].items()
            if theirs.get("policies", {}).get(name) == policy and all(i in held.get(name, {}) for i in range(counts))}


def add_records(out: Path, records: dict[str, list[dict[str, Any]]]) -> None:
    """Append `records` (from `real_records`) to out/episodes.jsonl, skipping any it already holds."""
    from wmsuite.eval_harness.evaluate import EpisodeLog

    log = EpisodeLog(out / "episodes.jsonl")
    try:
        for rows in records.values():
            for row in rows:
                log.add(row)
    finally:
        log.close()
