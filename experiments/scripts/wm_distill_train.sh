#!/usr/bin/env bash
# A one-step student of the shipped PushCube world model (#27): `train-wm --stage distill` from the
# shipped export (resumable: rerun to go on), then a heads pass on the student's own frames, as after
# every phase of the shipped recipe, then the export with one sampling step.
# STEPS: distillation steps; LR; STUDENT_STEPS (sampling steps of the student); THREADS; OUT;
# STUDENT: start from this earlier student instead of a copy of the teacher; OWN: the share of
# windows distilled from the student's own imagined contexts (OWN_CHUNKS chunks of them, default 2).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
OUT=${OUT:-runs/wm-fast}
S=${STUDENT_STEPS:-1}
DATA=data/pushcube_mixed_bias.hdf5  # bash experiments/scripts/pushcube_data.sh writes it
resume=""; if [ -d "$OUT/train_state/distill" ]; then resume="--resume"; fi
wmsuite train-wm --data $DATA --out "$OUT" --stage distill $resume --distill.teacher assets:wm/pushcube \
    --distill.steps $S --distill-train.steps ${STEPS:-3000} --distill-train.lr ${LR:-1e-4} --seed ${SEED:-31} \
    ${STUDENT:+--distill.student "$STUDENT"} --distill.own-contexts ${OWN:-0} --distill.own-chunks ${OWN_CHUNKS:-2}
wmsuite train-wm --data $DATA --out "$OUT" --seed ${SEED:-31} --stage heads --model.sampling-steps $S \
    --heads-train.steps 1500 --heads.labels detector
python -m wmsuite.world_models.export "$OUT" "$OUT-export" --sampling-steps $S
