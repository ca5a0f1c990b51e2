#!/usr/bin/env bash
# Install TRL 1.16.0 for the TRL adapter (apps/trl_env, docs/trl.md):
#   ~/.cache/hermes-rl/trl-1.16.0/venv   Python 3.11, exactly .ci/trl-requirements.txt
# torch is the machine image's CPU wheel (from the first argument or /opt/wheels,
# .ci/torch-wheel.sh): PyPI's torch would pull GBs of CUDA, so the requirements pin the +cpu
# build, which only that directory has. TRL needs transformers 5 while the skyrl-tx venv pins
# 4.57, so it has a venv of its own (1.2 GB); the model is the SmolLM2 conversion
# .ci/skyrl-tx.sh already made (~/.cache/hermes-rl/skyrl-tx-0.3.0/smollm2-135m).
# Idempotent: a marker written last (the hash of the requirements and of these scripts) makes
# a second run skip. About 5 s once with uv's cache warm.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/torch-wheel.sh

version="1.16.0"
requirements=".ci/trl-requirements.txt"
cache="${HOME}/.cache/hermes-rl/trl-${version}"
venv="${cache}/venv"
marker="${cache}/complete"
wheels="${1:-/opt/wheels}"
stamp="$(cat "$requirements" "$0" .ci/torch-wheel.sh | sha256sum | cut -d' ' -f1)"

if [[ -f "$marker" && "$(cat "$marker")" == "$stamp" ]]; then
    echo "trl.sh: ${cache} is complete; skipping"
    exit 0
fi
rm -f "$marker"
torch="$(torch_wheel trl.sh "$wheels")"
echo "trl.sh: installing ${requirements} into ${venv} (torch from ${torch})"
mkdir -p "$cache"
# the workspace's interpreter: the venv loads the workspace's compiled modules
python="$(uv run --frozen --no-sync python -c 'import sys; print(sys._base_executable)')"
if [[ ! -x "${venv}/bin/python" ]]; then
    uv venv --quiet --python "$python" "$venv"
fi
nice -n 10 uv pip sync --quiet --python "${venv}/bin/python" --find-links "$wheels" "$requirements"
echo "$stamp" >"$marker"
echo "trl.sh: trl ${version} installed in ${venv}"
