#!/usr/bin/env bash
# A world model of wmsuite/PickPlace-v0 (#29): PushCube's shipped model warm-started on PickPlace
# episodes (front camera, 64 px; the action layers, of another size, start fresh), built in pieces
# that resume. Stages (STAGE=...; default all, in this order):
#   data      `wmsuite collect` of the scripted expert planning chunks of 4 actions, as the learned
#             simulator's protocol does: skill 1.0 / 0.75 / 0.5 / 0.25 / 0.0 (100 episodes each),
#             then skill 1.0 / 0.5 with a per-episode actuator bias 0.5 (60 each), data/pickplace_train.hdf5;
#             20 episodes per skill 1.0 / 0.5 / 0.0 from other seeds, data/pickplace_heldout.hdf5.
#             A rerun appends only what a file lacks.
#   learned   episodes of learned policies, so that the model sees how they fail: a flow and a
#             diffusion state policy trained with another seed (2) than the zoo's on the expert's
#             successes (data/pickplace_noisy.hdf5), 100 episodes of each of four checkpoints (flow
#             300 / 1,000 / 3,000, diffusion 2,000: none of them a zoo policy) into
#             $LEARNED_DIR/learned.hdf5 (default data/pickplace), the expert file linked beside it as
#             $LEARNED_DIR/expert.hdf5 (train-wm reads a directory's files together; DATA=$LEARNED_DIR
#             then trains on both); LEARNED_EPISODES per checkpoint (default 100) sets the learned
#             episodes' share of the windows
#   dynamics  train-wm --init-from $INIT (default assets:wm/pushcube), lr $LR (default 3e-4), one core,
#             MINUTES (default 80) per run; a rerun goes on from the run's train state up to STEPS
#             (default 11000)
#   heads     the heads pass (1,500 steps, real-frame labels)
#   export    float16 copy at $DST (default assets/wm/pickplace)
#   fidelity  eval-wm on the held-out file (object error from the state head, PSNR by horizon)
#   eval      the zoo's validation split with the head and the state judge, the judge of lower mean
#             |error| there chosen, then the test split with it (reported)
# Seeds: train 800000.., held-out 900000.. (apart from the zoo's episode seeds, 1000..).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ENV=wmsuite/PickPlace-v0
RUN=${RUN:-runs/wm-pickplace}
DST=${DST:-assets/wm/pickplace}
OUT=${OUT:-runs/wm-pickplace-figures}
STAGE=${STAGE:-all}
DATA=${DATA:-data/pickplace_train.hdf5}
INIT=${INIT:-assets:wm/pushcube}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
seed() { python -c "print($1 + int($2 * 10000))"; }
expert() { echo "wmsuite.envs.experts:make_expert{\"env_id\": \"$ENV\", \"skill\": $1, \"seed\": $2, \"horizon\": 4, \"bias\": ${3:-0}}"; }
collect() { wmsuite collect --env $ENV --policy "$(expert "$1" "$3" "${5:-0}")" --episodes "$2" --seed "$3" \
    --image-size 64 --num-envs 1 --out "$4" --append; }
mkdir -p data "$OUT"
if stage data; then
  for s in 1.0 0.75 0.5 0.25 0.0; do collect $s 100 "$(seed 800000 $s)" data/pickplace_train.hdf5; done
  for s in 1.0 0.5; do collect $s 60 "$(seed 850000 $s)" data/pickplace_train.hdf5 0.5; done
  for s in 1.0 0.5 0.0; do collect $s 20 "$(seed 900000 $s)" data/pickplace_heldout.hdf5; done
fi
if stage learned; then
  [ -e data/pickplace_noisy.hdf5 ] || wmsuite collect --env $ENV --policy expert --skill 0.9 --episodes 300 \
      --seed 860000 --image-size 64 --out data/pickplace_noisy.hdf5
  S=(--policy.cameras --policy.use-env-state --threads 1 --seed 2 --train.save-every 100)
  [ -e runs/pp-flow-seed2/step_3000 ] || wmsuite train-policy --data data/pickplace_noisy.hdf5 \
      --out runs/pp-flow-seed2 --policy.kind flow "${S[@]}" --train.steps 3000
  [ -e runs/pp-diffusion-seed2/step_2000 ] || wmsuite train-policy --data data/pickplace_noisy.hdf5 \
      --out runs/pp-diffusion-seed2 --policy.kind diffusion --policy.prediction-type epsilon "${S[@]}" --train.steps 2000
  LD=${LEARNED_DIR:-data/pickplace}
  mkdir -p "$LD"
  [ -e "$LD/expert.hdf5" ] || ln -s "$(realpath --relative-to="$LD" data/pickplace_train.hdf5)" "$LD/expert.hdf5"
  i=0
  for ck in pp-flow-seed2/step_300 pp-flow-seed2/step_1000 pp-flow-seed2/step_3000 pp-diffusion-seed2/step_2000; do
    wmsuite collect --env $ENV --policy "runs/$ck" --episodes "${LEARNED_EPISODES:-100}" --seed $((870000 + 1000 * i)) \
        --image-size 64 --num-envs 1 --out "$LD/learned.hdf5" --append
    i=$((i + 1))
  done
fi
if stage dynamics; then
  resume=(); [ -e "$RUN/latest/config.json" ] && resume=(--resume)
  init=(--init-from "$INIT"); [ ${#resume[@]} -gt 0 ] && init=()
  wmsuite train-wm --data "$DATA" --out "$RUN" "${init[@]}" --model.camera front --stage dynamics \
      --dynamics.steps "${STEPS:-11000}" --dynamics.lr "${LR:-3e-4}" --dynamics.save-every 500 \
      --dynamics.max-minutes "${MINUTES:-80}" --seed 1 "${resume[@]}"
fi
if stage heads; then
  wmsuite train-wm --data "$DATA" --out "$RUN" --stage heads --model.sampling-steps 3 \
      --heads-train.steps 1500 --heads.labels real --seed 1
fi
if stage export; then python -m wmsuite.world_models.export "$RUN" "$DST" --sampling-steps 3; fi
if stage fidelity; then
  wmsuite eval-wm --wm "$DST" --data data/pickplace_heldout.hdf5 --horizons 4 8 16 32 64 --out "$OUT/eval-wm"
fi
if stage eval; then  # the judge is chosen on the validation split by mean |error|, then reported on test
  for judge in head state; do
    wmsuite eval --num-envs 16 --env $ENV --wm "$DST" --zoo assets:zoo/pickplace.json --split validation --judge $judge \
        --videos 0 --out "$OUT/eval-validation-$judge"
  done
  judge=$(python -c "import json; e = {j: json.load(open(f'$OUT/eval-validation-{j}/metrics.json'))['mean_abs_error']
for j in ('head', 'state')}; print(min(e, key=e.get))")
  wmsuite eval --num-envs 16 --env $ENV --wm "$DST" --zoo assets:zoo/pickplace.json --split test --judge "$judge" --videos 0 \
      --out "$OUT/eval-test"
fi
