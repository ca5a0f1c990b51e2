#!/usr/bin/env bash
# Install tinker-cookbook 0.6.1 for the tinker-cookbook adapter (apps/tinker_cookbook_env,
# docs/tinker_cookbook.md):
#   ~/.cache/hermes-rl/tinker-cookbook-0.6.1/venv   Python 3.11, exactly
#                                                  .ci/tinker-cookbook-requirements.txt
# tinker-cookbook needs torch>=2.10: the CPU wheel from a local wheel directory, the first
# argument or /opt/wheels (.ci/torch-wheel.sh). The adapter runs with the venv's Python and the
# workspace's packages behind tinker-cookbook's own (apps/tinker_cookbook_env/run.py). Idempotent: a marker written last (the hash of the
# requirements and of these scripts) makes a second run skip.
# Usage: .ci/tinker-cookbook.sh [WHEEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/torch-wheel.sh

version="0.6.1"
requirements=".ci/tinker-cookbook-requirements.txt"
cache="${HOME}/.cache/hermes-rl/tinker-cookbook-${version}"
venv="${cache}/venv"
marker="${cache}/complete"
wheels="${1:-/opt/wheels}"
stamp="$(cat "$requirements" "$0" .ci/torch-wheel.sh | sha256sum | cut -d' ' -f1)"

if [[ -f "$marker" && "$(cat "$marker")" == "$stamp" ]]; then
    echo "tinker-cookbook.sh: ${cache} is complete; skipping"
    exit 0
fi
rm -f "$marker"

torch="$(torch_wheel tinker-cookbook.sh "$wheels")"

mkdir -p "$cache"
# the workspace's interpreter: the venv loads the workspace's compiled modules (llama.cpp)
python="$(uv run --frozen --no-sync python -c 'import sys; print(sys._base_executable)')"
if [[ ! -x "${venv}/bin/python" ]]; then
    uv venv --quiet --python "$python" "$venv"
fi
echo "tinker-cookbook.sh: installing ${requirements} into ${venv} (torch from ${torch})"
nice -n 10 uv pip sync --quiet --python "${venv}/bin/python" --find-links "$wheels" "$requirements"
echo "$stamp" >"$marker"
echo "tinker-cookbook.sh: tinker-cookbook ${version} installed in ${venv}"
