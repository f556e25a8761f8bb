#!/usr/bin/env bash
# The PushTwoCubes world model (#28), assets/wm/pushtwocubes: PushCube's shipped model warm-started
# on PushTwoCubes data (train-wm --init-from), its heads taught on generated frames labelled by the
# two cube detectors, exported, then measured. Stages (STAGE=...; default all, in this order):
#   data      bash experiments/scripts/pushtwocubes_data.sh (train, held-out and validation files)
#   dynamics  STEPS dynamics steps (default 11000) at lr 3e-4 from assets:wm/pushcube, one core,
#             stopped after MINUTES (default 95) with its checkpoint saved
#   heads     the heads pass (1,500 steps, detector labels)
#   export    float16 copy at $DST (default assets/wm/pushtwocubes)
#   fidelity  eval-wm on the held-out file, forward (object error and PSNR by horizon)
#   eval      the zoo's validation split (choices are made here), then its test split (reported)
# Results in $OUT (default runs/wm-2c-figures).
set -euo pipefail
export MUJOCO_GL=egl
RUN=${RUN:-runs/wm-2c}
DST=${DST:-assets/wm/pushtwocubes}
OUT=${OUT:-runs/wm-2c-figures}
STAGE=${STAGE:-all}
DATA=data/pushtwocubes_train.hdf5
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
mkdir -p "$OUT"
if stage data; then bash experiments/scripts/pushtwocubes_data.sh; fi
if stage dynamics; then
  OMP_NUM_THREADS=1 wmsuite train-wm --data $DATA --out "$RUN" --init-from assets:wm/pushcube --stage dynamics \
      --dynamics.steps "${STEPS:-11000}" --dynamics.lr 3e-4 --dynamics.save-every 500 \
      --dynamics.max-minutes "${MINUTES:-95}" --seed 1
fi
if stage heads; then
  OMP_NUM_THREADS=${THREADS:-1} wmsuite train-wm --data $DATA --out "$RUN" --stage heads --model.sampling-steps 3 \
      --heads-train.steps 1500 --heads.labels detector --seed 1
fi
if stage export; then python -m wmsuite.world_models.export "$RUN" "$DST" --sampling-steps 3; fi
if stage fidelity; then
  OMP_NUM_THREADS=2 wmsuite eval-wm --wm "$DST" --data data/pushtwocubes_heldout.hdf5 \
      --horizons 4 8 16 32 64 128 --out "$OUT/eval-wm"
fi
if stage eval; then
  for split in validation test; do
    wmsuite eval --num-envs 16 --env wmsuite/PushTwoCubes-v0 --wm "$DST" --zoo assets:zoo/pushtwocubes.json --split $split \
        --videos 0 --out "$OUT/eval-$split"
  done
fi
