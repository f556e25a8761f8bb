"""What a spatial memory buys: one-chunk predictions on revisit frames against first-visit frames.

For a task whose camera moves with the agent (its probe names the moving camera), every frame of a
held-out episode is labelled from the true geometry (`latent_memory.revisit_labels`: the camera
poses the probe derives from agent_pos, the ground plane's depth): a *revisit* shows mostly a place
the camera left more than `gap` frames earlier, a *first visit* shows almost nothing seen that long
ago.
Then, at every window of every episode, the model gets the K real frames before it as context (and,
for a model with memory, the frames its memory retrieves from the real frames before that context,
exactly as in training) and generates the next chunk from the true actions. Each generated frame is
scored against the real one by the frame's label:

    revisit_psnr / first_visit_psnr              PSNR of the decoded frame (dB)
    revisit_object_error / first_visit_object_error
                                                 |object xy read by the environment_state head - true| (m)
    revisit_relative_object_error / first_visit_relative_object_error
                                                 |(object xy - agent xy, both read by the heads) - the
                                                 true difference| (m), over the frames whose view holds
                                                 the object (its true xy projected into the frame's
                                                 camera). A frame of a camera riding on the agent shows
                                                 where the object is relative to the camera, not on
                                                 the table, so this is what it can say (and what the
                                                 learned simulator reads, world_models/env.py)
    revisit_frames / first_visit_frames          how many frames each figure averages (and
    revisit_in_view_frames / first_visit_in_view_frames   those that show the object)

Teacher-forced context isolates the memory: what the context cannot show, only a memory can supply.
The windows, labels and sampling noise depend on the data and the seed alone, so a model with memory
and one without are scored on the same frames.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from wmsuite.types import Episode
from wmsuite.world_models.codec import stack_cameras
from wmsuite.world_models.data import LatentWindows
from wmsuite.world_models.latent_memory import MemoryGeometry, revisit_labels
from wmsuite.world_models.memory import project
from wmsuite.world_models.model import FORWARD, LatentWorldModel


@torch.no_grad()
def revisit_fidelity(model: LatentWorldModel, episodes: Sequence[Episode], geometry: MemoryGeometry,
                     object_xy: slice, gap: int = 20, batch_size: int = 64, seed: int = 0,
                     steps: int | None = None) -> dict[str, float | int | None]:
    """The figures of the module docstring for `model` on `episodes` (object_xy: the probe's slice of
    environment_state)."""
    cam, k, h = model.cfg.camera, model.cfg.context, model.cfg.chunk
    size = model.codec_cfg.image_size
    latents = [model.codec.encode(torch.from_numpy(np.ascontiguousarray(
        stack_cameras(ep.obs, cam).transpose(0, 3, 1, 2)))) for ep in episodes]
    data = LatentWindows(episodes, latents, k, h, model.cfg.instruction_buckets, model.cfg.memory_frames,
                         geometry if model.cfg.memory_frames else None, size, model.codec.padded_size,
                         model.codec if model.cfg.start_map else None, model.cfg.map_unseen)
    labels = revisit_labels(episodes, geometry, gap)
    in_view = [object_in_view(ep, geometry, object_xy, size) for ep in episodes]
    gen = torch.Generator().manual_seed(seed)
    scores: dict[str, list[float]] = {f"{name}_{figure}": [] for name in ("revisit", "first_visit")
                                      for figure in ("psnr", "object_error", "relative_object_error")}
    for start in range(0, len(data), batch_size):
        idx = list(range(start, min(start + batch_size, len(data))))
        batch = data.batch(idx)
        lat = model.generate(batch["context"], batch["actions"], FORWARD, steps, gen,
                             instruction=batch.get("instruction"), memory=batch.get("memory"))  # (B, H, C, s, s)
        frames = model.codec.decode(lat.flatten(0, 1)).view(len(idx), h, -1, size, size)  # (B, H, 3M, S, S) uint8
        heads = model.predict_heads(lat)
        read = heads["environment_state"][..., object_xy].numpy()  # (B, H, 2)
        relative = read - heads["agent_pos"][..., : read.shape[-1]].numpy()  # (B, H, 2): object less agent
        for row, i in enumerate(idx):
            item = data.windows[i]
            e, t = int(item["episode_index"]), int(item["t"])
            ep, (revisit, first) = episodes[e], labels[e]
            for j in range(h):
                f = t + 1 + j  # the real frame generated frame j stands for
                if bool(item["future_is_pad"][j]) or f > ep.length:
                    continue
                real = torch.from_numpy(np.ascontiguousarray(stack_cameras(ep.obs, cam)[f].transpose(2, 0, 1)))
                value = _psnr(frames[row, j], real)
                error = float(np.linalg.norm(read[row, j] - ep.env_state[f, object_xy]))
                truth = ep.env_state[f, object_xy] - ep.state[f, : relative.shape[-1]]
                relative_error = float(np.linalg.norm(relative[row, j] - truth))
                for name, flag in (("revisit", revisit[f]), ("first_visit", first[f])):
                    if flag:
                        scores[f"{name}_psnr"].append(value)
                        scores[f"{name}_object_error"].append(error)
                        if in_view[e][f]:
                            scores[f"{name}_relative_object_error"].append(relative_error)
    out: dict[str, float | int | None] = {k: float(np.mean(v)) if v else None for k, v in scores.items()}
    for name in ("revisit", "first_visit"):
        out[f"{name}_frames"] = len(scores[f"{name}_psnr"])
        out[f"{name}_in_view_frames"] = len(scores[f"{name}_relative_object_error"])
    out["revisit_gap"] = gap
    return out


def object_in_view(episode: Episode, geometry: MemoryGeometry, object_xy: slice, size: int) -> np.ndarray:
    """(T+1,) bool: the object's true (x, y) on the ground plane lies within the moving camera's view at
    each frame (the camera posed from the frame's agent_pos, as the revisit labels are)."""
    poses = np.asarray(geometry.pose_fn(episode.state), np.float64)  # (T+1, 4, 4)
    xy = np.asarray(episode.env_state[:, object_xy], np.float64)  # (T+1, 2)
    point = np.concatenate([xy, np.full((len(xy), 1), geometry.plane_z)], axis=1)  # (T+1, 3)
    k = geometry.intrinsics(size)
    return np.array([project(p[None], k, pose, (size, size))[2][0] for p, pose in zip(point, poses)])


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of two uint8 images of the same shape."""
    mse = float(((a.float() - b.float()) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)
