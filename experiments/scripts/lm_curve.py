"""Plot train-lm learning curves (out/eval.jsonl of each run) against wall-clock minutes.

    python experiments/scripts/lm_curve.py runs/lm-d1 runs/lm-d2 --out docs/img/lm_grpo_curve.png

Each run's greedy held-out reward and exact-match accuracy, and the time at which the reward first
reached --bar (printed; None if never).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bar", type=float, default=0.8)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for run in args.runs:
        rows = [json.loads(line) for line in (Path(run) / "eval.jsonl").read_text().splitlines()]
        identity = json.loads((Path(run) / "run.json").read_text())["identity"]
        entropy = identity["grpo"].get("entropy", 0.0)
        digits = f"{Path(run).name} ({identity['task']['digits']}-digit" + (f", entropy {entropy:g})" if entropy else ")")
        minutes = [r["seconds"] / 60 for r in rows]
        ax.plot(minutes, [r["eval_reward"] for r in rows], label=f"{digits}: reward")
        ax.plot(minutes, [r["eval_accuracy"] for r in rows], "--", label=f"{digits}: exact match")
        hit = next((r for r in rows if r["eval_reward"] >= args.bar), None)
        first, best = rows[0], max(rows, key=lambda r: r["eval_reward"])
        print(f"{run}: reward {first['eval_reward']:.3f} at step 0, best {best['eval_reward']:.3f} (accuracy "
              f"{best['eval_accuracy']:.3f}) at step {best['step']} ({best['seconds'] / 60:.1f} min); reward >= "
              f"{args.bar} first at " + (f"step {hit['step']}, {hit['seconds'] / 60:.1f} min" if hit else "never"))
    ax.axhline(args.bar, color="grey", lw=0.8)
    ax.set_xlabel("minutes (wall clock)")
    ax.set_ylabel("greedy, held-out problems")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
