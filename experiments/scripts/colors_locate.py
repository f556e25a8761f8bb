"""#32's diagnosis: can the policies' image encoder find PushColors' cubes and goals from the 64-px top
frame when it is taught to directly? The encoder (`ImageEncoder`, as a policy builds it) and a linear
head regress the standardised positions in `environment_state` (cubes' x, y, cos/sin 4 yaw; goals'
x, y) from single frames; the figure is R^2 on frames of held-out episodes (1: exact; 0: the mean).

    python experiments/scripts/colors_locate.py --data data/colors_train3k.hdf5 --steps 3000 --out runs/colors-locate

A high R^2 here, against the one-third session 17 saw through the action loss's auxiliary target,
says the encoder can localise and behaviour cloning does not teach it to (so pretrain it on the
positions, then clone); a low one says the encoder itself is the limit.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def frames_and_targets(path: str, episodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 3, S, S) uint8 frames, (N, 16) positions and (N,) episode index of the first `episodes`."""
    from wmsuite.data import load_episodes

    frames, targets, index = [], [], []
    for i, ep in enumerate(load_episodes(path)[:episodes]):
        frames.append(ep.obs["top"].transpose(0, 3, 1, 2))  # (T+1, 3, S, S)
        targets.append(ep.env_state[:, :16])  # positions only; the one-hots are the task, not the scene
        index.append(np.full(len(ep.env_state), i))
    return np.concatenate(frames), np.concatenate(targets).astype(np.float32), np.concatenate(index)


def main() -> None:
    from wmsuite.policies.encoders import ImageEncoder

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/colors_train3k.hdf5")
    ap.add_argument("--episodes", type=int, default=3000, help="episodes read; the last tenth are held out")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--channels", type=int, nargs="+", default=[32, 64, 64])
    ap.add_argument("--pool", default="keypoints", choices=["keypoints", "flatten"])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--out", default="runs/colors-locate")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    frames, targets, index = frames_and_targets(args.data, args.episodes)
    held = index >= int(0.9 * (index.max() + 1))
    mean, std = targets[~held].mean(0), targets[~held].std(0) + 1e-6
    y = torch.from_numpy((targets - mean) / std)
    x = torch.from_numpy(frames)
    train, test = np.flatnonzero(~held), np.flatnonzero(held)[:2048]
    enc = ImageEncoder(tuple(args.channels), 64, x.shape[-1], args.pool)
    model = nn.Sequential(enc, nn.Linear(64, y.shape[1]))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(0)
    curve, start, out = [], time.time(), Path(args.out)

    def r2() -> list[float]:
        model.eval()
        with torch.no_grad():
            pred = torch.cat([model(x[test[i:i + 256]].float() / 127.5 - 1) for i in range(0, len(test), 256)])
        model.train()
        resid = ((pred - y[test]) ** 2).mean(0) / y[test].var(0)
        return (1 - resid).tolist()

    for step in range(1, args.steps + 1):
        b = rng.choice(train, args.batch)
        loss = ((model(x[b].float() / 127.5 - 1) - y[b]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 500 == 0 or step == args.steps:
            per = r2()
            row = {"step": step, "seconds": round(time.time() - start, 1), "loss": loss.item(),
                   "r2_cubes_xy": float(np.mean([per[4 * c + k] for c in range(3) for k in (0, 1)])),
                   "r2_goals_xy": float(np.mean(per[12:16])), "r2_all": float(np.mean(per))}
            curve.append(row)
            print(json.dumps(row), flush=True)
            out.mkdir(parents=True, exist_ok=True)  # after every evaluation: a stopped run keeps its curve
            (out / "metrics.json").write_text(json.dumps({"args": vars(args), "frames_train": int(len(train)),
                                                          "frames_test": int(len(test)), "curve": curve}, indent=2))


if __name__ == "__main__":
    main()
