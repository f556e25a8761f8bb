"""How well a PushCubeEgo world model's heads, and the commanded motion, say where things are (#33).

An ego frame shows the pusher at its centre wherever it is on the table, so the frame heads can only
guess the absolute position of the pusher and of the cube; the cube's place relative to the camera
they can read. This prints, over the real frames of a data file (so the heads read true frames):

    agent_error            |heads' agent_pos - true| (m), every frame
    cube_error_in_view     |heads' cube - true| (m), frames whose view holds the cube
    relative_error_in_view |(heads' cube - heads' agent) - (true cube - true agent)| (m), same frames
    dead_reckoned_error    |commanded motion from the episode's real start - true pusher| (m), at every
                           chunk boundary (what WorldModelEnv uses with the probe's moving_camera_advance)

each as median and 90th percentile, and writes them to --out DIR/metrics.json.

    python experiments/scripts/ego_readings.py --wm assets/wm/pushcubeego --data data/pushcubeego_val.hdf5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from wmsuite.cli.common import memory_geometry
from wmsuite.data.hdf5 import read_episodes
from wmsuite.envs.probes import get_probe
from wmsuite.eval_harness.revisits import object_in_view
from wmsuite.world_models import load_world_model

ENV_ID = "wmsuite/PushCubeEgo-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wm", default="assets/wm/pushcubeego")
    parser.add_argument("--data", default="data/pushcubeego_val.hdf5")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    probe, model = get_probe(ENV_ID), load_world_model(args.wm)
    geometry, size, h = memory_geometry(ENV_ID, model.cfg.camera), model.codec_cfg.image_size, model.cfg.chunk
    figures: dict[str, list[np.ndarray]] = {k: [] for k in ("agent_error", "cube_error_in_view",
                                                           "relative_error_in_view", "dead_reckoned_error")}
    for ep in read_episodes(args.data):
        with torch.no_grad():
            lat = model.codec.encode(torch.from_numpy(np.ascontiguousarray(ep.obs[model.cfg.camera].transpose(0, 3, 1, 2))))
            heads = model.predict_heads(lat[None])  # each (1, T+1, ...)
        agent, cube = heads["agent_pos"][0, :, :2].numpy(), heads["environment_state"][0, :, probe.object_xy].numpy()
        true_agent, true_cube = ep.state[:, :2], ep.env_state[:, probe.object_xy]
        seen = object_in_view(ep, geometry, probe.object_xy, size)
        figures["agent_error"].append(np.linalg.norm(agent - true_agent, axis=1))
        figures["cube_error_in_view"].append(np.linalg.norm(cube - true_cube, axis=1)[seen])
        figures["relative_error_in_view"].append(np.linalg.norm((cube - agent) - (true_cube - true_agent), axis=1)[seen])
        pos, errors = true_agent[0].astype(np.float64), []
        for t in range(0, ep.length - h + 1, h):  # chunk by chunk from the real start, as the learned simulator
            pos = probe.moving_camera_advance(pos, ep.actions[t : t + h])
            errors.append(np.linalg.norm(pos - true_agent[t + h]))
        figures["dead_reckoned_error"].append(np.asarray(errors))
    out = {}
    for name, parts in figures.items():
        values = np.concatenate(parts)
        out[name] = {"median": float(np.median(values)), "p90": float(np.percentile(values, 90)), "n": len(values)}
        print(f"{name:24s} median {out[name]['median']:.4f} m  p90 {out[name]['p90']:.4f} m  ({len(values)})")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps({"wm": args.wm, "data": args.data, **out}, indent=1))
        print(f"wrote {Path(args.out) / 'metrics.json'}")


if __name__ == "__main__":
    main()
