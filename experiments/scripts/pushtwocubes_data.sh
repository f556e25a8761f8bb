#!/usr/bin/env bash
# The PushTwoCubes world model's data files (#28), as its model card lists them:
# data/pushtwocubes_train.hdf5 (experts at skill 1.0 / 0.7 / 0.4 / 0.1, then experts with a
# per-episode actuator bias), data/pushtwocubes_heldout.hdf5 and data/pushtwocubes_val.hdf5
# (evaluation, other seeds). Every seed range here is apart from the zoo's episode seeds (0.. and
# 100000.., experiments/scripts/expert_zoo.py --task pushtwocubes). A rerun appends only what a file lacks, so an
# interrupted collection is finished by running this again. THREADS sets OMP_NUM_THREADS.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ENV=wmsuite/PushTwoCubes-v0
mkdir -p data
seed() { python -c "print($1 + int($2 * 10000))"; }
for s in 1.0 0.7 0.4 0.1; do
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 120 --seed "$(seed 300000 $s)" \
      --out data/pushtwocubes_train.hdf5 --append
done
for s in 1.0 0.7 0.4; do
  sd=$(seed 340000 $s)
  wmsuite collect --env $ENV --episodes 60 --seed "$sd" --out data/pushtwocubes_train.hdf5 --append \
      --policy "wmsuite.envs.experts:make_expert{\"env_id\": \"$ENV\", \"skill\": $s, \"bias\": 0.7, \"seed\": $sd}"
done
for s in 1.0 0.6 0.2; do
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 20 --seed "$(seed 400000 $s)" \
      --out data/pushtwocubes_heldout.hdf5 --append
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 20 --seed "$(seed 500000 $s)" \
      --out data/pushtwocubes_val.hdf5 --append
done
