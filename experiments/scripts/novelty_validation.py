"""Choose the novelty bank's patch and bank size on validation edits, never on the scene variants (#26).

    OMP_NUM_THREADS=1 python experiments/scripts/novelty_validation.py --out runs/novelty-val

The registered scene variants (`wmsuite.envs.push_cube.VARIANTS`) are the test of the trust score's
out-of-distribution AUROC, so nothing is tuned on them. The choice is made here instead, on generic
image edits of the validation file's frames (data/pushcube_val.hdf5, episodes the model never trained
on): a foreign disk of random colour, a colour tint, a 3-pixel shift, a 15% zoom and a channel swap.
For each setting, a bank is fitted on the training file; each edit's AUROC is how well the score
separates the edited start frames from the unedited ones. Also reported: the score's spread on the
unedited frames (their 0.99 quantile is what a gate would be set to). Writes OUT/metrics.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from wmsuite.data import load_episodes
from wmsuite.eval_harness.trust_study import auroc
from wmsuite.logging import write_metrics
from wmsuite.world_models.novelty import NoveltyConfig, PatchNovelty, training_frames


def edits(frames: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """frames (N, S, S, 3) uint8 -> {edit name: edited copies}."""
    rng = np.random.default_rng(seed)
    n, s = frames.shape[:2]
    out = {}
    blob = frames.copy()
    yy, xx = np.mgrid[:s, :s]
    for f in blob:
        r = rng.uniform(2, 4)
        cy, cx = rng.uniform(r, s - r, 2)
        f[(yy - cy) ** 2 + (xx - cx) ** 2 <= r**2] = rng.integers(0, 256, 3)
    out["blob"] = blob
    gain = rng.choice([-1, 1], (n, 1, 1, 3)) * rng.uniform(0.1, 0.25, (n, 1, 1, 3)) + 1
    out["tint"] = np.clip(frames * gain, 0, 255).astype(np.uint8)
    shifted = []
    for f in frames:
        dy, dx = rng.choice([-3, 3], 2)
        shifted.append(np.roll(np.pad(f, ((3, 3), (3, 3), (0, 0)), mode="edge"), (dy, dx), (0, 1))[3:-3, 3:-3])
    out["shift"] = np.stack(shifted)
    idx = np.clip(((np.arange(s) - s / 2) / 1.15 + s / 2).astype(int), 0, s - 1)
    out["zoom"] = frames[:, idx][:, :, idx]
    out["swap"] = frames[..., [2, 0, 1]].copy()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-data", default="data/pushcube_mixed_bias.hdf5")
    ap.add_argument("--val-data", default="data/pushcube_val.hdf5")
    ap.add_argument("--camera", default="top")
    ap.add_argument("--patches", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--bank-sizes", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    starts = np.stack([ep.obs[args.camera][0] for ep in load_episodes(args.val_data)])  # (N, S, S, 3)
    edited = edits(starts, seed=1)
    train = training_frames(args.train_data, args.camera, NoveltyConfig().frames)
    metrics = {"train_data": args.train_data, "val_data": args.val_data, "starts": len(starts), "settings": {}}
    for patch in args.patches:
        for size in args.bank_sizes:
            t0 = time.perf_counter()
            bank = PatchNovelty.fit(train, NoveltyConfig(patch=patch, stride=patch // 2, bank_size=size))
            fit_s = time.perf_counter() - t0
            base = bank.score(starts)
            fig = {"fit_s": fit_s, "clean_q50": float(np.median(base)), "clean_q99": float(np.quantile(base, 0.99)),
                   "auroc": {k: auroc(base, bank.score(v)) for k, v in edited.items()}}
            fig["auroc_mean"], fig["auroc_min"] = float(np.mean(list(fig["auroc"].values()))), min(fig["auroc"].values())
            metrics["settings"][f"patch{patch}_bank{size}"] = fig
            print(f"patch {patch:>2} bank {size:>5}: " + " ".join(f"{k} {v:.3f}" for k, v in fig["auroc"].items())
                  + f" | mean {fig['auroc_mean']:.3f} min {fig['auroc_min']:.3f} (fit {fit_s:.0f} s)", flush=True)
    best = max(metrics["settings"], key=lambda k: (metrics["settings"][k]["auroc_mean"], -int(k.split("bank")[1])))
    metrics["chosen"] = best
    print(f"chosen (highest mean AUROC over the edits, then the smaller bank): {best}")
    print(f"wrote {write_metrics(args.out, metrics)}")


if __name__ == "__main__":
    main()
