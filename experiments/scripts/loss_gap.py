"""Is the world model overfitting? Its diffusion loss on training windows next to held-out ones.

    python experiments/scripts/loss_gap.py --wm assets/wm/pushcube --data data/pushcube_wm2.hdf5:120 \
        data/pushcube_heldout.hdf5 data/pushcube_val.hdf5

Each file (`path[:N]` keeps its first N episodes) is scored on the same 40 batches' worth of noise
draws (64 random windows each), with plain squared error (both motion weights set to 0). The docs'
measurement (experiments/world_models_journal.md, "Six thousand more steps did not move it"): 0.0273 on 120 training
episodes, 0.0233 held-out, 0.0241 validation, so the shipped model is not overfitting.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from wmsuite.data import load_episodes
from wmsuite.world_models import load_world_model
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames


@torch.no_grad()
def diffusion_loss(model, path: str, batches: int = 40, batch_size: int = 64) -> tuple[float, float, int]:
    """(mean, standard error, windows) of the diffusion loss over `batches` random batches of `path`."""
    file, _, limit = path.partition(":")
    episodes = load_episodes(file, limit=int(limit) if limit else None)
    latents = encode_episodes(model.codec, episode_frames(episodes, model.cfg.camera))
    data = LatentWindows(episodes, latents, model.cfg.context, model.cfg.chunk)
    torch.manual_seed(0)  # the same noise levels and draws for every file
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(batches):
        idx = torch.randint(len(data), (batch_size,), generator=gen).tolist()
        losses.append(model.loss(data.batch(idx))[1]["diffusion"])
    return float(np.mean(losses)), float(np.std(losses) / np.sqrt(batches)), len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm", default="assets/wm/pushcube", help="world-model checkpoint directory")
    parser.add_argument("--data", nargs="+", required=True, help="episode files, each as path or path:N")
    args = parser.parse_args()
    model = load_world_model(args.wm).eval()
    model.cfg.motion_weight = model.cfg.context_motion_weight = 0.0  # plain squared error
    for path in args.data:
        mean, err, windows = diffusion_loss(model, path)
        print(f"{path}: {windows} windows, diffusion loss {mean:.4f} +- {err:.4f}")


if __name__ == "__main__":
    main()
