"""The evaluation loop: every policy in both simulators, resumable with identical numbers."""

from __future__ import annotations

import dataclasses
import functools
import json

import gymnasium as gym
import numpy as np
import pytest

from tests.core.helpers import CounterEnv
from wmsuite.eval_harness.evaluate import EvalSetup, PolicyEntry, evaluate, summarize, usable_cores
from wmsuite.eval_harness.report import write_report


class NoisyPolicy:
    """Steps +1 with probability `p` (torch-free randomness from numpy's global RNG, reseeded per wave)."""

    def __init__(self, p: float) -> None:
        self.p = p

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs):
        b = len(obs["agent_pos"])
        return (np.random.random((b, 1, 1)) < self.p).astype(np.float32)  # noqa: NPY002


def make_noisy_policy(spec, seed):
    return NoisyPolicy(float(spec))


class CounterEnvs:
    """sim -> 4 counter envs; the "learned" simulator is a little more lenient. Module-level and
    picklable, as the real-simulator worker process needs; `fail` makes the real one raise."""

    def __init__(self, runs=None, fail=False) -> None:
        self.runs, self.fail = runs, fail

    def __call__(self, sim):
        if self.runs is not None:
            self.runs.append(sim)
        if self.fail and sim == "real":
            raise OSError("no display")
        horizon = 6 if sim == "real" else 7
        return gym.vector.SyncVectorEnv([functools.partial(CounterEnv, goal=5.0, horizon=horizon)] * 4,
                                        autoreset_mode=gym.vector.AutoresetMode.DISABLED)


def make_setup(episodes=10, runs=None):
    policies = [PolicyEntry(f"p{p}", str(p)) for p in (0.0, 0.3, 0.6, 1.0)]
    return EvalSetup(env_id="counter", policies=policies, episodes=episodes, num_envs=4, seed=0,
                     make_policy=make_noisy_policy, make_env=CounterEnvs(runs))


def strip(m):
    return {k: v for k, v in m.items() if k != "wall_time_s"}


def test_evaluate_and_resume_give_identical_numbers(tmp_path):
    full = evaluate(make_setup(), tmp_path / "a", progress=lambda s: None)
    assert full["n_policies"] == 4 and full["episodes_per_policy"] == 10
    rates = [p["real_success"] for p in full["policies"]]
    assert rates[0] == 0.0 and rates[-1] == 1.0 and full["pearson"] > 0.8
    # an interrupted run: keep the first 13 records and a torn line
    lines = (tmp_path / "a" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 2 * 10
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "episodes.jsonl").write_text("\n".join(lines[:13]) + "\n" + lines[13][:20])
    runs = []
    resumed = evaluate(make_setup(runs=runs), tmp_path / "b", progress=lambda s: None)
    assert strip(resumed) == strip(full)
    rows = [json.loads(line) for line in (tmp_path / "b" / "episodes.jsonl").read_text().splitlines()
            if line.startswith("{") and line.endswith("}")]
    assert len({(r["policy"], r["sim"], r["episode"]) for r in rows}) == 80
    runs.clear()
    again = evaluate(make_setup(runs=runs), tmp_path / "b", progress=lambda s: None)
    assert runs == [] and strip(again) == strip(full)  # nothing left to run: no env is even created


def _records(path):
    return sorted((json.loads(line) for line in path.read_text().splitlines()),
                  key=lambda r: (r["policy"], r["sim"], r["episode"]))


@pytest.mark.skipif(usable_cores() < 2,
                    reason="the real-simulator worker runs only where there are two cores")
def test_the_real_simulator_in_a_worker_process_gives_the_sequential_records(tmp_path, monkeypatch):
    """--parallel: the same episode records and figures as the sequential run; an interrupted parallel
    run resumes to them too; a worker that fails is reported as an error, not as missing records."""
    seq = evaluate(make_setup(), tmp_path / "seq", progress=lambda s: None)
    par = evaluate(dataclasses.replace(make_setup(), parallel=True), tmp_path / "par", progress=lambda s: None)
    assert strip(par) == strip(seq)
    assert _records(tmp_path / "par" / "episodes.jsonl") == _records(tmp_path / "seq" / "episodes.jsonl")
    lines = (tmp_path / "par" / "episodes.jsonl").read_text().splitlines()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "episodes.jsonl").write_text("\n".join(lines[:29]) + "\n")
    resumed = evaluate(dataclasses.replace(make_setup(), parallel=True), tmp_path / "cut", progress=lambda s: None)
    assert strip(resumed) == strip(seq)

    with pytest.raises(ValueError, match="does not pickle"):
        evaluate(dataclasses.replace(make_setup(), parallel=True, make_policy=lambda spec, seed: None),
                 tmp_path / "lambda", progress=lambda s: None)
    with pytest.raises(RuntimeError, match="worker failed: OSError: no display"):
        evaluate(dataclasses.replace(make_setup(), parallel=True, make_env=CounterEnvs(fail=True)), tmp_path / "bad",
                 progress=lambda s: None)


class ThreadCountPolicy:
    """Steps +1 only while torch computes with one thread: which thread count the policy saw."""

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs):
        import torch

        return np.full((len(obs["agent_pos"]), 1, 1), float(torch.get_num_threads() == 1), np.float32)


def make_thread_count_policy(spec, seed):
    return ThreadCountPolicy()


@pytest.mark.parametrize("parallel", [False, True])
def test_real_simulator_policies_compute_with_one_torch_thread_in_both_schedules(tmp_path, parallel):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        setup = dataclasses.replace(make_setup(episodes=4), policies=[PolicyEntry("threads", "x")], parallel=parallel,
                                    make_policy=make_thread_count_policy)
        m = evaluate(setup, tmp_path, progress=lambda s: None)
        assert torch.get_num_threads() == 2  # restored after the real waves
    finally:
        torch.set_num_threads(before)
    assert m["policies"][0]["real_success"] == 1.0 and m["policies"][0]["predicted_success"] == 0.0


def test_report_files(tmp_path):
    metrics = evaluate(make_setup(episodes=4), tmp_path, progress=lambda s: None)
    report = write_report(metrics, tmp_path)
    text = report.read_text()
    assert "| pearson |" in text and "| p0.3 |" in text
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("pearson", "mmrv", "spearman", "kendall", "mean_abs_error", "n_policies", "episodes_per_policy",
                "policies"):
        assert key in saved
    assert {"name", "real_success", "predicted_success"} <= set(saved["policies"][0])
    assert (tmp_path / "scatter.png").read_bytes()[:4] == b"\x89PNG"


def test_missing_records_are_an_error():
    from wmsuite.eval_harness.evaluate import summarize

    with pytest.raises(RuntimeError, match="0/10 real episodes"):
        summarize(make_setup(), {})


def test_summarize_aggregates_every_trust_signal():
    """Every trust_* figure of the learned simulator's episode records becomes the policy's mean of it,
    under the same name; idm_error stays the mean of trust_idm_error_mean; the real sim's records and
    episodes without a figure are left out of its mean."""
    setup = make_setup(episodes=3)
    setup.policies = setup.policies[:2]
    done = {}
    for p, entry in enumerate(setup.policies):
        for i in range(3):
            done[(entry.name, "real", i)] = {"success": i == 0, "trust_ignored_mean": 9.0}
            row = {"success": i < p + 1, "trust_idm_error_mean": 0.1 * (i + 1) + p,
                   "trust_idm_error_max": 1.0 * i, "trust_success_prob_mean": 0.25 * i}
            if i == 2:
                row["trust_round_trip_mean"] = 4.0 + p  # a signal only one episode reported
            done[(entry.name, "wm", i)] = row
    rows = summarize(setup, done, bootstrap_samples=10)["policies"]
    for p, row in enumerate(rows):
        assert row["idm_error"] == pytest.approx(0.2 + p) and row["trust_idm_error_mean"] == row["idm_error"]
        assert row["trust_idm_error_max"] == pytest.approx(1.0)
        assert row["trust_success_prob_mean"] == pytest.approx(0.25)
        assert row["trust_round_trip_mean"] == 4.0 + p
        assert "trust_ignored_mean" not in row
    no_trust = {k: {"success": False} for k in done}
    row = summarize(setup, no_trust, bootstrap_samples=10)["policies"][0]
    assert np.isnan(row["idm_error"]) and not any(k.startswith("trust_") for k in row)


def test_judge_steps_and_rates_say_where_imagined_episodes_ended():
    """An episode record holds each judge's first firing step (-1: never); a policy row the share of
    episodes in which each fired and the median step among those."""
    from wmsuite.eval_harness.evaluate import _judge_figures, _record
    from wmsuite.types import Episode

    def episode(head, state):
        t = len(head)
        return Episode(obs={}, state=np.zeros((t + 1, 2), np.float32), actions=np.zeros((t, 2), np.float32),
                       rewards=np.zeros(t, np.float32), success=bool(head[-1]), terminated=bool(head[-1]),
                       truncated=not head[-1], meta={"episode_index": 0, "seed": 0,
                                                     "judge": {"judge/head": head, "judge/state": state}})

    records = [_record("p", "wm", episode([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])),
               _record("p", "wm", episode([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])),
               _record("p", "wm", episode([1.0], [0.0]))]
    assert [(r["judge_head_step"], r["judge_state_step"]) for r in records] == [(2, 1), (-1, -1), (0, -1)]
    figures = _judge_figures(records)
    assert figures["judge_head_rate"] == pytest.approx(2 / 3) and figures["judge_head_step_median"] == 1.0
    assert figures["judge_state_rate"] == pytest.approx(1 / 3) and figures["judge_state_step_median"] == 1.0
    assert np.isnan(_judge_figures([records[1]])["judge_head_step_median"])  # never fired: no median


def test_trust_scores_give_mean_trust_abstention_and_the_policy_level_spearman():
    """Three policies x 4 episodes, trust given per record; the figures by hand: the 80% kept are the
    10 most trusted of 12 episodes, the two least trusted being policy p0.3's misjudged ones."""
    setup = make_setup(episodes=4)
    setup.policies = setup.policies[:3]
    setup.trust_score = lambda records: np.array([r["t"] for r in records])
    done = {}
    # p0.0: always agrees, trusted 0.9; p0.3: imagined success where real failed in episodes 0-1, which
    # are trusted 0.1 and 0.2 (its others 0.8); p0.6: disagrees in episode 3, trusted 0.7 throughout
    plan = {"p0.0": ([0, 0, 0, 0], [0, 0, 0, 0], [0.9] * 4),
            "p0.3": ([0, 0, 1, 0], [1, 1, 1, 0], [0.1, 0.2, 0.8, 0.8]),
            "p0.6": ([1, 1, 1, 0], [1, 1, 1, 1], [0.7] * 4)}
    for name, (real, wm, trust) in plan.items():
        for i in range(4):
            done[(name, "real", i)] = {"policy": name, "sim": "real", "episode": i, "success": bool(real[i]),
                                      "length": 10}
            done[(name, "wm", i)] = {"policy": name, "sim": "wm", "episode": i, "success": bool(wm[i]),
                                    "length": 10, "t": trust[i]}
    m = summarize(setup, done, bootstrap_samples=10)
    rows = {r["name"]: r for r in m["policies"]}
    assert [rows[n]["mean_trust"] for n in plan] == pytest.approx([0.9, 0.475, 0.7])
    assert [rows[n]["predicted_success_kept"] for n in plan] == pytest.approx([0.0, 0.5, 1.0])
    # |predicted - real|: 0, 0.5, 0.25; distrust: 0.1, 0.525, 0.3 -> the same order, Spearman 1
    assert m["trust_error_spearman"] == pytest.approx(1.0)
    a = m["abstention"]
    assert a["error_all"] == pytest.approx(3 / 12) and a["error_at_coverage"] == pytest.approx(1 / 10)
    assert m["abstained"]["mean_abs_error"] == pytest.approx((0 + abs(0.5 - 0.25) + 0.25) / 3)
    setup.trust_score = lambda records: np.full(len(records), 1.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        summarize(setup, done, bootstrap_samples=10)


def test_idm_stopped_episodes_count_as_failures_and_as_abstentions():
    setup = make_setup(episodes=4)
    setup.policies = setup.policies[:2]
    done = {}
    for p, entry in enumerate(setup.policies):
        for i in range(4):
            done[(entry.name, "real", i)] = {"success": i < 2 * p}
            # policy 0: episodes 0 and 1 stopped (not successes), 2 succeeds; policy 1: none stopped, 3 of 4 succeed
            stop = float(p == 0 and i < 2)
            done[(entry.name, "wm", i)] = {"success": (i == 2) if p == 0 else i < 3, "trust_idm_stop_max": stop}
    m = summarize(setup, done, bootstrap_samples=10)
    a, b = m["policies"]
    assert a["predicted_success"] == 0.25 and a["predicted_success_unstopped"] == 0.5
    assert a["trust_idm_stop_max"] == 0.5  # the share of its imagined episodes stopped
    assert b["predicted_success_unstopped"] == b["predicted_success"] == 0.75
    assert m["idm_stop_abstain"]["mean_abs_error"] == pytest.approx((abs(0.5 - 0.0) + abs(0.75 - 0.5)) / 2)
