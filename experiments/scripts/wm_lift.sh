#!/usr/bin/env bash
# A world model of robosuite Lift (#29), built in pieces that resume, so that a campaign longer than
# one sitting adds MINUTES of training each time it is run. Needs the sim extra
# (.ci/install-extras.sh sim). Stages (STAGE=...; default all, in this order):
#   data      robomimic-format episodes that `wmsuite collect` records from wmsuite/robosuite-Lift-v0
#             at 64 px: the scripted expert at skill 1.0 / 0.75 / 0.5 / 0.25 / 0.0 (60 episodes
#             each) planning chunks of 4 actions as the learned simulator's protocol does,
#             data/lift_train.hdf5; 10 episodes per skill from other seeds, data/lift_heldout.hdf5.
#             A rerun appends only what a file lacks.
#   hold      75 episodes each at skill 1.0 / 0.75 recorded 16 steps past success (--after-success:
#             the cube held up, which episodes that end on success never show), read together with
#             lift_train.hdf5 from data/lift-hold/ (DATA=data/lift-hold)
#   holdall   the data stage's five collections again (same skills, seeds and counts) recorded 16 steps
#             past success, into data/lift-hold-all/lift_train_hold16.hdf5 (DATA=data/lift-hold-all):
#             each episode is lift_train.hdf5's up to its success, and failures keep their share
#   slow      the expert at skill 1.0 / 0.75 behind ActionScale 0.5 / 0.25 (30 episodes each, 16 steps
#             past success): slow arms, which the experts' own episodes never show, into
#             data/lift-slow/slow_hold16.hdf5, read with the holdall file (DATA=data/lift-slow)
#   dynamics  train-wm on DATA (default data/lift_train.hdf5) from scratch (the codec's statistics,
#             then the dynamics), or with INIT (a world model, e.g. assets:wm/pushcube) warm-started
#             from it as wm_pickplace.sh does (its codec kept, layers of other shapes fresh); lr LR
#             (default 5e-4 from scratch, 3e-4 warm); CAMERA (default agentview) the cameras it sees:
#             agentview+robot0_eye_in_hand with a one-camera INIT adds the wrist camera
#             (world_models/add_camera.py);
#             one core, MINUTES (default 60) per run; a rerun goes on from the run's train state up
#             to STEPS (60000)
#   heads     the heads pass (1,500 steps, real-frame labels: Lift's probe has no frame detector)
#   export    float16 copy at $DST (default assets/wm/lift)
#   fidelity  eval-wm on the held-out file (object error from the state head, PSNR by horizon)
#   zoo       wmsuite eval of $DST on assets/zoo/lift.json's SPLIT (default validation), once per judge
#             (JUDGES, default "head state"), 16 sub-envs; the real episodes play once: later runs take
#             them from REAL_FROM (default: this stage's first run) with --real-from
# Seeds: train 600000.., hold 650000.., held-out 700000.. (apart from the zoo's, 0.. and 100000..).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ENV=wmsuite/robosuite-Lift-v0
RUN=${RUN:-runs/wm-lift}
DST=${DST:-assets/wm/lift}
OUT=${OUT:-runs/wm-lift-figures}
STAGE=${STAGE:-all}
DATA=${DATA:-data/lift_train.hdf5}
CAMERA=${CAMERA:-agentview}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
expert() { echo "wmsuite.envs.robosuite_experts:make_robosuite_expert{\"env_id\": \"$ENV\", \"skill\": $1, \"seed\": $2, \"horizon\": 4}"; }
mkdir -p data "$OUT"
if stage data; then
  for s in 1.0 0.75 0.5 0.25 0.0; do
    sd=$(python -c "print(600000 + int($s * 10000))")
    wmsuite collect --env $ENV --policy "$(expert "$s" "$sd")" --episodes 60 --seed "$sd" --image-size 64 \
        --num-envs 1 --out data/lift_train.hdf5 --append
    sd=$(python -c "print(700000 + int($s * 10000))")
    wmsuite collect --env $ENV --policy "$(expert "$s" "$sd")" --episodes 10 --seed "$sd" --image-size 64 \
        --num-envs 1 --out data/lift_heldout.hdf5 --append
  done
fi
if stage hold; then
  mkdir -p data/lift-hold && ln -sf ../lift_train.hdf5 data/lift-hold/lift_train.hdf5
  for s in 1.0 0.75; do
    sd=$(python -c "print(650000 + int($s * 10000))")
    wmsuite collect --env $ENV --policy "$(expert "$s" "$sd")" --episodes 75 --seed "$sd" --image-size 64 \
        --num-envs 1 --after-success 16 --out data/lift-hold/hold_train.hdf5 --append
  done
fi
if stage holdall; then
  for s in 1.0 0.75 0.5 0.25 0.0; do
    sd=$(python -c "print(600000 + int($s * 10000))")
    wmsuite collect --env $ENV --policy "$(expert "$s" "$sd")" --episodes 60 --seed "$sd" --image-size 64 \
        --num-envs 1 --after-success 16 --out data/lift-hold-all/lift_train_hold16.hdf5 --append
  done
fi
if stage slow; then
  mkdir -p data/lift-slow && ln -sf ../lift-hold-all/lift_train_hold16.hdf5 data/lift-slow/lift_train_hold16.hdf5
  for s in 1.0 0.75; do
    for k in 0.5 0.25; do
      sd=$(python -c "print(680000 + int($s * 10000) + int($k * 1000))")
      wmsuite collect --env $ENV --policy "wmsuite.policies.wrappers:ActionScale{\"inner\": \"$(expert "$s" "$sd" | sed 's/"/\\"/g')\", \"scale\": $k}" \
          --episodes 30 --seed "$sd" --image-size 64 --num-envs 1 --after-success 16 --trust-code \
          --out data/lift-slow/slow_hold16.hdf5 --append
    done
  done
fi
if stage dynamics; then
  common=(--data "$DATA" --out "$RUN" --codec.image-size 64 --model.camera "$CAMERA" --seed 1)
  resume=(); [ -e "$RUN/latest/config.json" ] && resume=(--resume)
  start=(); lr=${LR:-5e-4}
  if [ -n "${INIT:-}" ]; then
    [ ${#resume[@]} -gt 0 ] || start=(--init-from "$INIT")
    lr=${LR:-3e-4}
    common=(--data "$DATA" --out "$RUN" --model.camera "$CAMERA" --seed 1)  # sizes from INIT
  else
    [ -e "$RUN/codec/config.json" ] || wmsuite train-wm "${common[@]}" --stage codec
  fi
  wmsuite train-wm "${common[@]}" "${start[@]}" --stage dynamics --dynamics.steps "${STEPS:-60000}" \
      --dynamics.lr "$lr" --dynamics.save-every 500 --dynamics.max-minutes "${MINUTES:-60}" "${resume[@]}"
fi
if stage heads; then
  wmsuite train-wm --data "$DATA" --out "$RUN" --stage heads --model.sampling-steps 3 \
      --heads-train.steps 1500 --heads.labels real --seed 1
fi
if stage export; then python -m wmsuite.world_models.export "$RUN" "$DST" --sampling-steps 3; fi
if stage fidelity; then
  wmsuite eval-wm --wm "$DST" --data data/lift_heldout.hdf5 --horizons 4 8 16 32 64 --out "$OUT/eval-wm"
fi
if stage zoo; then
  split=${SPLIT:-validation}; real=${REAL_FROM:-}
  for judge in ${JUDGES:-head state}; do
    reuse=(); [ -n "$real" ] && reuse=(--real-from "$real")
    wmsuite eval --env $ENV --wm "$DST" --zoo assets:zoo/lift.json --split "$split" --judge "$judge" \
        --num-envs 16 --videos 0 "${reuse[@]}" --out "$OUT/eval-$split-$judge"
    real=${real:-$OUT/eval-$split-$judge}
  done
fi
