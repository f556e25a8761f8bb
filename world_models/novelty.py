"""Scene novelty: how unlike everything a world model was trained on a real start frame looks.

A learned simulator is a regression fitted on its training scenes; from a start it has never seen the
like of (a new object colour, a bigger object, a distractor, a moved camera) nothing it imagines is
evidence, however self-consistent the rollout. The round trip and the inverse-dynamics check measure
drift, and a model can drift little in a scene it misreads. This is the check of the start itself,
independent of the model's weights, in the manner of patch-level anomaly detection (PatchCore):

    bank     small pixel patches (patch x patch x channels, every `stride` pixels) cut from frames
             of the training data, reduced to `bank_size` of them by greedy k-centre selection
             (each new member the candidate farthest from those already chosen), so rare but
             in-distribution patches (the object at an edge, the pusher on the goal) stay covered
    score    for a frame, the largest distance of any of its patches to its nearest bank patch
             (root mean squared pixel difference in [0, 1] units): 0 for a frame cut from the
             training data, large where some part of it looks like nothing in the training data

`Calibrator(novelty_limit=...)` (trust.py) turns the score into a gate: a start above the limit gets
trust 0. The bank is saved as safetensors with its settings in the file's metadata (no pickle);
`wmsuite eval --round-trip` reads it as `novelty.safetensors` beside a calibrator that gates on it.

    python -m wmsuite.world_models.novelty --data data/pushcube_mixed_bias.hdf5 --camera top \
        --out assets/wm/pushcube/novelty.safetensors
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from wmsuite.specs import NOVELTY


@dataclass
class NoveltyConfig:
    """How a novelty bank is cut from training frames."""

    patch: int = 8
    """Side of a square pixel patch: large enough to hold an object's outline and its surroundings
    (the size of an object is then part of what is compared), small enough that one odd object
    dominates its patch."""
    stride: int = 4
    """Pixels between neighbouring patches (patches overlap when stride < patch)."""
    bank_size: int = 2048
    """Patches kept in the bank; the cost of a score grows with it."""
    candidates: int = 100_000
    """Patches drawn at random from the training frames for the k-centre selection."""
    frames: int = 4000
    """Training frames drawn at random (from every step of every episode) to cut candidates from."""
    seed: int = 0
    """Seed of the random draws."""

    def __post_init__(self) -> None:
        for name in ("patch", "stride", "bank_size", "candidates", "frames"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.candidates < self.bank_size:
            raise ValueError(f"candidates ({self.candidates}) must be >= bank_size ({self.bank_size})")


def patches(frames: np.ndarray | torch.Tensor, patch: int, stride: int) -> torch.Tensor:
    """frames (N, S, S, C) uint8 -> (N, P, patch*patch*C) float32 in [0, 1], P patches per frame."""
    x = torch.as_tensor(np.asarray(frames))
    if x.ndim != 4 or x.dtype != torch.uint8 or x.shape[1] < patch or x.shape[2] < patch:
        raise ValueError(f"frames must be uint8 (N, S, S, C) with S >= patch ({patch}), got {tuple(x.shape)} "
                         f"{x.dtype}")
    x = x.permute(0, 3, 1, 2).float() / 255.0  # (N, C, S, S)
    return torch.nn.functional.unfold(x, patch, stride=stride).transpose(1, 2).contiguous()  # (N, P, D)


class PatchNovelty:
    """A bank of training patches and the novelty score of new frames (module docstring)."""

    def __init__(self, bank: torch.Tensor, cfg: NoveltyConfig, frame_shape: tuple[int, int, int]) -> None:
        if bank.ndim != 2 or bank.shape[1] != cfg.patch * cfg.patch * frame_shape[2]:
            raise ValueError(f"bank must be (N, {cfg.patch * cfg.patch * frame_shape[2]}) for {cfg.patch}-px patches "
                             f"of {frame_shape} frames, got {tuple(bank.shape)}")
        self.bank, self.cfg, self.frame_shape = bank.float(), cfg, tuple(frame_shape)
        self._bank_sq = (self.bank**2).sum(1)  # (N,)

    @classmethod
    def fit(cls, frames: np.ndarray, cfg: NoveltyConfig | None = None) -> PatchNovelty:
        """frames (N, S, S, C) uint8 of the training data -> the bank (greedy k-centre over a random
        draw of `cfg.candidates` of their patches)."""
        cfg = cfg or NoveltyConfig()
        gen = torch.Generator().manual_seed(cfg.seed)
        pool = patches(frames, cfg.patch, cfg.stride).flatten(0, 1)  # (N*P, D)
        pool = pool[torch.randperm(len(pool), generator=gen)[: cfg.candidates]]
        if len(pool) < cfg.bank_size:
            raise ValueError(f"{len(frames)} frames give {len(pool)} patches, fewer than bank_size {cfg.bank_size}; "
                             "pass more frames or a smaller bank")
        chosen = _k_centres(pool, cfg.bank_size, gen)
        return cls(pool[chosen].clone(), cfg, tuple(frames.shape[1:]))

    @torch.no_grad()
    def score(self, frames: np.ndarray | torch.Tensor, batch: int = 16) -> np.ndarray:
        """frames (B, S, S, C) uint8 -> (B,) the largest nearest-bank distance over each frame's patches."""
        shape = tuple(np.asarray(frames).shape[1:])
        if shape != self.frame_shape:
            raise ValueError(f"this novelty bank was cut from {self.frame_shape} frames, got {shape} frames; "
                             "fit one for this camera and image size")
        out = []
        for i in range(0, len(frames), batch):
            p = patches(frames[i : i + batch], self.cfg.patch, self.cfg.stride)  # (b, P, D)
            d2 = (p**2).sum(-1, keepdim=True) + self._bank_sq - 2 * p @ self.bank.T  # (b, P, N)
            nearest = d2.min(-1).values.clamp_min(0) / p.shape[-1]  # (b, P): mean squared difference
            out.append(nearest.max(-1).values.sqrt())
        return torch.cat(out).numpy() if out else np.zeros(0)

    def save(self, path: str | Path) -> Path:
        """Write the bank as safetensors, its settings in the metadata (no pickle)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"kind": "patch_novelty", "version": "1", "config": json.dumps(asdict(self.cfg)),
                "frame_shape": json.dumps(list(self.frame_shape))}
        save_file({"bank": self.bank.contiguous()}, str(path), metadata=meta)
        return path

    @classmethod
    def load(cls, path: str | Path) -> PatchNovelty:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
        if meta.get("kind") != "patch_novelty" or meta.get("version") != "1":
            raise ValueError(f"{path} is not a version-1 patch novelty bank (kind={meta.get('kind')!r}); write one "
                             "with python -m wmsuite.world_models.novelty")
        cfg = NoveltyConfig(**json.loads(meta["config"]))
        return cls(load_file(str(path))["bank"], cfg, tuple(json.loads(meta["frame_shape"])))


def _k_centres(pool: torch.Tensor, k: int, gen: torch.Generator, dims: int = 64) -> torch.Tensor:
    """Indices of k rows of pool (M, D) chosen greedily, each the farthest from those before it
    (distances in a random projection to `dims` dimensions: nearly the same distances, far cheaper)."""
    proj = pool @ (torch.randn(pool.shape[1], dims, generator=gen) / dims**0.5) if pool.shape[1] > dims else pool
    chosen = torch.empty(k, dtype=torch.long)
    chosen[0] = int(torch.randint(len(pool), (1,), generator=gen))
    dist = ((proj - proj[chosen[0]]) ** 2).sum(1)  # (M,): to the nearest chosen row
    for i in range(1, k):
        chosen[i] = int(dist.argmax())
        dist = torch.minimum(dist, ((proj - proj[chosen[i]]) ** 2).sum(1))
    return chosen


def training_frames(data: str | Path, camera: str, count: int, seed: int = 0) -> np.ndarray:
    """`count` frames (N, S, S, C) uint8 drawn at random from every step of every episode of an HDF5
    file, from `camera` (several cameras side by side as the world model stacks them)."""
    from wmsuite.data import load_episodes
    from wmsuite.world_models.codec import stack_cameras

    episodes = load_episodes(data)
    if not episodes:
        raise ValueError(f"{data} holds no episodes")
    index = [(e, t) for e, ep in enumerate(episodes) for t in range(len(ep.actions) + 1)]
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(index), size=min(count, len(index)), replace=False)
    stacked = {}
    frames = []
    for e, t in (index[i] for i in sorted(pick)):
        if e not in stacked:
            stacked = {e: stack_cameras(episodes[e].obs, camera)}
        frames.append(stacked[e][t])
    return np.stack(frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the world model's training data (HDF5)")
    ap.add_argument("--camera", required=True, help="the world model's camera (its config's world_model.camera)")
    ap.add_argument("--out", required=True, help=f"where to write the bank ({NOVELTY} beside the calibrator)")
    for name, default in asdict(NoveltyConfig()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=f"NoveltyConfig.{name}")
    args = ap.parse_args()
    cfg = NoveltyConfig(**{k: getattr(args, k) for k in asdict(NoveltyConfig())})
    frames = training_frames(args.data, args.camera, cfg.frames, cfg.seed)
    bank = PatchNovelty.fit(frames, cfg)
    print(f"wrote {bank.save(args.out)}: {len(bank.bank)} patches of {cfg.patch} px from {len(frames)} frames")


if __name__ == "__main__":
    main()
