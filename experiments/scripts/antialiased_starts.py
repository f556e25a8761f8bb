"""Would anti-aliased frames tell the frame-identical starts apart? Counted on the held-out episodes.

    MUJOCO_GL=egl python experiments/scripts/antialiased_starts.py --data data/pushcube_heldout.hdf5

PushCube's scene turns MuJoCo's multisampling off (`<quality offsamples="0"/>`, for speed), so each
64 px pixel shows one sample of the scene: nudging the cube by up to 2 mm and 4 degrees often renders
the very same frame, and the outcome of the episode's actions then depends on what no frame shows
(`wmsuite eval-wm --replays`; experiments/world_models_journal.md). This script renders every start of `eval-wm
--replays`' nudge grid twice, as the scene is and with `--offsamples` samples per pixel (MuJoCo's own
default is 4), and counts per episode the nudged starts whose frame equals the unnudged start's bit
for bit. The docs' measurement, 60 held-out episodes, 342 nudges each: as the scene is, 1,353 identical
(a median of 19 per episode, in 57 episodes); with 4 samples, 27 (in 18 episodes), and a nudged frame
differs from the episode's by a median 86 of 255 at its most different pixel (5th percentile 44).
"""

from __future__ import annotations

import argparse
from dataclasses import fields

import mujoco
import numpy as np
from tqdm.auto import tqdm

from wmsuite.cli.eval_wm import EvalWMConfig
from wmsuite.data import load_episodes
from wmsuite.envs import make_env
from wmsuite.envs.probes import get_probe
from wmsuite.eval_harness.replays import nudge_grid, place_nudged

PROBE = get_probe("wmsuite/PushCube-v0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="PushCube episodes recorded by `wmsuite collect`")
    parser.add_argument("--offsamples", type=int, default=4, help="multisamples per pixel to compare (default 4)")
    parser.add_argument("--camera", default="top")
    args = parser.parse_args()
    if args.offsamples < 1:
        parser.error(f"--offsamples must be >= 1 to compare with the scene's 0, got {args.offsamples}")
    grid = {f.name: f.default_factory() for f in fields(EvalWMConfig) if f.name.startswith("replay_")}
    nudges = nudge_grid(grid["replay_shifts_mm"], grid["replay_turns_deg"])  # `eval-wm --replays`' grid
    episodes = load_episodes(args.data)
    env = make_env("wmsuite/PushCube-v0", cameras=()).unwrapped
    env.reset(seed=0)
    size = episodes[0].obs[args.camera].shape[1]
    scene_samples = env.model.vis.quality.offsamples
    renderers = {}  # samples per pixel -> a renderer whose GL context was made with that many
    for samples in (scene_samples, args.offsamples):
        env.model.vis.quality.offsamples = samples
        renderers[samples] = mujoco.Renderer(env.model, size, size)
    env.model.vis.quality.offsamples = scene_samples

    def render(samples: int) -> np.ndarray:
        renderers[samples].update_scene(env.data, camera=args.camera)
        return renderers[samples].render()

    identical = {samples: [] for samples in renderers}
    largest_difference = []
    for ep in tqdm(episodes, desc="episodes", unit="ep"):
        place_nudged(env, ep.sim_states[0], (0.0, 0.0, 0.0), PROBE)
        start = {samples: render(samples) for samples in renderers}
        if not np.array_equal(start[scene_samples], ep.obs[args.camera][0]):
            raise SystemExit("the episode's own start does not render its recorded frame: recorded with another "
                             "scene or camera")
        counts = dict.fromkeys(renderers, 0)
        for nudge in nudges:
            place_nudged(env, ep.sim_states[0], nudge, PROBE)
            for samples in renderers:
                frame = render(samples)
                counts[samples] += bool(np.array_equal(frame, start[samples]))
                if samples == args.offsamples:
                    largest_difference.append(int(np.abs(frame.astype(int) - start[samples]).max()))
        for samples, n in counts.items():
            identical[samples].append(n)
    for r in renderers.values():
        r.close()
    env.close()

    def summary(samples: int) -> str:
        counts = identical[samples]
        return (f"offsamples {samples}: median {np.median(counts):g} per episode, {sum(counts)} in all, in "
                f"{np.count_nonzero(counts)} episodes")

    print(f"{len(episodes)} episodes, {len(nudges)} nudged starts each; starts whose frame is bit-identical to "
          f"the episode's: {summary(scene_samples)} (the scene as it is); {summary(args.offsamples)} (largest "
          f"pixel difference from the episode's frame there: median {np.median(largest_difference):g}, 5th "
          f"percentile {np.percentile(largest_difference, 5):g} of 255)")


if __name__ == "__main__":
    main()
