#!/usr/bin/env bash
# Candidates for the PushCube learned simulator on the families zoo: each WM x judge on the
# validation split and on the test split, then `wmsuite select` (choice on validation only).
# Usage: WM=assets:wm/pushcube NAME=v1 [SPLITS="validation test"] bash experiments/scripts/select_wm_v2.sh [judges...]
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ZOO=assets:zoo/pushcube-families.json
judges=("$@"); [ ${#judges[@]} -gt 0 ] || judges=(head state)
for judge in "${judges[@]}"; do
  for split in ${SPLITS:-validation test}; do
    wmsuite eval --num-envs 16 --zoo $ZOO --split $split --wm "$WM" --judge $judge --videos 0 \
        --out runs/select/$NAME-$judge-$split
  done
done
