"""Evaluate policies in a real simulator and in a learned one, from the same initial states.

    result = evaluate(EvalSetup(env_id=..., policies=[PolicyEntry(name, spec), ...], wm_path=...), out_dir)

For every policy, N episodes run (a) in the real env and (b) in a `WorldModelEnv` whose context is
the real env's first observation for the same seed, both through the shared rollout engine.

Resumable and reproducible: episodes run in *waves* of `num_envs` (episodes w*n .. w*n+n-1). Before a
wave the policy is rebuilt from its spec and torch/numpy are reseeded from (seed, policy, wave), and
the world model's sampling noise is seeded from the wave's seeds, so a wave's outcomes depend only on
its seeds. Every finished episode is appended to `episodes.jsonl` at once; a rerun with the same
output directory skips complete waves and redoes incomplete ones whole, keeping the first record
of each episode, so an interrupted evaluation finishes with the numbers an uninterrupted one gives.

Judges: the learned simulator reports which success judge fired at which step (`judge/<name>`,
world_models/env.py); each episode record holds `judge_<name>_step` (first step it fired, -1 never)
and each policy's row `judge_<name>_rate` and `judge_<name>_step_median`, beside the mean episode
length in each simulator (`real_length`, `wm_length`, in actions): where the imagined episodes ended.

Trust signals: the engine keeps every `trust/<signal>` a step's info carries in the episode's
`meta["trust"]`; each episode record holds `trust_<signal>_mean` and `trust_<signal>_max` over its
steps, and each policy's row in the metrics holds, for every such key, its mean over the policy's
learned-simulator episodes under the same name (`trust_idm_error_mean`, `trust_success_prob_max`, ...),
plus `idm_error`, the name the report uses for `trust_idm_error_mean`.

Few real episodes: with `real_episodes` n below `episodes`, only episodes 0..n-1 run in the real
simulator (the same ones a full run gives), and every row adds `ppi_success` and `ppi_ci`: the
prediction-powered estimate of the real success rate from the n paired episodes and the other
imagined ones (eval_harness/ppi.py), next to `real_success`/`real_ci` (the n real episodes alone) and
`predicted_success` (the imagined ones alone).

Trust score: with `trust_score` (records -> one score in [0, 1] per imagined episode, e.g. a
calibrator's probability that the episode's error is tolerable, world_models/calibrator.py), every row adds
`mean_trust` and `predicted_success_kept` (its predicted success over the imagined episodes that
survive abstaining on the least trusted 20% of all of them), and the metrics add `trust_error_spearman`
(across policies, |predicted - real| against 1 - mean_trust), `abstention` (the selective-evaluation
curve beside the depth-only one, eval_harness/abstention.py) and `abstained` (the cross-policy figures
of the kept predictions).

IDM stop: where the learned simulator stopped episodes whose frames stopped showing the given
actions (`trust_idm_stop_max` 1 on such an episode's record, world_models/env.py), a stopped episode
counts as a failure in `predicted_success`; each row adds `predicted_success_unstopped` (the rate over
the episodes that were not stopped: abstaining on them instead) and the metrics `idm_stop_abstain`,
the cross-policy figures under that reading, so one run measures both.
"""

from __future__ import annotations

import json
import math
import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from wmsuite.eval_harness.abstention import abstention_figures
from wmsuite.eval_harness.metrics import all_metrics, bootstrap
from wmsuite.eval_harness.ppi import ppi_mean
from wmsuite.eval_harness.workers import RecordWorker, torch_threads, usable_cores
from wmsuite.rollout import RolloutConfig, rollout
from wmsuite.runs import dumps_strict
from wmsuite.stats import wilson_interval
from wmsuite.types import Episode

SIMS = ("real", "wm")


@dataclass
class PolicyEntry:
    name: str
    """Label in the report."""
    spec: str
    """What `--policy` accepts (resolved by the caller's `make_policy`)."""
    family: str = ""
    """The zoo family it belongs to (per-family figures); empty for none."""
    split: str = ""
    """The zoo split it belongs to ('validation' or 'test'); empty for none."""


@dataclass
class EvalSetup:
    env_id: str
    policies: list[PolicyEntry]
    episodes: int
    num_envs: int
    seed: int
    make_policy: Callable[[str, int], Any]
    """(spec, seed) -> a fresh policy object."""
    make_env: Callable[[str], Any]
    """sim ('real' | 'wm') -> a VectorEnv with `num_envs` sub-envs (created once, reused)."""
    act_every: int | None = None
    """Actions executed open-loop per policy query, in both simulators (the world model's chunk)."""
    real_episodes: int | None = None
    """Episodes per policy in the real simulator, the first ones of the `episodes` (None: all of them).
    Fewer than `episodes` adds the prediction-powered estimate (eval_harness/ppi.py) to every row."""
    trust_score: Callable[[list[dict[str, Any]]], np.ndarray] | None = None
    """Imagined-episode records -> (M,) trust scores in [0, 1] (higher: more trusted); None: no trust
    figures (module docstring)."""
    parallel: bool = False
    """Run the real simulator's episodes in a worker process while the learned simulator runs here
    (where the machine has two cores or more); the records are those of a sequential run.
    `make_policy` and `make_env` must then pickle (the CLI's factories do; lambdas do not)."""

    def count(self, sim: str) -> int:
        """Episodes per policy in `sim`."""
        return self.real_episodes if sim == "real" and self.real_episodes is not None else self.episodes


def log_rows(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(line, record) for every whole line of an episodes.jsonl's text; the line a kill cut short is
    skipped (its episode reruns)."""
    for line in text.splitlines():
        try:
            yield line, json.loads(line)
        except json.JSONDecodeError:
            continue


class EpisodeLog:
    """Per-episode records, streamed as JSONL; tolerates a torn last line from a killed run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[tuple[str, str, int], dict[str, Any]] = {}
        if path.exists():
            text = path.read_text()
            good = []
            for line, row in log_rows(text):
                good.append(line)
                self.done.setdefault((row["policy"], row["sim"], row["episode"]), row)
            if len(good) != len(text.splitlines()) or (text and not text.endswith("\n")):
                tmp = path.with_suffix(".jsonl.tmp")  # drop the torn line so appends start on a fresh one
                tmp.write_text("".join(line + "\n" for line in good))
                os.replace(tmp, path)
        self._file = open(path, "a", buffering=1)  # noqa: SIM115

    def add(self, row: dict[str, Any]) -> None:
        key = (row["policy"], row["sim"], row["episode"])
        if key in self.done:
            return
        self.done[key] = row
        self._file.write(dumps_strict(row, indent=None) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def evaluate(setup: EvalSetup, out: Path, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run what `out/episodes.jsonl` lacks, then compute every figure; returns the metrics dict.
    With `setup.parallel` (and two cores or more), the real simulator's episodes run in a worker
    process while this one runs the learned simulator's (`_real_records`, workers.py); this process
    alone writes episodes.jsonl. Either way the real
    simulator's policies compute with one torch thread (`REAL_THREADS`): a learned policy's numbers
    can depend on the thread count, and a closed-loop episode amplifies the last bit, so its records
    would otherwise depend on the machine and on the schedule."""
    out.mkdir(parents=True, exist_ok=True)
    log = EpisodeLog(out / "episodes.jsonl")
    start = time.perf_counter()
    envs: dict[str, Any] = {}
    jobs = {sim: [(e, missing) for e in setup.policies
                  if (missing := [i for i in range(setup.count(sim)) if (e.name, sim, i) not in log.done])]
            for sim in SIMS}
    worker = None
    try:
        if setup.parallel and jobs["real"] and jobs["wm"] and usable_cores() >= 2:
            real = jobs.pop("real")
            worker = RecordWorker(_real_records, (replace(setup, trust_score=None), real), "the real-simulator worker")
            for entry, missing in real:
                progress(f"{entry.name} in real: {len(missing)} episodes to run (in a worker process)")
        for sim, todo in jobs.items():
            for entry, missing in todo:
                if sim not in envs:
                    envs[sim] = setup.make_env(sim)
                progress(f"{entry.name} in {sim}: {len(missing)} episodes to run")
                with torch_threads(REAL_THREADS if sim == "real" else None):
                    for ep in _run_waves(setup, entry, envs[sim], missing, setup.count(sim)):
                        log.add(_record(entry.name, sim, ep))
                        if worker is not None:
                            worker.drain(log.add)
        if worker is not None:
            progress("waiting for the real simulator's last episodes")
            worker.finish(log.add)
    finally:
        if worker is not None:
            worker.stop()
        log.close()
        for env in envs.values():
            env.close()
    metrics = summarize(setup, log.done)
    metrics["wall_time_s"] = time.perf_counter() - start
    return metrics


REAL_THREADS = 1
"""Torch threads of the real simulator's policies (see `evaluate`)."""


def _real_records(setup: EvalSetup, jobs: list[tuple[PolicyEntry, list[int]]]) -> Iterator[dict[str, Any]]:
    """The records of every job's real waves, as `evaluate` runs them with `--parallel`: in a spawned
    worker process (workers.py), whose policies compute with `REAL_THREADS` threads as they do in a
    sequential run, so each wave, seeded from (seed, policy, wave), gives the same episodes."""
    import torch

    torch.set_num_threads(REAL_THREADS)
    env = setup.make_env("real")
    try:
        for entry, missing in jobs:
            for ep in _run_waves(setup, entry, env, missing, setup.count("real")):
                yield _record(entry.name, "real", ep)
    finally:
        env.close()


def _run_waves(setup: EvalSetup, entry: PolicyEntry, env: Any, missing: list[int],
               count: int | None = None) -> Iterator[Episode]:
    """The episodes `missing` of the first `count` (None: setup.episodes), wave by wave; a wave's
    episodes do not depend on `count`, so fewer real episodes are the first ones of a full run."""
    n, count = setup.num_envs, count or setup.episodes
    for wave in sorted({i // n for i in missing}):
        members = set(range(wave * n, min((wave + 1) * n, count)))
        wave_seed = zlib.crc32(f"{setup.seed}/{entry.name}/{wave}".encode())
        _seed_all(wave_seed)
        policy = setup.make_policy(entry.spec, wave_seed)
        cfg = RolloutConfig(episodes=count, seed=setup.seed, record_frames=False, progress=False,
                            policy_id=entry.name, env_id=setup.env_id, act_every=setup.act_every)
        yield from rollout(policy, env, cfg, skip=set(range(count)) - members)


def _seed_all(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002  (policies may draw from the legacy global RNG)
    torch.manual_seed(seed)


def _record(policy: str, sim: str, ep: Episode) -> dict[str, Any]:
    row = {"policy": policy, "sim": sim, "episode": ep.meta["episode_index"], "seed": ep.meta["seed"],
           "success": ep.success, "length": ep.length}
    for key, values in ep.meta.get("trust", {}).items():
        row[key.replace("trust/", "trust_") + "_mean"] = float(np.mean(values))
        row[key.replace("trust/", "trust_") + "_max"] = float(np.max(values))
    for key, values in ep.meta.get("judge", {}).items():  # the learned simulator's judges, per step
        fired = np.flatnonzero(np.asarray(values) > 0)
        row[key.replace("judge/", "judge_") + "_step"] = int(fired[0]) if len(fired) else -1
    return row


def summarize(setup: EvalSetup, done: dict[tuple[str, str, int], dict[str, Any]],
              bootstrap_samples: int = 1000) -> dict[str, Any]:
    """Per-policy success with Wilson intervals and trust figures (see the module docstring),
    cross-policy metrics with bootstrap intervals."""
    rows, sim_outcomes, real_outcomes = [], [], []
    for entry in setup.policies:
        outcomes = {}
        for sim in SIMS:
            count = setup.count(sim)
            recs = [done[(entry.name, sim, i)] for i in range(count) if (entry.name, sim, i) in done]
            if len(recs) != count:
                raise RuntimeError(f"{entry.name} has {len(recs)}/{count} {sim} episodes recorded")
            outcomes[sim] = np.array([r["success"] for r in recs], bool)
        real, pred = outcomes["real"], outcomes["wm"]
        r_lo, r_hi = wilson_interval(int(real.sum()), len(real))
        p_lo, p_hi = wilson_interval(int(pred.sum()), len(pred))
        wm_recs = [done[(entry.name, "wm", i)] for i in range(setup.episodes)]
        trust = _trust_means(wm_recs)
        rows.append({"name": entry.name, "spec": entry.spec, "family": entry.family, "split": entry.split,
                     "real_success": float(real.mean()),
                     "real_ci": [r_lo, r_hi], "predicted_success": float(pred.mean()), "predicted_ci": [p_lo, p_hi],
                     "episode_agreement": float((real == pred[: len(real)]).mean()),
                     **_ppi_figures(real, pred),
                     "idm_error": trust.get("trust_idm_error_mean", math.nan), **trust,
                     "real_length": float(np.mean([done[(entry.name, "real", i)].get("length", math.nan)
                                                   for i in range(setup.count("real"))])),
                     "wm_length": float(np.mean([r.get("length", math.nan) for r in wm_recs])),
                     **_judge_figures(wm_recs), **_unstopped(wm_recs, pred)})
        real_outcomes.append(real)
        sim_outcomes.append(pred)
    metrics: dict[str, Any] = {"env": setup.env_id, "n_policies": len(rows), "episodes_per_policy": setup.episodes,
                               "real_episodes_per_policy": setup.count("real"), "seed": setup.seed, "policies": rows}
    if any(r["family"] for r in rows):
        metrics["families"] = family_metrics(rows)
    if len(rows) >= 2:
        metrics.update(all_metrics([r["predicted_success"] for r in rows], [r["real_success"] for r in rows]))
        for name, (lo, hi) in bootstrap(sim_outcomes, real_outcomes, samples=bootstrap_samples, seed=setup.seed).items():
            metrics[f"{name}_ci"] = [lo, hi]
    if setup.trust_score is not None:
        metrics.update(_trust_figures(setup, done, rows))
    if any("predicted_success_unstopped" in r for r in rows):
        metrics["idm_stop_abstain"] = row_metrics([{**r, "predicted_success": r["predicted_success_unstopped"]}
                                                   for r in rows if math.isfinite(r["predicted_success_unstopped"])])
    return metrics


def _unstopped(records: list[dict[str, Any]], pred: np.ndarray) -> dict[str, float]:
    """{predicted_success_unstopped} over the imagined episodes the IDM stop left alone, where it was on."""
    if not any("trust_idm_stop_max" in r for r in records):
        return {}
    kept = np.array([r.get("trust_idm_stop_max", 0.0) == 0 for r in records])
    return {"predicted_success_unstopped": float(pred[kept].mean()) if kept.any() else math.nan}


def _trust_figures(setup: EvalSetup, done: dict[tuple[str, str, int], dict[str, Any]],
                   rows: list[dict[str, Any]], coverage: float = 0.8) -> dict[str, Any]:
    """Scores every imagined episode with `setup.trust_score`, adds `mean_trust` and
    `predicted_success_kept` to `rows` and returns the run-level trust figures (module docstring)."""
    wm = [{**done[(e.name, "wm", i)], "policy": e.name} for e in setup.policies for i in range(setup.episodes)]
    trust = np.asarray(setup.trust_score(wm), float)
    if trust.shape != (len(wm),) or not np.all((trust >= 0) & (trust <= 1)):
        raise ValueError(f"trust_score must give one score in [0, 1] per imagined episode ({len(wm)}), got shape "
                         f"{trust.shape}, range [{np.nanmin(trust)}, {np.nanmax(trust)}]")
    scored = [{**r, "trust": float(t)} for r, t in zip(wm, trust)]
    real = [done[(e.name, "real", i)] for e in setup.policies for i in range(setup.count("real"))]
    fig = abstention_figures(scored + real, rows, "trust", coverage)
    for row in rows:  # mean trust over all its imagined episodes; the kept ones among those with a real twin
        row["mean_trust"] = float(np.mean([t for r, t in zip(wm, trust) if r["policy"] == row["name"]]))
        row["predicted_success_kept"] = fig["policies"][row["name"]]["predicted_success_kept"]
    kept = [{**r, "predicted_success": r["predicted_success_kept"]} for r in rows
            if math.isfinite(r["predicted_success_kept"])]
    return {"trust_error_spearman": fig["trust_error_spearman"], "abstained": row_metrics(kept),
            "abstention": {k: v for k, v in fig.items() if k not in ("policies", "trust_error_spearman")}}


def row_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Policy rows (predicted_success, real_success) -> their number, mean |predicted - real| and, with
    two policies or more, every cross-policy metric (all_metrics)."""
    pred, real = [r["predicted_success"] for r in rows], [r["real_success"] for r in rows]
    out: dict[str, float] = {"n_policies": len(rows),
                             "mean_abs_error": float(np.mean(np.abs(np.subtract(pred, real)))) if rows else math.nan}
    if len(rows) >= 2:
        out.update(all_metrics(pred, real))
    return out


def family_metrics(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """family -> `row_metrics` over that family's rows alone."""
    return {family: row_metrics([r for r in rows if r["family"] == family])
            for family in sorted({r["family"] for r in rows})}


def _ppi_figures(real: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """With fewer real episodes than imagined ones (the first len(real) of each simulator paired by
    seed): the prediction-powered estimate of the real rate and its 95% interval, and the weight it
    put on the imagined episodes; nothing when every episode ran in both."""
    n = len(real)
    if n >= len(pred):
        return {}
    est = ppi_mean(real.astype(float), pred[:n].astype(float), pred[n:].astype(float))
    return {"ppi_success": est.value, "ppi_ci": [est.low, est.high], "ppi_weight": est.lam}


def _judge_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """For every judge the learned simulator reported (`judge_<name>_step`, the world-model step it first
    fired at, -1 for never): the fraction of episodes in which it fired before the episode ended
    (`judge_<name>_rate`) and the median step at which it did (`judge_<name>_step_median`, NaN if never)."""
    out = {}
    for key in sorted({k for r in records for k in r if k.startswith("judge_") and k.endswith("_step")}):
        steps = np.array([r.get(key, -1) for r in records])
        name = key.removesuffix("_step")
        out[f"{name}_rate"] = float((steps >= 0).mean())
        out[f"{name}_step_median"] = float(np.median(steps[steps >= 0])) if (steps >= 0).any() else math.nan
    return out


def _trust_means(records: list[dict[str, Any]]) -> dict[str, float]:
    """Every `trust_*` key found in any of `records` -> its mean over the records that have a finite
    value (NaN where none has)."""
    out = {}
    for key in sorted({k for r in records for k in r if k.startswith("trust_")}):
        values = np.array([r.get(key, math.nan) for r in records], float)
        out[key] = float(np.nanmean(values)) if np.isfinite(values).any() else math.nan
    return out
