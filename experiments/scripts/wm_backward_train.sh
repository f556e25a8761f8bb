#!/usr/bin/env bash
# A PushCube world model that also steps backward (#26's round-trip error needs one): the shipped
# model fine-tuned on its own data with half the windows played backward (`--model.p-backward 0.5`),
# fresh warm-up + cosine; resumable (rerun to go on), exported to $OUT-export. The heads are kept:
# the codec is lossless and unchanged, so they read the same latents as before.
# STEPS: the dynamics step to reach (the shipped model is at 35,000); LR; THREADS; OUT.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
OUT=${OUT:-runs/wm-bwd}
DATA=data/pushcube_mixed_bias.hdf5  # regenerate with the commands in assets/wm/pushcube/README.md
if [ ! -d "$OUT/latest" ]; then mkdir -p "$OUT/latest" && cp assets/wm/pushcube/* "$OUT/latest/"; fi
wmsuite train-wm --data $DATA --out "$OUT" --resume --stage dynamics --dynamics.restart-schedule \
    --dynamics.steps ${STEPS:-37000} --dynamics.lr ${LR:-1.5e-4} --dynamics.save-every 250 --seed ${SEED:-21} \
    --model.p-backward 0.5
python -m wmsuite.world_models.export "$OUT" "$OUT-export" --sampling-steps 3
