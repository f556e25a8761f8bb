#!/usr/bin/env bash
# Fine-tune the shipped PushCube world model on the v2 data mix (experts + play,
# experiments/scripts/wm_data_v2.sh), retrain its heads, export to $OUT-export; resumable (rerun to go on).
# STEPS: the dynamics step to reach (the shipped model is at 35,000); LR: peak learning rate of the
# fresh warm-up + cosine; MOVING: share of each batch drawn from windows where the cube moves (keeps
# real pushes in every batch while the play data teaches where it does not); THREADS; OUT.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-2}
OUT=${OUT:-runs/wm-v2}
DATA=data/pushcube_play_mix.hdf5
SEED=${SEED:-11}
if [ ! -d "$OUT/latest" ]; then mkdir -p "$OUT/latest" && cp assets/wm/pushcube/* "$OUT/latest/"; fi
wmsuite train-wm --data $DATA --out "$OUT" --resume --stage dynamics --dynamics.restart-schedule \
    --dynamics.steps ${STEPS:-38000} --dynamics.lr ${LR:-1.5e-4} --dynamics.save-every 500 --seed $SEED \
    --moving-fraction ${MOVING:-0.0}
wmsuite train-wm --data $DATA --out "$OUT" --stage heads --model.sampling-steps 3 --heads-train.steps 1500 \
    --heads.labels detector --seed $SEED --moving-fraction ${MOVING:-0.0}
python -m wmsuite.world_models.export "$OUT" "$OUT-export" --sampling-steps 3
