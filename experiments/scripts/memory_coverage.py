"""How much of what a training window predicts its spatial memory can supply that its context cannot.

    python experiments/scripts/memory_coverage.py --data data/pushcubeego_train.hdf5

For every window of every episode (newest context frame t, chunk t+1..t+H) it draws, on the latent
grid of the camera the memory is drawn in (the chunk's end, `MemoryGeometry.chunk_pose`), where the
ground plane is seen by:

    context   the newest context frame t (the older context frames see less of a view ahead)
    memory    any of the M frames `episode_retrievals` offers window t, exactly as training does
    memory_only   by memory but not by the context: the cells only a memory can fill

and prints the fraction of each over all windows, over the windows whose chunk ends on a revisit
frame (eval-wm's label: mostly ground last seen more than `--gap` frames earlier) and the share of
windows with any memory at all. A memory that adds little on revisit windows is one training cannot
teach the model to read.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from wmsuite.cli.common import memory_geometry
from wmsuite.data.hdf5 import read_episodes
from wmsuite.world_models.data import _chunks
from wmsuite.world_models.latent_memory import episode_retrievals, reproject, revisit_labels


def coverage(poses: np.ndarray, views: np.ndarray, retrieved: np.ndarray, geometry, image_size: int,
             grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window t (T+1,): fraction of the view's cells seen by frame t, and by its memory but not by t."""
    n, m = len(poses), retrieved.shape[1]
    dummy = torch.zeros(n, m + 1, 1, grid, grid)
    idx = np.concatenate([np.arange(n)[:, None], retrieved], 1)  # slot 0: the newest context frame
    src = torch.from_numpy(poses[np.clip(idx, 0, None)] * (idx >= 0)[..., None, None])
    mask = reproject(dummy, src, torch.from_numpy(views), geometry, image_size)[:, :, -1] > 0  # (T+1, M+1, g, g)
    ctx, mem = mask[:, 0], mask[:, 1:].any(1)
    return ctx.float().mean((1, 2)).numpy(), (mem & ~ctx).float().mean((1, 2)).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="episodes of a task with a moving camera")
    parser.add_argument("--env-id", default="wmsuite/PushCubeEgo-v0", help="the task (its probe's camera)")
    parser.add_argument("--camera", default="ego", help="the moving camera")
    parser.add_argument("--context", type=int, default=4, help="context frames K (the world model's)")
    parser.add_argument("--chunk", type=int, default=4, help="chunk H (the world model's)")
    parser.add_argument("--memory-frames", type=int, default=2, help="memory frames M")
    parser.add_argument("--image-size", type=int, default=64, help="frame side the retrieval runs at")
    parser.add_argument("--grid", type=int, default=16, help="cells per side of the coverage grid")
    parser.add_argument("--gap", type=int, default=20, help="revisit gap (eval-wm's)")
    parser.add_argument("--limit", type=int, default=None, help="first N episodes only")
    args = parser.parse_args()
    geometry = memory_geometry(args.env_id, args.camera)
    episodes = read_episodes(args.data, indices=None if args.limit is None else range(args.limit), cameras=[])
    labels = revisit_labels(episodes, geometry, gap=args.gap)
    ctx_all, only_all, revisit_end, any_mem = [], [], [], []
    for ep, (revisit, _) in zip(episodes, labels):
        poses = np.asarray(geometry.pose_fn(ep.state), np.float64)
        views = geometry.chunk_pose(ep.state, _chunks(ep.actions, args.chunk))
        retrieved = episode_retrievals(poses, geometry, args.image_size, args.context, args.memory_frames, views=views)
        ctx, only = coverage(poses, views, retrieved, geometry, args.image_size, args.grid)
        ctx_all.append(ctx)
        only_all.append(only)
        t = np.arange(len(poses))
        revisit_end.append(revisit[np.minimum(t + args.chunk, len(poses) - 1)])
        any_mem.append((retrieved >= 0).any(1))
    ctx, only = np.concatenate(ctx_all), np.concatenate(only_all)
    rev, mem = np.concatenate(revisit_end), np.concatenate(any_mem)
    print(f"{len(episodes)} episodes, {len(ctx)} windows; {rev.mean():.3f} of them end on a revisit frame, "
          f"{mem.mean():.3f} retrieve any memory")
    for name, sel in (("all windows", np.ones_like(rev)), ("revisit windows", rev), ("other windows", ~rev)):
        print(f"{name:16s} view seen by the newest context frame {ctx[sel].mean():.3f}, "
              f"by memory only {only[sel].mean():.3f} (median {np.median(only[sel]):.3f}, "
              f"windows with >= 10% memory-only cells {(only[sel] >= 0.1).mean():.3f})")


if __name__ == "__main__":
    main()
