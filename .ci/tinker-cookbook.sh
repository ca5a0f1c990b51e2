#!/usr/bin/env bash
# Install tinker-cookbook 0.6.1 for the tinker-cookbook adapter (apps/tinker_cookbook_env,
# docs/tinker_cookbook.md):
#   ~/.cache/hermes-rl/tinker-cookbook-0.6.1/venv   Python 3.11, exactly
#                                                  .ci/tinker-cookbook-requirements.txt
# tinker-cookbook needs torch>=2.10; torch must be the CPU wheel (PyPI's torch pulls GBs of
# CUDA): it comes from a local wheel directory, the first argument or /opt/wheels. The adapter
# runs with the venv's Python and the workspace's packages behind tinker-cookbook's own
# (apps/tinker_cookbook_env/run.py). Idempotent: a marker written last (the hash of the
# requirements and of this script) makes a second run skip.
# Usage: .ci/tinker-cookbook.sh [WHEEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

version="0.6.1"
torch_version="2.13.0+cpu"
requirements=".ci/tinker-cookbook-requirements.txt"
cache="${HOME}/.cache/hermes-rl/tinker-cookbook-${version}"
venv="${cache}/venv"
marker="${cache}/complete"
wheels="${1:-/opt/wheels}"
stamp="$(cat "$requirements" "$0" | sha256sum | cut -d' ' -f1)"

if [[ -f "$marker" && "$(cat "$marker")" == "$stamp" ]]; then
    echo "tinker-cookbook.sh: ${cache} is complete; skipping"
    exit 0
fi
rm -f "$marker"

shopt -s nullglob
torch_wheels=("${wheels}"/torch-"${torch_version}"-cp311-*.whl)
shopt -u nullglob
if [[ ${#torch_wheels[@]} -eq 0 ]]; then
    cat >&2 <<MSG
tinker-cookbook.sh: no torch ${torch_version} wheel for Python 3.11 in ${wheels}.
  tinker-cookbook needs PyTorch; its CPU build, not PyPI's (GBs of CUDA). Put
  torch-${torch_version}-cp311-cp311-manylinux_2_28_x86_64.whl into ${wheels}, e.g.
    pip download --no-deps --python-version 3.11 --only-binary=:all: -d ${wheels} \\
        torch==${torch_version} --index-url https://download.pytorch.org/whl/cpu
  or pass a directory that has it: .ci/tinker-cookbook.sh DIR
MSG
    exit 1
fi

mkdir -p "$cache"
# the workspace's interpreter: the venv loads the workspace's compiled modules (llama.cpp)
python="$(uv run --frozen --no-sync python -c 'import sys; print(sys._base_executable)')"
if [[ ! -x "${venv}/bin/python" ]]; then
    uv venv --quiet --python "$python" "$venv"
fi
echo "tinker-cookbook.sh: installing ${requirements} into ${venv} (torch from ${torch_wheels[0]})"
nice -n 10 uv pip sync --quiet --python "${venv}/bin/python" --find-links "$wheels" "$requirements"
echo "$stamp" >"$marker"
echo "tinker-cookbook.sh: tinker-cookbook ${version} installed in ${venv}"
