#!/usr/bin/env bash
# Fine-tune the shipped PushCube world model on the v2 data mix (experts + play,
# experiments/scripts/wm_data_v2.sh), then retrain its heads; resumable (rerun to go on).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-2}
OUT=${OUT:-runs/wm-v2}
DATA=data/pushcube_play_mix.hdf5
if [ ! -d "$OUT/latest" ]; then mkdir -p "$OUT/latest" && cp assets/wm/pushcube/* "$OUT/latest/"; fi
wmsuite train-wm --data $DATA --out "$OUT" --resume --stage dynamics --dynamics.restart-schedule \
    --dynamics.steps ${STEPS:-38000} --dynamics.lr 1.5e-4 --dynamics.save-every 500 --seed 11
wmsuite train-wm --data $DATA --out "$OUT" --stage heads --model.sampling-steps 3 --heads-train.steps 1500 \
    --heads.labels detector
