#!/usr/bin/env bash
# #28 on PushTwoCubes: teacher forcing against the cycle curriculum, the same data and minutes, as
# fine-tunes of the shipped model (assets/wm/pushtwocubes), both directions trained. Each run gets
# MINUTES of one core (both at once), then the heads pass, a float16 export, open-loop fidelity on the
# held-out file (forward and backward, 1x to 8x the one-chunk training rollout) and `wmsuite eval` on
# the zoo's $SPLIT split (default test), then the paired comparisons on it: cycle and noise against
# teacher forcing, cycle against noise (experiments/scripts/compare_sims.py).
# Stages (STAGE=...; default all): dynamics, heads, export, fidelity, eval.
# OBJECTIVES: default "teacher cycle" (the comparison #28 names); "noise" is the control that gives
# the cycle run's own joint objective the same minutes without the cycle term.
# Needs bash experiments/scripts/pushtwocubes_data.sh. Results in $OUT/<objective>*.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=1
OUT=${OUT:-runs/p2c-objectives}
START=${START:-assets/wm/pushtwocubes}
MINUTES=${MINUTES:-50}
STAGE=${STAGE:-all}
OBJECTIVES=${OBJECTIVES:-teacher cycle}
SPLIT=${SPLIT:-test}
DATA=data/pushtwocubes_train.hdf5
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
flags() {  # the objective's own settings
  if [ "$1" = cycle ]; then echo "--model.objective cycle --model.cycle-horizon 4 --model.cycle-min-real 1 \
--model.cycle-stage-steps 2500"; else echo "--model.objective $1"; fi
}
if stage dynamics; then
  for obj in $OBJECTIVES; do
    # shellcheck disable=SC2046
    wmsuite train-wm --data $DATA --out "$OUT/$obj" --init-from "$START" --stage dynamics \
        --dynamics.steps 100000 --dynamics.max-minutes "$MINUTES" --dynamics.lr 5e-5 --dynamics.warmup 100 \
        --dynamics.min-lr-ratio 1.0 --dynamics.save-every 250 --seed 41 --model.p-backward 0.5 \
        $(flags $obj) > "$OUT/$obj.log" 2>&1 &
  done
  wait
fi
if stage heads; then
  for obj in $OBJECTIVES; do
    wmsuite train-wm --data $DATA --out "$OUT/$obj" --stage heads --model.sampling-steps 3 \
        --heads-train.steps 1500 --heads.labels detector --seed 41 > "$OUT/$obj-heads.log" 2>&1 &
  done
  wait
fi
if stage export; then
  for obj in $OBJECTIVES; do python -m wmsuite.world_models.export "$OUT/$obj" "$OUT/$obj-export" --sampling-steps 3; done
fi
if stage fidelity; then
  for obj in $OBJECTIVES; do
    wmsuite eval-wm --wm "$OUT/$obj-export" --data data/pushtwocubes_heldout.hdf5 --horizons 4 8 16 32 --backward \
        --out "$OUT/$obj-eval-wm" > "$OUT/$obj-eval-wm.log" 2>&1 &
  done
  wait
  runs=(); for obj in teacher noise cycle; do if [ -d "$OUT/$obj-eval-wm" ]; then runs+=("$obj=$OUT/$obj-eval-wm"); fi; done
  python experiments/scripts/horizon_study.py --length 4 --baseline teacher "${runs[@]}" --out "$OUT/horizons"
fi
if stage eval; then
  for obj in $OBJECTIVES; do
    wmsuite eval --num-envs 16 --env wmsuite/PushTwoCubes-v0 --wm "$OUT/$obj-export" --zoo assets:zoo/pushtwocubes.json \
        --split "$SPLIT" --videos 0 --out "$OUT/$obj-eval-$SPLIT" > "$OUT/$obj-eval-$SPLIT.log" 2>&1 &
  done
  wait
  for pair in teacher:cycle teacher:noise noise:cycle; do
    a=${pair%:*} b=${pair#*:}
    if [ -d "$OUT/$a-eval-$SPLIT" ] && [ -d "$OUT/$b-eval-$SPLIT" ]; then
      python experiments/scripts/compare_sims.py "$OUT/$a-eval-$SPLIT" "$OUT/$b-eval-$SPLIT" --out "$OUT/compare-$a-$b-$SPLIT"
    fi
  done
fi
