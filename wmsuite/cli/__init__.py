"""`wmsuite` command line: one module per subcommand, imported only when that command runs.

Each module in this package defines `CONFIG` (a dataclass; tyro makes its fields, nested ones
included, the flags) and `run(cfg) -> int | None`, and may define `default(argv) -> CONFIG | None`,
the defaults for this command line (e.g. a resumed run's checkpoint config). `wmsuite bench <what>`
dispatches the same way over `BENCHES`.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from wmsuite.config import parse
from wmsuite.runs import ensure_writable

# name -> (module, one-line help). The one registry of commands; tests sweep it.
COMMANDS: dict[str, tuple[str, str]] = {
    "collect": ("wmsuite.cli.collect", "record episodes of a policy in an environment to robomimic-format HDF5"),
    "train-policy": ("wmsuite.cli.train_policy", "train a flow-matching or diffusion action-chunk policy"),
    "improve": ("wmsuite.cli.improve", "improvement rounds: a policy's rollouts, an update from them, repeat"),
    "eval-policy": ("wmsuite.cli.eval_policy", "evaluate a policy in a real simulator"),
    "train-lm": ("wmsuite.cli.train_lm", "GRPO of a small causal LM on a verifiable task (packed groups)"),
    "train-wm": ("wmsuite.cli.train_wm", "train an action-conditioned video world model"),
    "eval-wm": ("wmsuite.cli.eval_wm", "measure a world model's open-loop fidelity on held-out episodes"),
    "eval": ("wmsuite.cli.eval", "evaluate policies in a real and a learned simulator and compare"),
    "select": ("wmsuite.cli.select", "choose a learned simulator on a zoo's validation split, report on its test split"),
    "zoo": ("wmsuite.cli.zoo", "build the policy zoo of a task (policies whose success spans the whole range)"),
    "convert": ("wmsuite.cli.convert", "convert episodes between HDF5 and LeRobotDataset"),
    "bench": ("wmsuite.cli.bench", "benchmarks: envs, wm, policies, attention, grpo, ray, memory, candidates"),
}

# what -> module for `wmsuite bench <what>`.
BENCHES: dict[str, tuple[str, str]] = {
    "envs": ("wmsuite.cli.bench_envs", "rendered env steps/s and collection throughput"),
    "wm": ("wmsuite.cli.bench_wm", "world-model rollout frames/s next to the real simulator"),
    "policies": ("wmsuite.cli.bench_policies", "action-chunk inference latency per policy and step count"),
    "attention": ("wmsuite.cli.bench_attention", "shared-prefix attention vs replicated SDPA"),
    "grpo": ("wmsuite.cli.bench_grpo", "a GRPO update step, packed groups vs the replicated batch"),
    "ray": ("wmsuite.cli.bench_ray", "rollout throughput with simulator workers on Ray vs the local engine"),
    "candidates": ("wmsuite.cli.bench_candidates", "a VLA's candidate chunks packed after one prefix vs replicated"),
    "memory": ("wmsuite.cli.bench_memory", "spatial-memory retrieval cost after 100 and 1,000 frames of history"),
}


def _usage(prog: str, registry: dict[str, tuple[str, str]]) -> str:
    width = max((len(k) for k in registry), default=0)
    rows = "\n".join(f"  {k:<{width}}  {h}" for k, (_, h) in registry.items())
    return f"usage: {prog} <command> [options]\n\ncommands:\n{rows}\n\n`{prog} <command> --help` lists its options."


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `module:attr` policy specs find the user's modules, as with `python -m`
    argv = list(sys.argv[1:] if argv is None else argv)
    return _dispatch("wmsuite", COMMANDS, argv)


def _dispatch(prog: str, registry: dict[str, tuple[str, str]], argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(prog, registry))
        return 0
    name = argv[0]
    if name not in registry:
        print(f"{prog}: unknown command {name!r}\n\n{_usage(prog, registry)}", file=sys.stderr)
        return 2
    module = importlib.import_module(registry[name][0])
    if hasattr(module, "main"):  # a dispatcher of its own (bench)
        return int(module.main(argv[1:]) or 0)
    default = module.default(argv[1:]) if hasattr(module, "default") else None
    cfg = parse(module.CONFIG, argv[1:], prog=f"{prog} {name}", description=registry[name][1], default=default)
    from wmsuite.cli.common import setup_logging  # here: `wmsuite --help` imports no torch
    from wmsuite.runtime import keep_freed_memory

    setup_logging()
    keep_freed_memory()  # freed activations stay in the heap for the next step (wmsuite/runtime.py)
    try:
        out = str(getattr(cfg, "out", "") or "")
        if out:  # a read-only or misspelled --out fails now, not after the compute
            ensure_writable(Path(out).parent if Path(out).suffix in (".hdf5", ".h5") else out)
        return int(module.run(cfg) or 0)
    except (ValueError, OSError, ImportError) as err:
        if os.environ.get("WMSUITE_DEBUG"):
            raise
        print(f"{prog} {name}: error: {err}\n(set WMSUITE_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2
