#!/usr/bin/env bash
# #26's figures with the round trip played back by a backward copy of the shipped model: the
# simulator ($WM, default the shipped one) imagines exactly as without the round trip, and the copy
# ($BACK) steps backward only. Stages (STAGE=...; default all, in this order):
#   train    the copy: the shipped model fine-tuned 8,000 steps on backward windows only (to STEPS,
#            default 43000; lr 1.5e-4, no heads pass: the simulator's heads read its frames); about
#            77 min on one core. The shipped copy, assets/wm/pushcube-back, is this run at the
#            checkpoint its model card names (chosen on the validation file); BACK=assets/wm/pushcube-back
#            runs the other stages with it (the study stage then rewrites its calibrator and bank)
#   novelty  the scene-novelty bank of the simulator's training frames ($NOVELTY; world_models/novelty.py)
#   study    open loop on recorded episodes: signals against the truth and the calibrator, fitted
#            on data/pushcube_val.hdf5, measured on data/pushcube_heldout.hdf5, with start and
#            novelty gates, both closing gradually from the RAMP quantile (default 0.9, chosen on the
#            validation variants: ood_study.py --split validation; '' for hard gates); the calibrator
#            and the bank are copied beside the copy, where `wmsuite eval` finds them
#   ood      the scene variants' AUROC (the test split; the validation one with OOD_SPLIT=validation,
#            where RAMPS="0.5 0.75 0.9 0.95" and RAMP='' score candidate ramps on hard-gated trust)
#   eval     closed loop with --round-trip (trust per policy, abstention, policy-level Spearman): the
#            families zoo's $SPLITS (default: test; nothing here is tuned), then the default zoo
#   bench    `bench wm` with the round trip's cost
#   fidelity the copy played backward on the held-out file next to the simulator played forward
#            (eval-wm: object error by horizon)
# Needs the data files: bash experiments/scripts/pushcube_data.sh. Results in $OUT.
set -euo pipefail
export MUJOCO_GL=egl
WM=${WM:-assets/wm/pushcube}
BACK=${BACK:-runs/wm-back-export}
OUT=${OUT:-runs/trust-back}
STAGE=${STAGE:-all}
RAMP=${RAMP-0.9}
NOVELTY=${NOVELTY:-runs/novelty.safetensors}
mkdir -p "$OUT"
if [[ $STAGE == train || $STAGE == all ]]; then
  OUT=${BACK%-export} STEPS=${STEPS:-43000} P_BACKWARD=1.0 LR=1.5e-4 HEADS=0 THREADS=1 \
      bash experiments/scripts/wm_backward_train.sh
fi
if [[ $STAGE == novelty || $STAGE == all ]]; then
  python -m wmsuite.world_models.novelty --data data/pushcube_mixed_bias.hdf5 --camera top --out "$NOVELTY"
fi
if [[ $STAGE == study || $STAGE == all ]]; then
  OMP_NUM_THREADS=2 python experiments/scripts/trust_study.py --wm "$WM" --round-trip-wm "$BACK" \
      --fit-data data/pushcube_val.hdf5 --test-data data/pushcube_heldout.hdf5 --novelty "$NOVELTY" \
      ${RAMP:+--ramp-quantile "$RAMP"} --out "$OUT/study"
  cp "$OUT/study/calibration.json" "$OUT/study/novelty.safetensors" "$BACK/"
fi
if [[ $STAGE == ood || $STAGE == all ]]; then
  OMP_NUM_THREADS=2 python experiments/scripts/ood_study.py --wm "$WM" --round-trip-wm "$BACK" \
      --calibration "$BACK/calibration.json" --split "${OOD_SPLIT:-test}" ${RAMPS:+--ramp-quantiles $RAMPS} \
      --out "$OUT/ood-${OOD_SPLIT:-test}"
fi
if [[ $STAGE == eval || $STAGE == all ]]; then
  RT=(--wm "$WM" --round-trip --round-trip-wm "$BACK" --videos 0)
  for split in ${SPLITS:-test}; do
    wmsuite eval --num-envs 16 "${RT[@]}" --zoo assets:zoo/pushcube-families.json --split $split --out "$OUT/families-$split"
  done
  wmsuite eval --num-envs 16 "${RT[@]}" --out "$OUT/default"
fi
if [[ $STAGE == bench || $STAGE == all ]]; then
  wmsuite bench wm --wm "$WM" --round-trip-wm "$BACK" --out "$OUT/bench"
fi
if [[ $STAGE == fidelity || $STAGE == all ]]; then
  wmsuite eval-wm --wm "$BACK" --backward --data data/pushcube_heldout.hdf5 --out "$OUT/fidelity-back"
  wmsuite eval-wm --wm "$WM" --data data/pushcube_heldout.hdf5 --out "$OUT/fidelity-forward"
fi
