#!/usr/bin/env bash
# The PushCube world model's training data, v2: the 1,260 expert episodes of the shipped recipe
# (assets/wm/pushcube/README.md) plus 700 play episodes (wmsuite/envs/play.py). Writes
# data/pushcube_mixed_bias.hdf5 (experts only) and data/pushcube_play_mix.hdf5 (experts + play).
set -euo pipefail
export MUJOCO_GL=egl OMP_NUM_THREADS=1
C="wmsuite collect --env wmsuite/PushCube-v0"
if [ ! -f data/pushcube_mixed_bias.hdf5 ]; then
  for s in 1.0 0.7 0.4 0.1; do
    $C --policy expert --skill $s --episodes 60 --seed $(python -c "print(int($s*1000))") --out data/pushcube_mixed.hdf5 --append
    $C --policy expert --skill $s --episodes 180 --seed $(python -c "print(20000+int($s*1000))") --out data/pushcube_mixed.hdf5 --append
  done
  cp data/pushcube_mixed.hdf5 data/pushcube_mixed_bias.tmp.hdf5
  for s in 1.0 0.7 0.4; do
    seed=$(python -c "print(40000+int($s*1000))")
    $C --episodes 100 --seed $seed --out data/pushcube_mixed_bias.tmp.hdf5 --append \
       --policy "wmsuite.envs.experts:make_expert{\"env_id\": \"wmsuite/PushCube-v0\", \"skill\": $s, \"bias\": 0.7, \"seed\": $seed}"
  done
  mv data/pushcube_mixed_bias.tmp.hdf5 data/pushcube_mixed_bias.hdf5
fi
cp data/pushcube_mixed_bias.hdf5 data/pushcube_play_mix.tmp.hdf5
P='wmsuite.envs.play:make_play{"env_id": "wmsuite/PushCube-v0"'
# 420 episodes: every play mode at skill 0 (60 per mode on average), no bias
$C --episodes 420 --seed 70000 --out data/pushcube_play_mix.tmp.hdf5 --append --policy "$P, \"seed\": 70000}"
# 140: the same with an actuator bias of up to 0.7
$C --episodes 140 --seed 71000 --out data/pushcube_play_mix.tmp.hdf5 --append --policy "$P, \"bias\": 0.7, \"seed\": 71000}"
# 140: half competent expert episodes, half play, both with noise
$C --episodes 140 --seed 72000 --out data/pushcube_play_mix.tmp.hdf5 --append --policy "$P, \"skill\": 0.5, \"noise\": 0.4, \"seed\": 72000}"
mv data/pushcube_play_mix.tmp.hdf5 data/pushcube_play_mix.hdf5
