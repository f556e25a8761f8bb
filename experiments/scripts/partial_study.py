"""Partial rollouts vs synchronous batches on a long-tailed length mix (#31).

    OMP_NUM_THREADS=1 python experiments/scripts/partial_study.py --out runs/partial-study

1. A cold start: a fresh model (seed 0) fitted by `supervised` to addition with operands of up to
   --digits digits whose lengths are long-tailed (P(k) ~ 1/k^2), so that it ends its answers and its
   response lengths follow the mix (most groups short, a few long). Saved to OUT/cold-start/ and reused.
2. From that start, --updates GRPO updates of --prompts groups x N responses, once with synchronous
   batches (every group of a step finished before the update) and once with partial rollouts
   (prompts x over_provision groups in flight, the update as soon as --prompts are complete, the rest
   carried, recycled tokens importance-weighted). Same seed, same settings otherwise.
3. Printed and written to OUT/metrics.json: finished groups per second of each mode in generation
   (`rollout_groups_per_s`: groups updated on / the thread's CPU time in `generate`) and over whole
   steps (`groups_per_s`: generation + update), their ratios (`partial_rollout_speedup`,
   `partial_speedup`; one thread, CPU time, so other processes do not disturb them), the mean training reward
   over all updates and over the last quarter of each, greedy held-out accuracy at the end; per-update
   rewards in OUT/curves.json, the plot in OUT/partial_rollouts.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from wmsuite.logging import write_metrics
from wmsuite.policies.lm import AdditionConfig, AdditionTask, GRPOConfig, LMConfig, build_lm, load_lm, save_lm
from wmsuite.policies.lm.train import GroupSource, GRPOObjective, evaluate, held_out, supervised


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/partial-study")
    ap.add_argument("--digits", type=int, default=6)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--over-provision", type=float, default=1.5)
    ap.add_argument("--lr", type=float, default=3e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    task = AdditionTask(AdditionConfig(digits=args.digits, lengths="long_tail"))
    max_new = task.cfg.max_answer_tokens
    lm = LMConfig(max_positions=max(64, 3 * args.digits + 8))  # prompt a+b= and the longest answer
    start = out / "cold-start"
    if not (start / "lm.json").exists():
        model = build_lm(lm, task.vocab_size, task.pad_id, task.bos_id, task.eos_id, seed=0)
        t0 = time.time()
        losses = supervised(model, task, args.sft_steps)
        print(f"cold start: {args.sft_steps} supervised steps in {time.time() - t0:.0f}s, loss {losses[-1]:.3f}")
        save_lm(model, start, {"sft_steps": args.sft_steps, "task": vars(task.cfg)})
    problems = held_out(task, 512, 0)
    results, curves = {}, {}
    for mode in ("sync", "partial"):
        model, _ = load_lm(start)
        torch.manual_seed(0)
        cfg = GRPOConfig(prompts=args.prompts, group_size=args.group_size, partial=mode == "partial",
                         over_provision=args.over_provision)
        before = evaluate(model, task, problems, max_new)
        objective = GRPOObjective(model, cfg)
        source = GroupSource(task, model, cfg, max_new, seed=0)(0)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        rewards, lengths, seconds, gen_seconds, groups = [], [], 0.0, 0.0, 0
        for u in range(args.updates):
            t0 = time.thread_time()  # one thread: CPU time, which other processes on the machine do not disturb
            batch = next(source)
            loss, logs = objective(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            seconds += time.thread_time() - t0
            gen_seconds += logs["gen_cpu_seconds"]
            groups += args.prompts
            rewards.append(logs["reward"])
            lengths.append(logs["response_tokens"])
            if u % 10 == 0:
                print(f"{mode} update {u}: reward {logs['reward']:.3f}, tokens {logs['response_tokens']:.2f}, "
                      f"recycled {logs['recycled_share']:.3f}, {groups / seconds:.1f} groups/s", flush=True)
        after = evaluate(model, task, problems, max_new)
        q = max(1, args.updates // 4)
        results[mode] = {"groups_per_s": groups / seconds, "seconds": seconds, "rollout_groups_per_s": groups / gen_seconds,
                         "rollout_seconds": gen_seconds, "mean_reward": float(np.mean(rewards)),
                         "last_quarter_reward": float(np.mean(rewards[-q:])), "eval_before": before, "eval_after": after,
                         "mean_response_tokens": float(np.mean(lengths))}
        curves[mode] = rewards
        print(mode, json.dumps(results[mode]))
    metrics = {"partial_speedup": results["partial"]["groups_per_s"] / results["sync"]["groups_per_s"],
               "partial_rollout_speedup": results["partial"]["rollout_groups_per_s"] / results["sync"]["rollout_groups_per_s"],
               **{f"{m}_{k}": v for m, r in results.items() for k, v in r.items() if not isinstance(v, dict)},
               **{f"{m}_eval_accuracy_after": r["eval_after"]["eval_accuracy"] for m, r in results.items()},
               "eval_accuracy_before": results["sync"]["eval_before"]["eval_accuracy"],
               "settings": {**vars(args), "lm": vars(lm)}}
    print(f"partial rollouts: {metrics['partial_rollout_speedup']:.2f}x the finished groups per second of synchronous "
          f"batches in generation, {metrics['partial_speedup']:.2f}x over whole steps (generation + update)")
    (out / "curves.json").write_text(json.dumps(curves))
    write_metrics(out, metrics)
    try:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        for mode, ys in curves.items():
            ax.plot(ys, label=f"{mode} ({results[mode]['groups_per_s']:.1f} groups/s)")
        ax.set_xlabel("update")
        ax.set_ylabel("training reward")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "partial_rollouts.png", dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
