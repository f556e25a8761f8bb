"""Fuzz campaign: the targets of tests/core/test_fuzz_inputs.py, each with many more examples.

    OMP_NUM_THREADS=1 MUJOCO_GL=egl python experiments/scripts/fuzz_campaign.py --out runs/fuzz

Every target of the test module's registry (our HDF5 store, the Robomimic and LIBERO layouts, the
LeRobot sidecar and image column, the checkpoint loader and saver) draws `--examples` malformed
inputs and reads each back; here the HDF5 targets also flip bytes of the file. An input is
*uncaught* when reading it raised anything but the tool's own error (a library's OSError, KeyError,
SafetensorError...) or returned something invalid. Each input is read in a forked child process, so
that a crash or a hang of the HDF5 C library (which no Python code can catch) is counted as such
instead of ending the campaign. Nothing stops or shrinks as a test would. Prints a table and writes
DIR/metrics.json:

    inputs       inputs generated, all targets
    per_target   {name: {"inputs", "uncaught", "crashes", "hangs", "seconds"}}
    uncaught     inputs whose reading raised a foreign error or returned something invalid (0 is the goal)
    crashes      inputs whose reading killed the child process (a signal: a native library's crash)
    hangs        inputs whose reading had not ended after --timeout seconds
    examples     the first few of all three: target, kind, exception type, message, the input drawn
    seconds      wall time of the whole campaign
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the targets live in the tests package

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.core.test_fuzz_inputs import targets  # noqa: E402

TARGETS = targets(flips=True)
KEEP_EXAMPLES = 20


def run_target(name: str, examples: int, rng_seed: int, timeout: float, found: list[dict[str, Any]]
               ) -> dict[str, Any]:
    """Draw `examples` inputs for one target; append what broke the promise to `found`."""
    target = TARGETS[name]
    stats = {"inputs": 0, "uncaught": 0, "crashes": 0, "hangs": 0}

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def fuzz(plan: Any) -> None:
        stats["inputs"] += 1
        outcome = in_child(target.check, plan, timeout)
        if outcome is not None:  # recorded, not raised: the campaign counts them all
            kind, error, message = outcome
            stats[kind] += 1
            if len(found) < KEEP_EXAMPLES:
                found.append({"target": name, "kind": kind, "type": error, "message": message,
                              "input": repr(plan)[:400]})

    start = time.perf_counter()
    fuzz()
    return {**stats, "seconds": round(time.perf_counter() - start, 1)}


def in_child(check: Any, plan: Any, timeout: float) -> tuple[str, str, str] | None:
    """Run `check(plan)` in a forked child: None when it kept the promise, else (kind, error type, message)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what was raised, if anything, and leave without cleaning up
        os.close(read_end)
        answer = b""
        try:
            check(plan)
        except BaseException as err:
            answer = f"{type(err).__name__}\t{' '.join(str(err).split())[:400]}".encode()
        os.write(write_end, answer)
        os._exit(0)
    os.close(write_end)
    try:
        if not select.select([read_end], [], [], timeout)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hangs", "Timeout", f"no answer after {timeout} s"
        answer = b"".join(iter(lambda: os.read(read_end, 1 << 16), b""))
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "crashes", signal.Signals(os.WTERMSIG(status)).name, "the child process was killed by a signal"
    if answer:
        error, message = answer.decode(errors="replace").split("\t", 1)
        return "uncaught", error, message
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=1500,
                        help="inputs drawn per target (the default gives over 10,000 in all)")
    parser.add_argument("--targets", nargs="*", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed: the same seed draws the same inputs")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one input may take before it is a hang")
    parser.add_argument("--out", type=Path, help="folder for metrics.json")
    args = parser.parse_args()
    if args.examples < 1:
        parser.error(f"--examples must be >= 1, got {args.examples}")
    logging.getLogger("wmsuite.data").setLevel(logging.ERROR)  # drop_bad's per-demo warnings, by the thousand

    start = time.perf_counter()
    found: list[dict[str, Any]] = []
    per_target = {}
    columns = ("inputs", "uncaught", "crashes", "hangs", "seconds")
    print(f"{'target':<18}" + "".join(f"{c:>10}" for c in columns))
    for name in args.targets:
        per_target[name] = run_target(name, args.examples, args.seed, args.timeout, found)
        print(f"{name:<18}" + "".join(f"{per_target[name][c]:>10}" for c in columns), flush=True)
    metrics: dict[str, Any] = {c: sum(r[c] for r in per_target.values()) for c in columns[:-1]}
    metrics.update(per_target=per_target, examples=found, seconds=round(time.perf_counter() - start, 1))
    print(f"{'all':<18}" + "".join(f"{metrics[c]:>10}" for c in columns))
    for example in found[:8]:
        print(f"  {example['target']} {example['kind']}: {example['type']}: {example['message'][:160]}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return 1 if metrics["uncaught"] else 0


if __name__ == "__main__":
    sys.exit(main())
