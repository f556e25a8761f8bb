"""Does a trained VLA reproduce the expert's chunks on its own training windows, and does its chunk
depend on the instruction? (#32's first diagnosis.) Prints and writes --out DIR/metrics.json:

    mse_right      unit-space MSE of the policy's chunk (fixed noise) against the expert's chunk
    mse_other      the same with another of the task's instructions in place of the window's
    mse_zero       the MSE of predicting the dataset's mean action (0 in unit space): the floor to beat
    mse_shuffled   the expert's chunk of another random window: what "ignores the observation" scores
    right_vs_other mean squared difference between the chunks for the right and the other instruction

usage: python experiments/scripts/vla_diagnose.py --policy runs/vla-colors --data data/colors_train.hdf5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import default_collate

from wmsuite.data import load_episodes
from wmsuite.data.windows import WindowConfig, WindowDataset
from wmsuite.envs.push_colors import INSTRUCTIONS
from wmsuite.policies import load_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--episodes", type=int, default=60, help="the file's first N episodes")
    parser.add_argument("--windows", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    policy = load_policy(args.policy)
    episodes = load_episodes(args.data, limit=args.episodes)
    data = WindowDataset(episodes, WindowConfig(context=1, chunk=policy.cfg.horizon, future=0), cameras=policy.cfg.cameras)
    rng = np.random.default_rng(args.seed)
    batch = default_collate([data[int(i)] for i in rng.choice(len(data), args.windows, replace=False)])
    obs = policy.batch_obs(batch)
    obs["pixels"] = {cam: img.permute(0, 2, 3, 1) for cam, img in obs["pixels"].items()}  # env layout (B, S, S, 3)
    expert = policy.normalizer.action_to_unit(batch["actions"])  # (B, H, A)
    valid = (~batch["action_is_pad"]).float()[..., None]  # (B, H, 1)
    noise = torch.randn(expert.shape, generator=torch.Generator().manual_seed(args.seed))

    def unit_chunk(tasks: list[str]) -> torch.Tensor:
        return policy.normalizer.action_to_unit(policy.predict_action_chunk({**obs, "task": tasks}, noise=noise))

    def mse(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((((a - b) ** 2) * valid).sum() / (valid.sum() * a.shape[-1]))

    others = [INSTRUCTIONS[(INSTRUCTIONS.index(t) + 1 + int(rng.integers(len(INSTRUCTIONS) - 1))) % len(INSTRUCTIONS)]
              for t in obs["task"]]
    right, other = unit_chunk(list(obs["task"])), unit_chunk(others)
    metrics = {"mse_right": mse(right, expert), "mse_other": mse(other, expert),
               "mse_zero": mse(torch.zeros_like(expert), expert),
               "mse_shuffled": mse(expert[torch.from_numpy(rng.permutation(len(expert)))], expert),
               "right_vs_other": mse(right, other), "windows": args.windows, "policy": args.policy}
    for k, v in metrics.items():
        print(f"{k:>16}: {v:.4f}" if isinstance(v, float) else f"{k:>16}: {v}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
