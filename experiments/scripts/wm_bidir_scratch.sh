#!/usr/bin/env bash
# A PushCube world model trained in both directions from the first step (#28's shipped bidirectional
# model, #26's round trip): the shipped model's data and settings (clean-frame prediction, `noise`
# objective, motion weights of its last phase), one warm-up + cosine schedule over STEPS, half the
# windows played backward. Fine-tunes of the forward-only model that add the backward direction lost
# its closed-loop verdicts (experiments/world_models_journal.md, session 15); this asks whether
# training both directions from the start keeps them.
# Built in pieces that resume (a rerun of `dynamics` goes on from the run's train state, MINUTES per
# run). Stages (STAGE=...; default all, in this order):
#   dynamics  train-wm --stage codec (the pixel codec's statistics) once, then --stage dynamics up
#             to STEPS
#   heads     the heads pass on real and generated frames (detector labels), as after every phase
#             of the shipped recipe
#   export    float16 copy at $RUN-export (3 sampling steps)
#   fidelity  eval-wm forward and backward on FIDELITY_DATA: the validation file by default
#             (data/pushcube_val.hdf5, where choices are made), the held-out file for reported figures
# Data: bash experiments/scripts/pushcube_data.sh.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
RUN=${RUN:-runs/wm-bidir}
DATA=data/pushcube_mixed_bias.hdf5
STAGE=${STAGE:-all}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
if stage dynamics; then
  [ -e "$RUN/codec/config.json" ] || wmsuite train-wm --data $DATA --out "$RUN" --stage codec --seed ${SEED:-31}
  resume=(); [ -e "$RUN/latest/config.json" ] && resume=(--resume)
  wmsuite train-wm --data $DATA --out "$RUN" "${resume[@]}" --stage dynamics --seed ${SEED:-31} \
      --dynamics.steps ${STEPS:-36000} --dynamics.lr ${LR:-5e-4} --dynamics.save-every 500 \
      --dynamics.max-minutes ${MINUTES:-150} \
      --model.prediction sample --model.objective noise --model.p-backward ${P_BACKWARD:-0.5} \
      --model.context-motion-weight 10
fi
if stage heads; then
  wmsuite train-wm --data $DATA --out "$RUN" --seed ${SEED:-31} --stage heads --model.sampling-steps 3 \
      --heads-train.steps 1500 --heads.labels detector
fi
if stage export; then python -m wmsuite.world_models.export "$RUN" "$RUN-export" --sampling-steps 3; fi
if stage fidelity; then
  wmsuite eval-wm --wm "$RUN-export" --data ${FIDELITY_DATA:-data/pushcube_val.hdf5} --horizons 4 8 16 32 64 \
      --backward --out "$RUN-eval-wm"
fi
