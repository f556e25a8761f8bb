#!/usr/bin/env bash
# #28: the objectives side by side on the same data with the same compute, as fine-tunes of one
# start (both directions trained, p_backward 0.5): `noise` (the shipped objective) against `cycle`
# (cycle horizon 4 chunks from the first step). Each gets MINUTES of one core (both run at once),
# the same lr, seed and schedule; then eval-wm on the held-out file forward (object error and PSNR
# at 4 to 64 actions: 1x to 16x the one-chunk training rollout) and played backward, and the
# horizon study's table and plot over them ($OUT/horizons).
#   START       the model fine-tuned (default assets/wm/pushcube, trained forward only; the second
#               study started from $OUT of the first: runs/objectives/noise, which has 3,219 steps
#               of both directions)
#   OBJECTIVES  default "noise cycle"; `chained` gets --model.self-forcing $SELF_FORCING (default 0.5)
#   SEED        default 21
#   P_BACKWARD  default 0.5 (0 for forward-only fine-tunes of the forward-only shipped model)
# Needs the data files (bash experiments/scripts/pushcube_data.sh). Results in $OUT/<objective>-*.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=1
OUT=${OUT:-runs/objectives}
START=${START:-assets/wm/pushcube}
MINUTES=${MINUTES:-25}
OBJECTIVES=${OBJECTIVES:-noise cycle}
DATA=data/pushcube_mixed_bias.hdf5
for obj in $OBJECTIVES; do
  if [ ! -d "$OUT/$obj/latest" ]; then
    mkdir -p "$OUT/$obj/latest"
    start=$START; [ -d "$start/latest" ] && start=$start/latest
    cp "$start"/model.safetensors "$start"/config.json "$OUT/$obj/latest/"
  fi
  extra=(); [ "$obj" = chained ] && extra=(--model.self-forcing "${SELF_FORCING:-0.5}")
  wmsuite train-wm --data $DATA --out "$OUT/$obj" --resume --stage dynamics --dynamics.restart-schedule \
      --dynamics.steps 100000 --dynamics.max-minutes "$MINUTES" --dynamics.lr 5e-5 --dynamics.save-every 250 \
      --seed "${SEED:-21}" --model.p-backward "${P_BACKWARD:-0.5}" --model.objective "$obj" --model.cycle-horizon 4 \
      --model.cycle-stage-steps 1 "${extra[@]}" > "$OUT/$obj.log" 2>&1 &
done
wait
runs=()
for obj in $OBJECTIVES; do
  back=(); [ "${P_BACKWARD:-0.5}" != 0 ] && back=(--backward)
  wmsuite eval-wm --wm "$OUT/$obj" --data data/pushcube_heldout.hdf5 --horizons 4 8 16 32 64 "${back[@]}" \
      --out "$OUT/$obj-eval-wm"
  runs+=("$obj=$OUT/$obj-eval-wm")
done
python experiments/scripts/horizon_study.py --length 4 "${runs[@]}" --out "$OUT/horizons"
