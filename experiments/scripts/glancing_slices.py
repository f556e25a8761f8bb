"""Training data with glancing pushes emphasised: the episodes, plus copies of a 12-step slice around
every chunk where the real cube moves more than 1 cm and its centre starts 3 cm or more off the line the
pusher moves along (the glancing chunks of `wmsuite eval-wm`'s contact check, except that the check
also asks the pusher to move 5 mm: 677 chunks here, 668 there). Choosing windows because their real
cube moved favours "moved" as the loss's motion weight did (experiments/world_models_journal.md, "Motion-weighted loss").

    python experiments/scripts/glancing_slices.py --data data/pushcube_wm2.hdf5 --out data/pushcube_wm_glance.hdf5

The docs' measurement (experiments/world_models_journal.md, "Glancing-contact slices"): 677 glancing chunks in the
1,260 training episodes, 2 copies each, 3,000 fine-tuning steps; the model's glancing ratio did not move.
The output is written in one atomic step and an existing file is never replaced.
"""

from __future__ import annotations

import numpy as np
from _episode_files import parse_args

from wmsuite.data import load_episodes
from wmsuite.data.hdf5 import write_episodes
from wmsuite.eval_harness.fidelity import lateral_offset
from wmsuite.types import Episode


def glancing_slices(ep: Episode, chunk: int = 4, before: int = 4, after: int = 8) -> list[Episode]:
    """Slices [t - before, t + after] of `ep` around each glancing chunk starting at t (every `chunk` steps)."""
    starts = np.arange(0, ep.length - chunk + 1, chunk)
    cube0, cube1 = ep.env_state[starts, :2], ep.env_state[starts + chunk, :2]
    lateral = lateral_offset(cube0, ep.state[starts, :2], ep.state[starts + chunk, :2])
    glancing = (np.linalg.norm(cube1 - cube0, axis=1) > 0.01) & (lateral >= 0.03)
    out = []
    for t in starts[glancing]:
        a, b = max(0, t - before), min(ep.length, t + after)
        ends = bool(ep.success and b == ep.length)  # the slice keeps the episode's success only if it ends there
        out.append(Episode(obs={c: f[a : b + 1] for c, f in ep.obs.items()}, state=ep.state[a : b + 1],
                           actions=ep.actions[a:b], rewards=ep.rewards[a:b], success=ends, terminated=ends,
                           truncated=not ends, env_state=ep.env_state[a : b + 1], intervention=ep.intervention[a:b],
                           sim_states=ep.sim_states[a : b + 1], task=ep.task,
                           meta={**ep.meta, "glancing_slice": [int(a), int(b)]}))
    return out


def main() -> None:
    args = parse_args(__doc__, "copies of every glancing slice", 2)
    episodes = load_episodes(args.data)
    slices = [s for ep in episodes for s in glancing_slices(ep)]
    write_episodes(args.out, list(episodes) + slices * args.copies)
    print(f"wrote {args.out}: {len(episodes)} episodes + {args.copies} x {len(slices)} glancing slices "
          f"({args.copies * sum(s.length for s in slices)} steps)")


if __name__ == "__main__":
    main()
