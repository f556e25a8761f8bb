#!/usr/bin/env bash
# #27's figures for a distilled student ($WM, default runs/wm-fast-export) next to its teacher:
# open-loop fidelity on the validation and held-out files, closed loop on the families zoo's
# validation split (float32 and bfloat16: the precision is chosen there) and, for the chosen one
# ($PRECISION), its test split and the default `wmsuite eval` timed in parallel and sequentially; `bench wm`.
# Nothing else should run meanwhile (the timings assume the two cores are free). Results in $OUT.
set -euo pipefail
export MUJOCO_GL=egl
WM=${WM:-runs/wm-fast-export}
OUT=${OUT:-runs/fast}
STAGE=${STAGE:-all}  # validation | test | default | bench | all
mkdir -p "$OUT"
FAM=(--zoo assets:zoo/pushcube-families.json --judge tracked --videos 0)
if [[ $STAGE == validation || $STAGE == all ]]; then
  for p in float32 bfloat16; do
    wmsuite eval-wm --wm "$WM" --precision $p --data data/pushcube_val.hdf5 --out "$OUT/eval-wm-val-$p"
    wmsuite eval --num-envs 16 "${FAM[@]}" --split validation --wm "$WM" --precision $p --out "$OUT/val-$p"
  done
fi
if [[ $STAGE == test || $STAGE == all ]]; then
  wmsuite eval-wm --wm "$WM" --precision ${PRECISION:-float32} --data data/pushcube_heldout.hdf5 --out "$OUT/eval-wm-heldout"
  wmsuite eval --num-envs 16 "${FAM[@]}" --split test --wm "$WM" --precision ${PRECISION:-float32} --out "$OUT/test"
fi
if [[ $STAGE == default || $STAGE == all ]]; then
  P=(--wm "$WM" --precision ${PRECISION:-float32})
  /usr/bin/time -v wmsuite eval "${P[@]}" --out "$OUT/default-parallel" 2> "$OUT/default-parallel.time"
  /usr/bin/time -v wmsuite eval "${P[@]}" --no-parallel --out "$OUT/default-sequential" 2> "$OUT/default-sequential.time"
fi
if [[ $STAGE == bench || $STAGE == all ]]; then
  for p in float32 bfloat16; do
    wmsuite bench wm --wm "$WM" --precision $p --out "$OUT/bench-$p"
  done
  wmsuite bench wm --wm assets/wm/pushcube --out "$OUT/bench-teacher"
fi
