#!/usr/bin/env bash
# A PushCube world model that also steps backward (#26's round-trip error needs one): the shipped
# model fine-tuned on its own data with half the windows played backward (`--model.p-backward 0.5`),
# fresh warm-up + cosine; resumable (rerun to go on); then a heads pass on real and generated frames
# of the new dynamics, as after every phase of the shipped recipe (without it the heads read the new
# dynamics' frames as the old ones were drawn); exported to $OUT-export.
# STEPS: the dynamics step to reach (the shipped model is at 35,000); LR; P_BACKWARD; THREADS; OUT;
# HEADS=0 skips the heads pass (a backward-only copy used by the round trip alone reads its frames
# with the forward simulator's heads, so its own are left as they were).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
OUT=${OUT:-runs/wm-bwd}
DATA=data/pushcube_mixed_bias.hdf5  # bash experiments/scripts/pushcube_data.sh writes it
if [ ! -d "$OUT/latest" ]; then mkdir -p "$OUT/latest" && cp assets/wm/pushcube/* "$OUT/latest/"; fi
wmsuite train-wm --data $DATA --out "$OUT" --resume --stage dynamics --dynamics.restart-schedule \
    --dynamics.steps ${STEPS:-37000} --dynamics.lr ${LR:-1.5e-4} --dynamics.save-every 250 --seed ${SEED:-21} \
    --model.p-backward ${P_BACKWARD:-0.5}
[ "${HEADS:-1}" = 0 ] || wmsuite train-wm --data $DATA --out "$OUT" --seed ${SEED:-21} --stage heads --model.sampling-steps 3 \
    --heads-train.steps 1500 --heads.labels detector
python -m wmsuite.world_models.export "$OUT" "$OUT-export" --sampling-steps 3
