#!/usr/bin/env bash
# The PushColors VLA (#32), assets/policies/vla-pushcolors: a flow-matching VLA (policies/vla/model.py)
# trained by behaviour cloning on expert episodes of all six instructions, then measured on
# instruction following. Stages (STAGE=...; default all, in this order):
#   data    600 expert episodes (skill 1, seeds 900,000..), both pixels and instructions recorded
#   train   20,000 steps, batch 64, one core; resumable. The step count is the one the same data
#           needs with the true state in place of pixels and language (the MLP's validation curve,
#           experiments/policies_journal.md)
#   export  float16 copy at $DST with env_id and other_instruction in its config.json
#   eval    200 episodes from seed 0 told the env's own instruction, then the same 200 told
#           $OTHER (the env still judges its own task), Wilson intervals in $OUT/{right,other}
# Nothing is chosen on the evaluation's seeds: the recipe was fixed before training.
set -euo pipefail
export MUJOCO_GL=egl
RUN=${RUN:-runs/vla-colors}
DST=${DST:-assets/policies/vla-pushcolors}
OUT=${OUT:-runs/vla-colors-figures}
OTHER=${OTHER:-push the purple cube into the white goal}
STAGE=${STAGE:-all}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
if stage data; then
  OMP_NUM_THREADS=1 wmsuite collect --env wmsuite/PushColors-v0 --policy expert --skill 1 --episodes 600 \
      --seed 900000 --out data/colors_train.hdf5 --append
fi
if stage train; then
  RESUME=(); [[ -d "$RUN/latest" ]] && RESUME=(--resume)
  OMP_NUM_THREADS=1 wmsuite train-policy --data data/colors_train.hdf5 --out "$RUN" "${RESUME[@]}" \
      --policy.backbone vla --policy.vla-dim 96 --policy.vla-layers 3 --policy.vla-heads 4 --policy.vla-patch 16 \
      --policy.instruction-bytes 40 --train.steps 20000 --train.batch-size 64 --train.save-every 2500 --threads 1 --seed 3
fi
if stage export; then
  python - "$RUN" "$DST" "$OTHER" <<'PY'
import sys
from wmsuite.policies import load_policy, save_policy
import torch
run, dst, other = sys.argv[1:]
save_policy(load_policy(run), dst, dtype=torch.float16,
            extra={"env_id": "wmsuite/PushColors-v0", "other_instruction": other})
print(f"exported {run} -> {dst}")
PY
fi
if stage eval; then
  OMP_NUM_THREADS=2 wmsuite eval-policy --env wmsuite/PushColors-v0 --policy "$DST" --episodes 200 --seed 0 \
      --videos 4 --out "$OUT/right"
  OMP_NUM_THREADS=2 wmsuite eval-policy --env wmsuite/PushColors-v0 --policy "$DST" --episodes 200 --seed 0 \
      --videos 0 --instruction "$OTHER" --out "$OUT/other"
fi
