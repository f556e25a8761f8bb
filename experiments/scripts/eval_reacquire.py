"""`wmsuite eval` with PushCubeEgo's probe judge settings changed (how sessions 32 and 33 chose the
tracked judge's `reacquire` and `step_slack` on the zoo's validation split; the probe's own values are
what `wmsuite eval` uses otherwise). The first argument is k (`reacquire`) alone, or comma-separated
`reacquire=K`, `step_slack=METRES|none` settings.

    python experiments/scripts/eval_reacquire.py 1 eval --env wmsuite/PushCubeEgo-v0 --wm assets:wm/pushcubeego \
        --zoo assets:zoo/pushcubeego.json --split validation --videos 0 --out runs/eval-ego-k1
    python experiments/scripts/eval_reacquire.py reacquire=0,step_slack=0.01 eval ...
"""

import dataclasses
import sys

from wmsuite.cli import main
from wmsuite.envs import probes


def settings(text: str) -> dict:
    """'4' or 'reacquire=0,step_slack=0.01' -> the probe fields to replace."""
    if "=" not in text:
        return {"reacquire": int(text)}
    out = {}
    for item in text.split(","):
        key, value = item.split("=")
        out[key] = int(value) if key == "reacquire" else (None if value == "none" else float(value))
    return out


if __name__ == "__main__":  # the real rollouts' worker process re-imports this file
    env_id = "wmsuite/PushCubeEgo-v0"
    probes.PROBES[env_id] = dataclasses.replace(probes.PROBES[env_id], **settings(sys.argv[1]))
    sys.argv = ["wmsuite", *sys.argv[2:]]
    main()
