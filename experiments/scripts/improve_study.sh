#!/usr/bin/env bash
# BC against AFIL, HABC and both (#30), from one BC start, with equal data and compute: every method
# gets the same rounds of rollouts (same seeds, the expert intervening), the same update steps, and
# the same real-simulator evaluation scenes. Recipes are fixed here before any run (guidance scale 1,
# critic warm-up 200 steps, threshold 0.5, 8 expert steps); nothing is tuned on the figures.
# Stages (STAGE=...; default all): data, bc, bcval, rounds (METHODS, default "bc afil habc both";
#   "autoguide" is afil's control), summary.
#   ENV (default wmsuite/PushCube-v0), SIM (real | wm; WM the world model with SIM=wm), ROUNDS (2),
#   EPISODES (rollouts per round, 200), EVAL (evaluation episodes, 200), STEPS (update steps, 1000),
#   INTERVENE (the intervening policy, expert@1; "none": the policy's own rollouts only, so that its
#   failures, not the expert's corrections, make up the data; runs are then named METHOD-SIM-solo),
#   BC_STEPS (the BC start's training steps, 2000), BC_SEED (its seed, 0), BC_CKPT (the start: latest,
#   or step_N of the BC run),
#   NUM_ENVS (sub-environments of the rounds' rollouts and evaluations, 2; the learned simulator
#   batches its sub-envs, so SIM=wm runs far faster with 8 or more).
#   DEMOS_N (demonstration episodes, 100; a smaller set where BC from 100 leaves no room to improve),
#   BCVAL_STEPS (the BC checkpoints stage bcval scores, e.g. "2000 4000 6000 8000"; default every one),
#   EVAL_ROUNDS (all: every round's policy evaluated; last: only the scored final round, the same figure),
#   CAMERAS (what the real simulator renders: unset, the env's own; "none", nothing: the policies read
#   states only, and robosuite steps several times faster without rendering).
# Stage bcval: the BC run's checkpoints on validation seeds (100 episodes from 950000, apart from the
#   evaluation's), to choose BC_STEPS / BC_CKPT without touching the reported seeds.
# Evaluation seeds start at 900000 (apart from the demonstrations', the rollouts' and every zoo's).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ENV=${ENV:-wmsuite/PushCube-v0}
TASK=$(python -c "print('$ENV'.split('/')[-1].split('-v')[0].lower())")
OUT=${OUT:-runs/improve-$TASK}
SIM=${SIM:-real}
WM=${WM:-assets:wm/pushcube}
STAGE=${STAGE:-all}
INTERVENE=${INTERVENE:-expert@1}
SUFFIX=$([[ $INTERVENE == none ]] && echo "-solo" || true)
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
CAM=()
[[ ${CAMERAS:-} == none ]] && CAM=(--cameras)
[[ -n ${CAMERAS:-} && ${CAMERAS:-} != none ]] && CAM=(--cameras $CAMERAS)
DEMOS_N=${DEMOS_N:-100}
DEMOS=data/${TASK}_demos$([[ $DEMOS_N == 100 ]] || echo "$DEMOS_N").hdf5
mkdir -p data "$OUT"
if stage data; then  # a small, noisy demonstration set: BC alone leaves room to improve
  wmsuite collect --env "$ENV" --policy expert --skill 0.7 --episodes "$DEMOS_N" --seed 810000 --out "$DEMOS" --append "${CAM[@]}"
fi
if stage bc; then
  wmsuite train-policy --data "$DEMOS" --out "$OUT/bc" --policy.kind flow --policy.cameras --policy.use-env-state \
      --policy.horizon 8 --policy.n-action-steps 4 --train.steps "${BC_STEPS:-2000}" --threads 1 --seed "${BC_SEED:-0}" || \
  wmsuite train-policy --data "$DEMOS" --out "$OUT/bc" --policy.kind flow --policy.cameras --policy.use-env-state \
      --policy.horizon 8 --policy.n-action-steps 4 --train.steps "${BC_STEPS:-2000}" --threads 1 --seed "${BC_SEED:-0}" --resume
fi
if stage bcval; then
  cks=("$OUT"/bc/step_*)
  [[ -n ${BCVAL_STEPS:-} ]] && cks=($(for n in $BCVAL_STEPS; do echo "$OUT/bc/step_$n"; done))
  for ck in "${cks[@]}"; do
    wmsuite eval-policy --env "$ENV" --policy "$ck" --episodes 100 --seed 950000 --num-envs 2 --videos 0 --threads 1 \
        "${CAM[@]}" --out "$OUT/bcval/$(basename "$ck")" | tail -1
  done
fi
if stage rounds; then
  for m in ${METHODS:-bc afil habc both}; do
    args=(--env "$ENV" --data "$DEMOS" --init "$OUT/bc/${BC_CKPT:-latest}" --method "$m" --rounds "${ROUNDS:-2}"
          --episodes "${EPISODES:-200}" --eval-episodes "${EVAL:-200}" --eval-seed 900000 --eval-rounds "${EVAL_ROUNDS:-all}" --sim "$SIM"
          --train.steps "${STEPS:-1000}" --num-envs "${NUM_ENVS:-2}" --out "$OUT/$m-$SIM$SUFFIX" "${CAM[@]}")
    [[ $INTERVENE == none ]] || args+=(--intervene "$INTERVENE")
    [[ $SIM == wm ]] && args+=(--wm "$WM")
    wmsuite improve "${args[@]}"
  done
fi
if stage summary; then
  python - "$OUT" "$SIM" "$SUFFIX" <<'EOF'
import json, sys
from pathlib import Path
out, sim, suffix = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
rows = {}
for run in sorted(out.glob(f"*-{sim}{suffix}")):
    rounds = json.loads((run / "metrics.json").read_text())["rounds"]
    rows[run.name] = {r: v for r, v in rounds.items() if "real_success" in v}
print(f"real success (Wilson 95%) by round; rollouts in the {sim} simulator")
for name, rounds in rows.items():
    cells = [f"r{r}: {v['real_success']:.3f} [{v['real_ci'][0]:.3f}, {v['real_ci'][1]:.3f}]" for r, v in sorted(rounds.items())]
    print(f"{name:<14} " + "  ".join(cells))
(out / f"summary-{sim}{suffix}.json").write_text(json.dumps(rows, indent=2))
EOF
fi
