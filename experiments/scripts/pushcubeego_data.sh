#!/usr/bin/env bash
# The PushCubeEgo world models' data files (#33): data/pushcubeego_train.hdf5 (experts at skill 1.0 /
# 0.7 / 0.4 / 0.1, then experts with a per-episode actuator bias, whose wanderings leave places and
# come back at other times than the experts' look-then-push), data/pushcubeego_heldout.hdf5 and
# data/pushcubeego_val.hdf5 (evaluation, other seeds). Both cameras (the world models
# generate the ego camera; the top one is kept for videos and the cube detector). Every seed range is apart from the zoo's episode seeds (0.. and 100000..,
# experiments/scripts/expert_zoo.py --task pushcubeego). A rerun appends only what a file lacks, so an
# interrupted collection is finished by running this again. THREADS sets OMP_NUM_THREADS.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
ENV=wmsuite/PushCubeEgo-v0
mkdir -p data
seed() { python -c "print($1 + int($2 * 10000))"; }
for s in 1.0 0.7 0.4 0.1; do
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 120 --seed "$(seed 600000 $s)" \
      --out data/pushcubeego_train.hdf5 --append
done
for s in 1.0 0.7 0.4; do
  sd=$(seed 640000 $s)
  wmsuite collect --env $ENV --episodes 60 --seed "$sd" --out data/pushcubeego_train.hdf5 --append \
      --policy "wmsuite.envs.experts:make_expert{\"env_id\": \"$ENV\", \"skill\": $s, \"bias\": 0.7, \"seed\": $sd}"
done
for s in 1.0 0.6 0.2; do
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 20 --seed "$(seed 700000 $s)" \
      --out data/pushcubeego_heldout.hdf5 --append
  wmsuite collect --env $ENV --policy expert --skill $s --episodes 20 --seed "$(seed 800000 $s)" \
      --out data/pushcubeego_val.hdf5 --append
done
