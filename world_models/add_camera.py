"""A warm start that adds cameras: a model trained on some cameras, widened to see more.

A step's latents are the cameras' latents stacked on channels, [camera 1's C | camera 2's C | ...]
(codec.py). Every layer that reads or writes whole frames therefore has, on its channel axis, one
block of M C channels per frame: the denoiser's first convolution reads H + K frames (dim 1), its last
writes H (dim 0, weight and bias), the frame heads' first convolution reads one frame, the
inverse-dynamics head's first H + 1. Widening places the source's weights at its own cameras' slots of
each block and zeros at the new cameras' slots, so the widened model computes exactly what the source
did on the source's cameras (the new cameras' inputs are not read, their outputs are 0: the latent
mean) until training teaches it to use and draw them. The codec keeps the source's statistics for the
source's cameras and fits the new cameras' on the data.

train-wm does this when `--init-from` names a model whose camera set is the first part of
`--model.camera`'s (e.g. a one-camera agentview model, `--model.camera agentview+robot0_eye_in_hand`).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from wmsuite.world_models.codec import FrameCodec, make_codec
from wmsuite.world_models.config import camera_names


def added_cameras(source_camera: str, camera: str) -> int:
    """How many cameras `camera` adds after the source's (0: as many as the source's, e.g. the same set,
    or another camera read by the source's weights as they read its own: a plain warm start). Raises
    where `camera` has more cameras and the source's are not its first: the widened layers keep the
    source's at the front."""
    old, new = camera_names(source_camera), camera_names(camera)
    if len(new) == len(old):
        return 0
    if new[: len(old)] != old:
        raise ValueError(f"--model.camera {camera!r} must start with the warm start's cameras {source_camera!r} "
                         "(a warm start keeps its cameras first and adds new ones after them)")
    return len(new) - len(old)


@torch.no_grad()
def widened_codec(source: FrameCodec, cameras: int, frames: torch.Tensor) -> FrameCodec:
    """The source's codec for `cameras` cameras (the source's first): its weights (shared by every
    camera), its latent statistics at its own cameras' channels, statistics fitted on frames
    (N, 3 cameras, S, S) uint8 at the new ones."""
    if cameras <= source.cfg.cameras:
        raise ValueError(f"a widened codec has more cameras than the source's {source.cfg.cameras}, got {cameras}")
    codec = make_codec(replace(source.cfg, cameras=cameras), source.sigma_data)
    weights = {k: v for k, v in source.state_dict().items() if k not in ("latent_mean", "latent_std")}
    codec.load_state_dict(weights, strict=False)
    codec.fit_latent_stats(frames)
    old = source.latent_channels
    codec.latent_mean[:old] = source.latent_mean
    codec.latent_std[:old] = source.latent_std
    return codec


def widen(theirs: torch.Tensor, shape: torch.Size, source_frame: int, frame: int) -> torch.Tensor | None:
    """The source's tensor `theirs` placed into a zero tensor of the widened model's `shape`, or None
    where the two do not differ by whole frames on one channel axis. source_frame / frame: one frame's
    channels in the source and the widened model (its M C). Axis 1 (a convolution's input) or axis 0
    (its output, and a bias): F frames of source_frame channels each become F frames of `frame`."""
    for axis in (1, 0):
        if len(shape) <= axis or theirs.ndim != len(shape):
            continue
        rest_equal = all(a == b for i, (a, b) in enumerate(zip(theirs.shape, shape)) if i != axis)
        n_old, n_new = theirs.shape[axis], shape[axis]
        if not rest_equal or n_old % source_frame or n_new != n_old // source_frame * frame or n_new == n_old:
            continue
        out = theirs.new_zeros(shape)
        frames = n_old // source_frame
        dst = out.movedim(axis, 0).unflatten(0, (frames, frame))  # (F, frame, ...): a view into out
        dst[:, :source_frame] = theirs.movedim(axis, 0).unflatten(0, (frames, source_frame))
        return out
    return None
