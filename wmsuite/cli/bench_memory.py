"""`wmsuite bench memory`: the spatial memory's cost per step after 100 and after 1,000 frames of history.

    wmsuite bench memory --out runs/bench-memory

A pusher wanders over PushCubeEgo's table (a random walk with momentum, so it leaves places and comes
back) for --frames steps, with the riding camera's real depth and pose recorded. A memory
(world_models/memory.py) is fed the first 100 frames, another all of them; each then answers the
same retrievals, from the poses of the walk's first --queries frames (places both memories hold, so
both answer the same question). metrics.json keys:
retrieve_ms_h100 and retrieve_ms_h<frames> (median over --repeats timed passes, per retrieval),
retrieve_cost_ratio (the second over the first: 1.0 is a cost flat in the episode's length),
add_ms (median time to offer a frame), cache_points_h100 / _h<frames> and keyframes_h100 / _h<frames>.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from wmsuite.logging import write_metrics


@dataclass
class BenchMemoryConfig:
    frames: int = 1000
    """Frames of history of the long memory (the short one has 100)."""
    queries: int = 100
    """Retrievals per timed pass (the poses of the walk's first frames; at most 100)."""
    repeats: int = 5
    """Timed passes per figure (median reported)."""
    image_size: int = 64
    """Side of the ego camera's depth image in pixels."""
    seed: int = 0
    """Seed of the layout and of the walk."""
    out: str = ""
    """Directory for metrics.json (nothing written when empty)."""

    def __post_init__(self) -> None:
        if self.frames <= 100 or not 1 <= self.queries <= 100 or self.repeats < 1:
            raise ValueError(f"need frames > 100, 1 <= queries <= 100, repeats >= 1; got {self.frames}, {self.queries}, "
                             f"{self.repeats}")


CONFIG = BenchMemoryConfig


def wander(frames: int, image_size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(depths (T, S, S), poses (T, 4, 4), intrinsics (3, 3)) of the ego camera along a random walk."""
    from wmsuite.envs import make_env

    env = make_env("wmsuite/PushCubeEgo-v0", image_size=image_size, depth=True, cameras=("ego",),
                   terminate_on_success=False, max_episode_steps=frames)
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    depths, poses, heading = [], [], rng.normal(size=2)
    for _ in range(frames):
        depths.append(info["depth"]["ego"])
        poses.append(info["camera_pose"]["ego"])
        heading = 0.9 * heading + 0.3 * rng.normal(size=2)
        _, _, _, _, info = env.step(np.clip(heading, -1, 1).astype(np.float32))
        if np.abs(env.unwrapped.data.qpos[:2]).max() > 0.44:  # turn back from the walls
            heading = -0.5 * np.sign(env.unwrapped.data.qpos[:2]) + 0.2 * rng.normal(size=2)
    intrinsics, _ = env.unwrapped.camera_geometry("ego", image_size)
    env.close()
    return np.array(depths), np.array(poses), intrinsics


def run(cfg: BenchMemoryConfig) -> int:
    from wmsuite.world_models.memory import SpatialMemory

    depths, poses, intrinsics = wander(cfg.frames, cfg.image_size, cfg.seed)
    size = depths.shape[1:]
    metrics: dict[str, float] = {}
    add_times = []
    for history in (100, cfg.frames):
        memory = SpatialMemory()
        for t in range(history):
            start = time.perf_counter()
            memory.add(t, depths[t], intrinsics, poses[t])
            add_times.append(time.perf_counter() - start)
        queries = poses[: cfg.queries]
        passes = []
        for _ in range(cfg.repeats):
            start = time.perf_counter()
            for pose in queries:
                memory.retrieve(intrinsics, pose, size)
            passes.append((time.perf_counter() - start) / len(queries))
        metrics[f"retrieve_ms_h{history}"] = 1e3 * float(np.median(passes))
        metrics[f"cache_points_h{history}"] = len(memory)
        metrics[f"keyframes_h{history}"] = len(memory.keyframes)
    metrics["retrieve_cost_ratio"] = metrics[f"retrieve_ms_h{cfg.frames}"] / metrics["retrieve_ms_h100"]
    metrics["add_ms"] = 1e3 * float(np.median(add_times))
    print(f"{'history':>8} {'retrieve ms':>12} {'cache points':>13} {'keyframes':>10}")
    for history in (100, cfg.frames):
        print(f"{history:>8} {metrics[f'retrieve_ms_h{history}']:>12.3f} {metrics[f'cache_points_h{history}']:>13} "
              f"{metrics[f'keyframes_h{history}']:>10}")
    print(f"retrieval cost at {cfg.frames} frames / at 100: {metrics['retrieve_cost_ratio']:.2f}x; "
          f"adding a frame {metrics['add_ms']:.3f} ms")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0
