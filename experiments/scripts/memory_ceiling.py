"""What a perfect spatial memory could add to a world model's revisit PSNR: the ceiling of #33's figure.

    python experiments/scripts/memory_ceiling.py --wm runs/wm-ego0-rv-export --data data/pushcubeego_heldout.hdf5

Generates one chunk at every window of the held-out episodes from real context, as eval-wm's revisit
figures do, and scores each generated frame labelled revisit twice: as generated, and with every
pixel a memory could supply replaced by the real frame's. A pixel can be supplied when its point of
the ground plane is not seen by the newest context frame but was seen by some frame before the
context (the frames a memory holds). The gap between the two PSNRs bounds what any memory can buy
this generator on those frames; the share of such pixels says how much of a frame that is. Run it
on the model without memory (the baseline a memory is measured against).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from wmsuite.cli.common import memory_geometry
from wmsuite.data.hdf5 import read_episodes
from wmsuite.eval_harness.fidelity import psnr
from wmsuite.world_models import load_world_model
from wmsuite.world_models.codec import stack_cameras
from wmsuite.world_models.data import LatentWindows
from wmsuite.world_models.latent_memory import reproject, revisit_labels
from wmsuite.world_models.model import FORWARD


def seen_by(src: np.ndarray, dst: np.ndarray, geometry, size: int, grid: int) -> torch.Tensor:
    """src (N, 4, 4) cameras, dst (4, 4) one camera -> (size, size) bool: where dst sees ground any src saw."""
    if not len(src):
        return torch.zeros(size, size, dtype=torch.bool)
    dummy = torch.zeros(1, len(src), 1, grid, grid)
    mask = reproject(dummy, torch.from_numpy(src)[None], torch.from_numpy(dst)[None], geometry, size)[0, :, -1]
    return F.interpolate(mask.amax(0)[None, None], size=(size, size), mode="nearest")[0, 0] > 0


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wm", required=True, help="world model of the moving camera (exported)")
    parser.add_argument("--data", required=True, help="held-out episodes")
    parser.add_argument("--env-id", default="wmsuite/PushCubeEgo-v0")
    parser.add_argument("--gap", type=int, default=20, help="revisit gap (eval-wm's)")
    parser.add_argument("--grid", type=int, default=32, help="cells per side the coverage is computed on")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_world_model(args.wm)
    cam, k, h, size = model.cfg.camera, model.cfg.context, model.cfg.chunk, model.codec_cfg.image_size
    geometry = memory_geometry(args.env_id, cam)
    episodes = read_episodes(args.data, cameras=[cam])
    frames = [torch.from_numpy(np.ascontiguousarray(stack_cameras(ep.obs, cam).transpose(0, 3, 1, 2))) for ep in episodes]
    latents = [model.codec.encode(f) for f in frames]
    data = LatentWindows(episodes, latents, k, h, model.cfg.instruction_buckets, model.cfg.memory_frames,
                         geometry if model.cfg.memory_frames else None, size, model.codec.padded_size)
    labels = revisit_labels(episodes, geometry, args.gap)
    poses = [np.asarray(geometry.pose_fn(ep.state), np.float64) for ep in episodes]
    gen = torch.Generator().manual_seed(args.seed)
    plain, oracle, share = [], [], []
    for start in range(0, len(data), 64):
        idx = list(range(start, min(start + 64, len(data))))
        batch = data.batch(idx)
        lat = model.generate(batch["context"], batch["actions"], FORWARD, None, gen,
                             instruction=batch.get("instruction"), memory=batch.get("memory"))
        out = model.codec.decode(lat.flatten(0, 1)).view(len(idx), h, -1, size, size)  # (B, H, 3, S, S) uint8
        for row, i in enumerate(idx):
            item = data.windows[i]
            e, t = int(item["episode_index"]), int(item["t"])
            for j in range(h):
                f = t + 1 + j
                if bool(item["future_is_pad"][j]) or f > episodes[e].length or not labels[e][0][f]:
                    continue
                real, made = frames[e][f], out[row, j]
                old = seen_by(poses[e][: max(t - k + 1, 0)], poses[e][f], geometry, size, args.grid)
                ctx = seen_by(poses[e][t : t + 1], poses[e][f], geometry, size, args.grid)
                fill = old & ~ctx  # (S, S)
                pair = torch.stack([made, torch.where(fill, real, made), real]).permute(0, 2, 3, 1).numpy()
                plain_f, oracle_f = psnr(pair[:2], pair[2:].repeat(2, 0))  # (2,) dB
                plain.append(float(plain_f))
                oracle.append(float(oracle_f))
                share.append(float(fill.float().mean()))
    print(f"{len(plain)} revisit frames: PSNR as generated {np.mean(plain):.2f} dB, with a perfect memory "
          f"{np.mean(oracle):.2f} dB (+{np.mean(oracle) - np.mean(plain):.2f}); pixels a memory can supply: "
          f"{np.mean(share):.3f} of a frame (median {np.median(share):.3f})")


if __name__ == "__main__":
    main()
