"""`wmsuite eval` with PushCubeEgo's probe `reacquire` set to another k (how session 32 chose k on the
zoo's validation split; the probe's own value is what `wmsuite eval` uses otherwise).

    python experiments/scripts/eval_reacquire.py 1 eval --env wmsuite/PushCubeEgo-v0 --wm assets:wm/pushcubeego \
        --zoo assets:zoo/pushcubeego.json --split validation --videos 0 --out runs/eval-ego-k1
"""

import dataclasses
import sys

from wmsuite.cli import main
from wmsuite.envs import probes

if __name__ == "__main__":  # the real rollouts' worker process re-imports this file
    env_id = "wmsuite/PushCubeEgo-v0"
    probes.PROBES[env_id] = dataclasses.replace(probes.PROBES[env_id], reacquire=int(sys.argv[1]))
    sys.argv = ["wmsuite", *sys.argv[2:]]
    main()
