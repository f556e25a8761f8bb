"""Kill campaign: SIGKILL each resumable command at random moments, resume it, and check that it ends
with exactly what an uninterrupted run writes.

    OMP_NUM_THREADS=1 MUJOCO_GL=egl python experiments/scripts/kill_campaign.py --kills 20 --out runs/kill-campaign-out

Per command (collect, train-policy, train-wm, eval): tiny inputs, built once; one uninterrupted
reference run, whose wall time (imports included) is T_ref; then trials, each in a fresh folder:
start the command in a session of its own, SIGKILL its process group after a delay uniform in
[0.2, 1] * T_ref ([0.5, 1] * T_ref every other trial, past the imports), rerun it (training with
--resume; collect with a random --num-envs, which its contract allows), kill some reruns again
(probability 0.3, at most 3 a trial), and once a run ends by itself compare with the reference:
collect's HDF5 file group by group, dataset bytes and attributes (and no .parts/ left); the
training runs' latest/model.safetensors bit for bit and metrics.jsonl row by row (without `time`
and `*/steps_per_s`); eval's metrics.json without `wall_time_s` and episodes.jsonl as one record
per (policy, sim, episode).

A kill that lands after the process ended is *missed*; trials go on until each command had --kills
kills (at most 3 * --kills trials). A trial fails when its last run exits non-zero or its output
differs; failed trials keep their folder, with the log of every attempt. Prints a table, writes
DIR/metrics.json ({"commands": {name: {...}}, "kills": total, "failures": total}) and exits 1 on
any failure. `--tiny` shrinks every command for the CI sample (tests/core/test_kill_sample.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the tiny world model comes from the tests package

REKILL_P = 0.3
"""Probability that a rerun is killed again."""
MAX_REKILLS = 3
"""Most reruns killed within one trial."""


@dataclass(frozen=True)
class Sizes:
    """How much work each command does: enough that kills land inside the work, not only in the imports."""

    collect_episodes: int = 40
    """Episodes collect records (two env workers)."""
    policy_steps: int = 200
    """train-policy steps (a save every 10)."""
    wm_steps: int = 40
    """train-wm dynamics steps (a save every 4), then 4 heads steps (a save every 2)."""
    eval_episodes: int = 5
    """eval episodes per policy (two policies, two env workers)."""


FULL, TINY = Sizes(), Sizes(collect_episodes=8, policy_steps=40, wm_steps=12, eval_episodes=2)


@dataclass(frozen=True)
class Command:
    """One resumable command: its command line in a trial folder, the flags of a rerun, the comparison."""

    name: str
    argv: Callable[[Path], list[str]]
    """trial folder -> the arguments after `wmsuite` (inputs are fixed when the Command is built)."""
    rerun: Callable[[random.Random], list[str]]
    """Flags a rerun adds (later flags win)."""
    compare: Callable[[Path, Path], str | None]
    """(reference folder, trial folder) -> the first difference, or None."""


def commands(inputs: Path, sizes: Sizes) -> dict[str, Command]:
    data, wm = str(inputs / "data.hdf5"), str(inputs / "wm")
    policy = ["--train.steps", str(sizes.policy_steps), "--train.save-every", "10", "--train.log-every", "5",
              "--train.batch-size", "8", "--threads", "1", "--policy.image-size", "16", "--policy.channels", "8",
              "16", "--policy.feature-dim", "32", "--policy.hidden-dim", "64", "--policy.head-layers", "2",
              "--policy.horizon", "4", "--policy.n-action-steps", "2", "--policy.num-inference-steps", "3"]
    world_model = ["--codec.kind", "pixel", "--codec.image-size", "32", "--model.channels", "16", "16",
                   "--dynamics.steps", str(sizes.wm_steps), "--dynamics.save-every", "4", "--dynamics.log-every",
                   "2", "--dynamics.batch-size", "4", "--heads-train.steps", "4", "--heads-train.save-every", "2",
                   "--heads-train.log-every", "1", "--heads-train.batch-size", "8", "--heads.generated-windows", "64"]
    return {
        "collect": Command(
            "collect",
            lambda d: ["collect", "--episodes", str(sizes.collect_episodes), "--skill", "0.9", "--image-size", "32",
                       "--num-envs", "2", "--seed", "0", "--out", str(d / "episodes.hdf5")],
            lambda rng: ["--num-envs", rng.choice(["1", "2"])],
            lambda ref, got: compare_collect(ref / "episodes.hdf5", got / "episodes.hdf5")),
        "train-policy": Command(
            "train-policy", lambda d: ["train-policy", "--data", data, "--out", str(d / "run"), *policy],
            lambda rng: ["--resume"], lambda ref, got: compare_training(ref / "run", got / "run")),
        "train-wm": Command(
            "train-wm", lambda d: ["train-wm", "--data", data, "--out", str(d / "run"), *world_model],
            lambda rng: ["--resume"], lambda ref, got: compare_training(ref / "run", got / "run")),
        "eval": Command(
            "eval",
            lambda d: ["eval", "--wm", wm, "--policies", "expert@0.0", "expert@1.0", "--episodes",
                       str(sizes.eval_episodes), "--num-envs", "2", "--videos", "0", "--out", str(d / "eval")],
            lambda rng: [], lambda ref, got: compare_eval(ref / "eval", got / "eval")),
    }


def build_inputs(inputs: Path, names: list[str]) -> None:
    """The training data (8 expert episodes at 32 px) and an untrained tiny world model, as needed."""
    shutil.rmtree(inputs, ignore_errors=True)
    inputs.mkdir(parents=True)
    if {"train-policy", "train-wm"} & set(names):
        done = attempt(["collect", "--episodes", "8", "--skill", "0.9", "--image-size", "32", "--out",
                        str(inputs / "data.hdf5")], inputs / "collect.log")
        if done.rc != 0:
            raise RuntimeError(f"building the training data failed (rc {done.rc}): {done.tail}")
    if "eval" in names:
        from tests.eval_harness.test_eval_e2e import _tiny_checkpoint

        _tiny_checkpoint(inputs / "wm")


@dataclass
class Attempt:
    """One run of the command: killed (SIGKILL landed while it ran), or its exit code."""

    rc: int | None
    seconds: float
    killed: bool = False
    delay: float | None = None
    tail: str = ""
    """The last line the command printed (where it was when it ended)."""
    flags: list[str] = field(default_factory=list)
    """What a rerun added to the command line."""


def attempt(argv: list[str], log: Path, kill_after: float | None = None, timeout: float = 600.0) -> Attempt:
    """Run `wmsuite argv` in a new session; SIGKILL its process group after `kill_after` seconds."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("OMP_NUM_THREADS", "1")
    start = time.perf_counter()
    with log.open("w") as out:
        out.write("$ wmsuite " + " ".join(argv) + "\n")
        out.flush()
        proc = subprocess.Popen([sys.executable, "-m", "wmsuite", *argv], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)
        try:
            proc.wait(timeout=timeout if kill_after is None else kill_after)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
    seconds = time.perf_counter() - start
    hung = kill_after is None and proc.returncode == -signal.SIGKILL
    return Attempt(rc=None if hung else proc.returncode, seconds=seconds, delay=kill_after,
                   killed=kill_after is not None and proc.returncode == -signal.SIGKILL, tail=_last_line(log))


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the whole session: the command and its env workers, which all die at once."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended just now
    proc.wait()


def _last_line(log: Path) -> str:
    text = log.read_text(errors="replace").replace("\r", "\n")
    skip = ("$ wmsuite", "(set WMSUITE_DEBUG")  # the command line we wrote, the CLI's hint after an error
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(skip)]
    return lines[-1][:240] if lines else ""


@dataclass
class Tally:
    """What one command's trials found."""

    t_ref_s: float = 0.0
    trials: int = 0
    kills: int = 0
    missed: int = 0
    reruns: int = 0
    identical: int = 0
    failures: int = 0
    wall_s: float = 0.0
    kill_points: list[float] = field(default_factory=list)
    """delay / T_ref of every kill that landed."""
    kill_phases: Counter = field(default_factory=Counter)
    """Kills per phase: the killed run's last output (a progress bar's name, a message)."""
    failed: list[dict[str, Any]] = field(default_factory=list)
    """Each failed trial: its folder, the difference, and every attempt (kill point, where its output ended)."""

    def add(self, folder: Path, attempts: list[Attempt], problem: str | None, t_ref: float) -> None:
        self.trials += 1
        self.reruns += len(attempts) - 1
        self.missed += sum(a.delay is not None and not a.killed for a in attempts)
        for a in (a for a in attempts if a.killed):
            self.kills += 1
            self.kill_points.append(round(a.delay / t_ref, 3))
            self.kill_phases[" ".join(a.tail.split(":", 1)[0].split()[:3]) or "(no output yet)"] += 1
        if problem is None:
            self.identical += 1
            shutil.rmtree(folder)
            return
        self.failures += 1
        self.failed.append({"trial": folder.name, "folder": str(folder), "difference": problem, "attempts": [
            {"flags": a.flags, "kill_at": None if a.delay is None else round(a.delay / t_ref, 3), "killed": a.killed,
             "rc": a.rc, "ended_at": a.tail} for a in attempts]})


def run_command(cmd: Command, work: Path, kills: int, rng: random.Random) -> Tally:
    """The reference, then trials until `kills` kills landed (at most 3 * kills trials)."""
    began = time.perf_counter()
    shutil.rmtree(work, ignore_errors=True)
    (work / "ref").mkdir(parents=True)
    ref = attempt(cmd.argv(work / "ref"), work / "ref" / "attempt.log")
    if ref.rc != 0:
        raise RuntimeError(f"{cmd.name}: the uninterrupted reference run failed (rc {ref.rc}): {ref.tail}; "
                           f"see {work / 'ref' / 'attempt.log'}")
    tally = Tally(t_ref_s=round(ref.seconds, 2))
    while tally.kills < kills and tally.trials < 3 * kills:
        folder = work / f"trial_{tally.trials:03d}"
        attempts = trial(cmd, folder, ref.seconds, rng, late=tally.trials % 2 == 1)
        last, problem = attempts[-1], _compare(cmd, work / "ref", folder)
        if last.rc != 0:
            ended = "a hang (killed at the timeout)" if last.rc is None else f"rc {last.rc}"
            output = "matches the reference" if problem is None else f"differs: {problem}"
            problem = f"the last run exited with {ended}: {last.tail}; its output {output}"
        tally.add(folder, attempts, problem, ref.seconds)
        points = [round(a.delay / ref.seconds, 2) for a in attempts if a.killed]
        print(f"  {cmd.name} {folder.name}: kills at {points} x T_ref, {len(attempts) - 1} rerun(s): "
              f"{'identical' if problem is None else 'FAILED: ' + problem}", flush=True)
    tally.wall_s = round(time.perf_counter() - began, 1)
    return tally


def _compare(cmd: Command, ref: Path, got: Path) -> str | None:
    try:
        return cmd.compare(ref, got)
    except Exception as err:  # an unreadable output is a finding, not the end of the campaign
        return f"the output cannot be read: {type(err).__name__}: {err}"


def trial(cmd: Command, folder: Path, t_ref: float, rng: random.Random, late: bool) -> list[Attempt]:
    """Start the command in `folder`, kill it after a random delay (in the second half of T_ref when
    `late`, past the imports), rerun it (killing some reruns again) until one ends by itself."""
    folder.mkdir()
    attempts = [attempt(cmd.argv(folder), folder / "attempt_0.log", t_ref * rng.uniform(0.5 if late else 0.2, 1.0))]
    rekills = 0
    while attempts[-1].killed:
        kill = rekills < MAX_REKILLS and rng.random() < REKILL_P
        rekills += kill
        flags = cmd.rerun(rng)
        attempts.append(attempt(cmd.argv(folder) + flags, folder / f"attempt_{len(attempts)}.log",
                                t_ref * rng.uniform(0.2, 1.0) if kill else None, timeout=max(600.0, 20 * t_ref)))
        attempts[-1].flags = flags
    return attempts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = ["collect", "train-policy", "train-wm", "eval"]
    parser.add_argument("--commands", nargs="+", default=names, choices=names)
    parser.add_argument("--kills", type=int, default=20, help="kills that must land per command")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill times (and collect's rerun --num-envs)")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "kill-campaign",
                        help="scratch folder (emptied per command; failed trials stay there)")
    parser.add_argument("--out", type=Path, required=True, help="folder for metrics.json")
    parser.add_argument("--tiny", action="store_true", help="fewer steps and episodes (the CI sample)")
    args = parser.parse_args(argv)
    if args.kills < 1:
        parser.error(f"--kills must be >= 1, got {args.kills}")
    work = args.work.resolve()
    build_inputs(work / "inputs", args.commands)
    table = commands(work / "inputs", TINY if args.tiny else FULL)
    results = {}
    for name in args.commands:
        print(f"{name}: reference run, then trials until {args.kills} kills landed", flush=True)
        tally = run_command(table[name], work / name, args.kills, random.Random(f"{args.seed}:{name}"))
        results[name] = vars(tally)
    print(f"\n{'command':<14}{'T_ref s':>8}{'trials':>8}{'kills':>7}{'missed':>8}{'reruns':>8}{'identical':>10}"
          f"{'failures':>10}{'wall s':>8}")
    for name, r in results.items():
        print(f"{name:<14}{r['t_ref_s']:>8.1f}{r['trials']:>8}{r['kills']:>7}{r['missed']:>8}{r['reruns']:>8}"
              f"{r['identical']:>10}{r['failures']:>10}{r['wall_s']:>8.0f}")
        for f in r["failed"]:
            print(f"  {name} {f['trial']}: {f['difference']}")
    summary = {"commands": results, "kills": sum(r["kills"] for r in results.values()),
               "failures": sum(r["failures"] for r in results.values()), "seed": args.seed, "tiny": args.tiny}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if summary["failures"] else 0


def compare_collect(ref: Path, got: Path) -> str | None:
    """Every group, dataset (dtype, shape, bytes) and attribute of two HDF5 files; no shards left."""
    parts = got.with_name(got.name + ".parts")
    if parts.exists():
        return f"{parts.name}/ left behind: {sorted(p.name for p in parts.iterdir())[:8]}"
    if not got.is_file():
        return f"{got.name} missing"
    a, b = _hdf5_items(ref), _hdf5_items(got)
    demos = [sorted(k for k in items if k.count("/") == 1 and k.startswith("data/demo_")) for items in (a, b)]
    if demos[0] != demos[1]:
        return (f"episodes {len(demos[1])} (reference {len(demos[0])}): extra "
                f"{sorted(set(demos[1]) - set(demos[0]))[:5]}, missing {sorted(set(demos[0]) - set(demos[1]))[:5]}")
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            return f"{key}: only in {'the resumed file' if key in b else 'the reference'}"
        if a[key] != b[key]:
            detail = next((f"attribute {k}: {b[key][1].get(k)!s:.200} (reference {a[key][1].get(k)!s:.200})"
                           for k in sorted(set(a[key][1]) | set(b[key][1])) if a[key][1].get(k) != b[key][1].get(k)),
                          "the data differ")
            return f"{key}: {detail}"
    return None


def _hdf5_items(path: Path) -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (dataset dtype, shape and bytes, or 'group'; attributes as comparable values)."""
    import h5py
    import numpy as np

    def value(v: Any) -> Any:
        return (v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes()) if isinstance(v, np.ndarray) else repr(v)

    items: dict[str, tuple[Any, dict[str, Any]]] = {}

    def visit(name: str, obj: Any) -> None:
        body = value(obj[()]) if isinstance(obj, h5py.Dataset) else "group"
        items[name] = (body, {k: value(v) for k, v in obj.attrs.items()})

    with h5py.File(path, "r") as f:
        visit("/", f)
        f.visititems(visit)
    return items


def compare_training(ref: Path, got: Path) -> str | None:
    """latest/model.safetensors bit for bit, then metrics.jsonl row by row (timings left out)."""
    import torch
    from safetensors.torch import load_file

    model = got / "latest" / "model.safetensors"
    if not model.is_file():
        return "latest/model.safetensors missing"
    a, b = load_file(ref / "latest" / "model.safetensors"), load_file(model)
    if set(a) != set(b):
        return f"tensors: extra {sorted(set(b) - set(a))[:5]}, missing {sorted(set(a) - set(b))[:5]}"
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"tensor {name}: {y.dtype} {tuple(y.shape)} (reference {x.dtype} {tuple(x.shape)})"
        if not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
            return f"tensor {name}: differs, largest gap {float((x.double() - y.double()).abs().max()):.3g}"
    rows_a, rows_b = _rows(ref / "metrics.jsonl"), _rows(got / "metrics.jsonl")
    if isinstance(rows_b, str):
        return rows_b
    steps_a, steps_b = Counter(r.get("step") for r in rows_a), Counter(r.get("step") for r in rows_b)
    if len(rows_a) != len(rows_b) or steps_a != steps_b:
        return (f"metrics.jsonl: {len(rows_b)} rows (reference {len(rows_a)}); steps logged more often than in "
                f"the reference: {sorted((steps_b - steps_a).elements())[:10]}, less often: "
                f"{sorted((steps_a - steps_b).elements())[:10]}")
    for i, (x, y) in enumerate(zip(rows_a, rows_b)):
        if x != y:
            return f"metrics.jsonl row {i} (step {y.get('step')}): {_json_diff(x, y)}"
    return None


def _rows(path: Path) -> list[dict[str, Any]] | str:
    """metrics.jsonl rows without `time` and `*/steps_per_s`; a string naming an unreadable line."""
    rows = []
    for i, line in enumerate(path.read_text().splitlines() if path.is_file() else ["<no metrics.jsonl>"]):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            return f"{path.name} line {i} unreadable: {line[:120]!r}"
        rows.append({k: v for k, v in row.items() if k != "time" and not k.endswith("/steps_per_s")})
    return rows


def compare_eval(ref: Path, got: Path) -> str | None:
    """metrics.json without wall_time_s, then episodes.jsonl as a set of (policy, sim, episode) records."""
    if not (got / "metrics.json").is_file():
        return "metrics.json missing"
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (ref, got))
    a.pop("wall_time_s", None), b.pop("wall_time_s", None)
    if _text(a) != _text(b):
        return f"metrics.json: {_json_diff(a, b)}"
    episodes = []
    for d in (ref, got):
        try:
            records = [json.loads(line) for line in (d / "episodes.jsonl").read_text().splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            return f"{d.parent.name}/{d.name}/episodes.jsonl has an unreadable line ({err})"
        twice = [k for k, n in Counter((r["policy"], r["sim"], r["episode"]) for r in records).items() if n > 1]
        if twice:
            return f"episodes.jsonl: {len(twice)} episodes recorded more than once, e.g. {twice[0]}"
        episodes.append({(r["policy"], r["sim"], r["episode"]): r for r in records})
    if set(episodes[0]) != set(episodes[1]):
        return (f"episodes.jsonl: extra {sorted(set(episodes[1]) - set(episodes[0]))[:3]}, "
                f"missing {sorted(set(episodes[0]) - set(episodes[1]))[:3]}")
    for key in sorted(episodes[0]):
        if _text(episodes[0][key]) != _text(episodes[1][key]):
            return f"episodes.jsonl {key}: {_json_diff(episodes[0][key], episodes[1][key])}"
    return None


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _json_diff(ref: Any, got: Any, at: str = "") -> str:
    """Where two JSON values first differ: 'policies[1].real_success: 0.5 (reference 0.6)'."""
    if isinstance(ref, dict) and isinstance(got, dict):
        for k in sorted(set(ref) | set(got)):
            if k not in ref or k not in got:
                return f"{at}{k}: only in {'the resumed run' if k in got else 'the reference'}"
            if ref[k] != got[k]:
                return _json_diff(ref[k], got[k], f"{at}{k}.")
    if isinstance(ref, list) and isinstance(got, list) and len(ref) == len(got):
        for i, (x, y) in enumerate(zip(ref, got)):
            if x != y:
                return _json_diff(x, y, f"{at.rstrip('.')}[{i}].")
    return f"{at.rstrip('.') or 'value'}: {json.dumps(got)[:160]} (reference {json.dumps(ref)[:160]})"


if __name__ == "__main__":
    sys.exit(main())
