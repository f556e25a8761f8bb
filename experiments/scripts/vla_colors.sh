#!/usr/bin/env bash
# The PushColors VLA (#32), assets/policies/vla-pushcolors: a flow-matching VLA (policies/vla/model.py)
# trained by behaviour cloning on expert episodes of all six instructions, then measured on
# instruction following. Stages (STAGE=...; default all, in this order):
#   data    6,000 expert episodes (skill 1; seeds 900,000-902,999, then 906,000-908,999: collect
#           --append starts at --seed plus the episodes the file holds), pixels and instructions
#   train   20,000 steps, batch 64, one core, seed $SEED (default 5), checkpoints every 2,000;
#           resumable. Conv stem (the MLP backbone's stride-2 convs, each cell of the 4 x 4 map a token)
#           and the cube and goal positions as an auxiliary target during training
#           (experiments/policies_journal.md says why, and why 6,000 episodes rather than 3,000)
#   select  checkpoints 10,000..20,000 on the validation seeds 10,000-10,099 (100 episodes each);
#           the highest success is kept (the latest on a tie); then that checkpoint with 1 and 2
#           actions executed per chunk (its own setting is 4) on the same seeds, the highest kept
#           (the most actions per chunk on a tie: fewer calls): $OUT/select.json
#   export  the selected checkpoint as a float16 copy at $DST with the selected n_action_steps,
#           env_id and other_instruction in its config
#   eval    the test seeds 0-199 told the env's own instruction, then the same seeds told $OTHER (the
#           env still judges its own task; metrics.json's other_task counts only the episodes whose own
#           task is not $OTHER), Wilson intervals in $OUT/{right,other}
#   bestofn a chunk critic from one HABC round of the shipped VLA's own rollouts (seeds 100,000..),
#           then that policy on the test seeds with N = 1 and with the best of $N candidates
#           (policies/verifier.py), $OUT/{critic,n1,best$N}
# Nothing is chosen on the test seeds: the recipe (3,000 or 6,000 episodes), the checkpoint and the actions
# per chunk were chosen on the validation seeds.
set -euo pipefail
export MUJOCO_GL=egl
RUN=${RUN:-runs/vla-d6k}
DATA=${DATA:-data/colors_train6k.hdf5}
DST=${DST:-assets/policies/vla-pushcolors}
OUT=${OUT:-runs/vla-d6k-figures}
OTHER=${OTHER:-push the purple cube into the white goal}
N=${N:-16}
STAGE=${STAGE:-all}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
ENV=wmsuite/PushColors-v0
if stage data; then
  for seed in 900000 903000; do  # --append: a rerun adds only what the file lacks
    OMP_NUM_THREADS=1 wmsuite collect --env $ENV --policy expert --skill 1 --episodes 3000 --seed $seed \
        --out "$DATA" --append
  done
fi
if stage train; then
  RESUME=(); [[ -d "$RUN/train_state" ]] && RESUME=(--resume)
  OMP_NUM_THREADS=1 wmsuite train-policy --data "$DATA" --out "$RUN" "${RESUME[@]}" \
      --policy.backbone vla --policy.vla-dim 96 --policy.vla-layers 3 --policy.vla-heads 4 --policy.vla-stem conv \
      --policy.channels 32 64 64 64 --policy.aux-state-weight 1.0 --policy.instruction-bytes 40 \
      --train.steps 20000 --train.batch-size 64 --train.save-every 2000 --threads 1 --seed "${SEED:-5}"
fi
if stage select; then
  for step in 10000 12000 14000 16000 18000 20000; do
    [[ -f "$OUT/val/step_$step/metrics.json" ]] || OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV \
        --policy "$RUN/step_$step" --episodes 100 --seed 10000 --videos 0 --threads 1 --out "$OUT/val/step_$step"
  done
  python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
scores = {int(p.parent.name[5:]): json.loads(p.read_text())["success_rate"]
          for p in out.glob("val/step_*/metrics.json") if p.parent.name[5:].isdigit()}  # not step_S_nK
best = max(scores, key=lambda s: (scores[s], s))
(out / "select.json").write_text(json.dumps({"validation_success": scores, "selected_step": best}, indent=2))
print(f"validation success by step {dict(sorted(scores.items()))}; selected step {best}")
PY
  STEP=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['selected_step'])" "$OUT/select.json")
  for k in 1 2; do
    [[ -f "$OUT/val/step_${STEP}_n$k/metrics.json" ]] || OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV \
        --policy "$RUN/step_$STEP" --n-action-steps $k --episodes 100 --seed 10000 --videos 0 --threads 1 \
        --out "$OUT/val/step_${STEP}_n$k"
  done
  python - "$OUT" "$STEP" <<'PY'
import json, sys
from pathlib import Path
out, step = Path(sys.argv[1]), sys.argv[2]
sel = json.loads((out / "select.json").read_text())
by_n = {4: json.loads((out / f"val/step_{step}/metrics.json").read_text())["success_rate"]}
by_n.update({k: json.loads((out / f"val/step_{step}_n{k}/metrics.json").read_text())["success_rate"] for k in (1, 2)})
sel.update(n_action_steps_success=by_n, n_action_steps=max(by_n, key=lambda k: (by_n[k], k)))
(out / "select.json").write_text(json.dumps(sel, indent=2))
print(f"step {step}: validation success by actions per chunk {dict(sorted(by_n.items()))}; "
      f"selected {sel['n_action_steps']}")
PY
fi
if stage export; then
  python - "$RUN" "$OUT/select.json" "$DST" "$OTHER" <<'PY'
import json, sys
from wmsuite.policies import load_policy, save_policy
import torch
run, select, dst, other = sys.argv[1:]
sel = json.load(open(select))
src = f"{run}/step_{sel['selected_step']}"
policy = load_policy(src)
policy.cfg.n_action_steps = int(sel["n_action_steps"])  # validated again when the copy loads
save_policy(policy, dst, dtype=torch.float16, extra={"env_id": "wmsuite/PushColors-v0", "other_instruction": other})
print(f"exported {src} -> {dst} with n_action_steps {policy.cfg.n_action_steps}")
PY
fi
if stage eval; then
  OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV --policy "$DST" --episodes 200 --seed 0 --threads 1 \
      --videos 4 --out "$OUT/right"
  OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV --policy "$DST" --episodes 200 --seed 0 --threads 1 \
      --videos 0 --instruction "$OTHER" --out "$OUT/other"
fi
if stage bestofn; then
  OMP_NUM_THREADS=1 wmsuite improve --env $ENV --data "$DATA" --init "$DST" --method habc --rounds 1 \
      --episodes 200 --eval-episodes 0 --train.steps 1000 --out "$OUT/critic"
  OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV --policy "$OUT/critic/round_1/policy" --episodes 200 \
      --seed 0 --threads 1 --videos 0 --out "$OUT/n1"
  OMP_NUM_THREADS=1 wmsuite eval-policy --env $ENV --episodes 200 --seed 0 --threads 1 --videos 0 \
      --policy "wmsuite.policies.verifier:Verified{\"inner\": \"$OUT/critic/round_1/policy\", \"candidates\": $N}" \
      --out "$OUT/best$N"
fi
