#!/usr/bin/env bash
# The PushCubeEgo world models (#33), with spatial memory and without: PushCube's shipped model
# warm-started on PushCubeEgo data for the ego camera (train-wm --init-from; a memory model's extra
# input channels start at zero, so both begin as the same model), with the same data, seed, steps
# and schedule; only --model.memory-frames differs. Run it twice, MEMORY=2 and MEMORY=0 (one core
# each, side by side). Stages (STAGE=...; default all, in this order):
#   data      bash experiments/scripts/pushcubeego_data.sh
#   dynamics  STEPS dynamics steps (default 6000) at lr LR (default 3e-4) into $RUN, resumable (rerun
#             to go on), from INIT (default PushCube's shipped model)
#   revisit   2,000 more steps at lr 2e-4 into $RUN-rv from $RUN/latest, half of every batch drawn from
#             revisit windows (train-wm --revisit-fraction; the no-memory twin gets the same windows)
#   longer    LONGER more steps (default 13000) at lr 2e-4 into INTO (default $RUN-long) from FROM (default
#             $RUN-rv/latest), a quarter of every batch from revisit windows (the shipped pair's last
#             dynamics stage; FROM=$RUN-long/step_13000 INTO=$RUN-long2 goes on from it)
#   select    eval-wm of $RUN and $RUN-rv on data/pushcubeego_val.hdf5 (validation: the pair's stage is
#             chosen here, by the memory model's revisit gain over its twin, the same stage for both)
#   heads     the heads pass on $FINAL (default $RUN-long; 1,500 steps, real labels: the cube detector
#             reads the top camera)
#   export    float16 copy of $FINAL at $DST (default assets/wm/pushcubeego, or assets/wm/pushcubeego-nomem)
#   fidelity  eval-wm on the held-out file: open loop by horizon and the revisit figures (reported)
#   eval      the zoo's validation split (choices are made here), then its test split (reported);
#             SPLITS=validation for the first alone
# MAP=1 adds --model.start-map (the top camera's start frame as one more memory slot; memory models only);
# MAP=unseen also --model.map-unseen (the map only on ground the episode has not shown yet).
# Results in $OUT (default runs/wm-ego<M>-figures).
set -euo pipefail
export MUJOCO_GL=egl
MEMORY=${MEMORY:-2}
NAME=$([[ $MEMORY == 0 ]] && echo pushcubeego-nomem || echo pushcubeego)
RUN=${RUN:-runs/wm-ego$MEMORY}
FINAL=${FINAL:-$RUN-long}
DST=${DST:-assets/wm/$NAME}
OUT=${OUT:-runs/wm-ego$MEMORY-figures}
STAGE=${STAGE:-all}
MAP=${MAP:-0}
DATA=data/pushcubeego_train.hdf5
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
dynamics() {  # dynamics <run> <init> <steps> <lr> <revisit fraction>
  local init=(--init-from "$2")
  [[ -d "$1/latest" ]] && init=(--resume)
  OMP_NUM_THREADS=1 wmsuite train-wm --data $DATA --out "$1" "${init[@]}" --stage dynamics --model.camera ego \
      --model.memory-frames "$MEMORY" $([[ $MAP != 0 ]] && echo --model.start-map) \
      $([[ $MAP == unseen ]] && echo --model.map-unseen) --dynamics.steps "$3" --dynamics.lr "$4" --revisit-fraction "$5" \
      --dynamics.save-every 250 --seed 1
}
mkdir -p "$OUT"
if stage data; then bash experiments/scripts/pushcubeego_data.sh; fi
if stage dynamics; then dynamics "$RUN" "${INIT:-assets:wm/pushcube}" "${STEPS:-6000}" "${LR:-3e-4}" 0; fi
if stage revisit; then dynamics "$RUN-rv" "$RUN/latest" 2000 2e-4 0.5; fi
if stage longer; then dynamics "${INTO:-$RUN-long}" "${FROM:-$RUN-rv/latest}" "${LONGER:-13000}" 2e-4 0.25; fi
if stage select; then
  for run in ${SELECT:-"$RUN" "$RUN-rv"}; do
    OMP_NUM_THREADS=${THREADS:-1} wmsuite eval-wm --wm "$run" --data data/pushcubeego_val.hdf5 \
        --horizons 1 8 16 --out "$OUT/select-$(basename "$run")"
  done
fi
if stage heads; then
  OMP_NUM_THREADS=${THREADS:-1} wmsuite train-wm --data $DATA --out "$FINAL" --stage heads --model.sampling-steps 3 \
      --heads-train.steps 1500 --heads.labels real --seed 1
fi
if stage export; then
  python -m wmsuite.world_models.export "$FINAL" "$DST" --sampling-steps 3 --env-id wmsuite/PushCubeEgo-v0
fi
if stage fidelity; then
  OMP_NUM_THREADS=${THREADS:-2} wmsuite eval-wm --wm "$DST" --data data/pushcubeego_heldout.hdf5 \
      --horizons 4 8 16 32 64 128 --out "$OUT/eval-wm"
fi
if stage eval; then
  for split in ${SPLITS:-validation test}; do
    OMP_NUM_THREADS=${THREADS:-2} wmsuite eval --num-envs 16 --env wmsuite/PushCubeEgo-v0 --wm "$DST" \
        --zoo assets:zoo/pushcubeego.json --split $split --videos 0 --out "$OUT/eval-$split"
  done
fi
