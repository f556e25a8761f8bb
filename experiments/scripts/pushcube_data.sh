#!/usr/bin/env bash
# The shipped PushCube world model's data files, as its model card lists them (assets/wm/pushcube/
# README.md): data/pushcube_mixed_bias.hdf5 (training), data/pushcube_heldout.hdf5 and
# data/pushcube_val.hdf5 (evaluation, other seeds). A rerun appends only what a file lacks, so an
# interrupted collection is finished by running this again. THREADS sets OMP_NUM_THREADS.
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=${THREADS:-1}
mkdir -p data
for s in 1.0 0.7 0.4 0.1; do
  wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill $s --episodes 60 \
      --seed $(python -c "print(int($s*1000))") --out data/pushcube_mixed.hdf5 --append
  wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill $s --episodes 180 \
      --seed $(python -c "print(20000+int($s*1000))") --out data/pushcube_mixed.hdf5 --append
done
[ -f data/pushcube_mixed_bias.hdf5 ] || cp data/pushcube_mixed.hdf5 data/pushcube_mixed_bias.hdf5
for s in 1.0 0.7 0.4; do
  seed=$(python -c "print(40000+int($s*1000))")
  wmsuite collect --env wmsuite/PushCube-v0 --episodes 100 --seed $seed --out data/pushcube_mixed_bias.hdf5 --append \
      --policy "wmsuite.envs.experts:make_expert{\"env_id\": \"wmsuite/PushCube-v0\", \"skill\": $s, \"bias\": 0.7, \"seed\": $seed}"
done
for s in 1.0 0.6 0.2; do
  wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill $s --episodes 20 \
      --seed $(python -c "print(100000+int($s*1000))") --out data/pushcube_heldout.hdf5 --append
  wmsuite collect --env wmsuite/PushCube-v0 --policy expert --skill $s --episodes 20 \
      --seed $(python -c "print(200000+int($s*1000))") --out data/pushcube_val.hdf5 --append
done
