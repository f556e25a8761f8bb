#!/usr/bin/env bash
# #34's throughput figures on this machine, each pair measured side by side in one run:
#   ddp     train-policy (flow, state only, global batch 64) on 1 process and on 2 gloo processes
#           under torchrun; steps/s from each run's last metrics row (training loop only)
#   ray     `wmsuite bench ray` (local engine vs 1 and 2 Ray workers, interleaved, medians) with the
#           scripted expert (collect's workload) and with the shipped pixel flow policy (eval's real
#           side: inference in the driver)
# Results in $OUT (default runs/scaling): ddp/metrics.json, ray-expert/ and ray-learned/metrics.json.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=1
OUT=${OUT:-runs/scaling}
DATA=${DATA:-data/pickplace_noisy.hdf5}
STEPS=${STEPS:-150}
STAGE=${STAGE:-all}
stage() { [[ $STAGE == all || $STAGE == "$1" ]]; }
mkdir -p "$OUT"
if stage ddp; then
  args=(--data "$DATA" --policy.kind flow --policy.cameras --policy.use-env-state --train.batch-size 64
        --train.steps "$STEPS" --train.save-every "$STEPS" --train.log-every 10 --threads 1 --force-new)
  wmsuite train-policy "${args[@]}" --out "$OUT/ddp-1proc"
  python -m torch.distributed.run --standalone --nproc_per_node 2 -m wmsuite train-policy "${args[@]}" --out "$OUT/ddp-2proc"
  python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from wmsuite.logging import write_metrics
out = Path(sys.argv[1])
rate = {n: [json.loads(l) for l in (out / f"ddp-{n}proc" / "metrics.jsonl").read_text().splitlines()][-1]["policy/steps_per_s"]
        for n in (1, 2)}
m = {"ddp1_steps_per_s": rate[1], "ddp2_steps_per_s": rate[2], "ddp2_over_ddp1": rate[2] / rate[1]}
print(m, "->", write_metrics(out / "ddp", m))
PY
fi
if stage ray; then
  wmsuite bench ray --episodes 16 --num-envs 4 --workers 1 2 --repeats 3 --out "$OUT/ray-expert"
  wmsuite bench ray --policy assets/policies/flow-pushcube-s3000 --episodes 8 --num-envs 4 --workers 1 2 \
      --repeats 3 --out "$OUT/ray-learned"
fi
