#!/usr/bin/env bash
# Install verifiers 0.4.0 for the verifiers adapter (apps/verifiers_env, docs/verifiers.md):
#   ~/.cache/hermes-rl/verifiers-0.4.0/venv   Python 3.11, exactly .ci/verifiers-requirements.txt
# verifiers pins openai<3 while the workspace locks openai 3, so it lives in a venv of its own;
# apps/verifiers_env/vf_eval.py runs vf-eval there with the workspace's packages behind
# verifiers' own. Idempotent: a marker written last (the hash of the requirements and of this
# script) makes a second run skip. About 20 s once (pure wheels, uv-cached), plus compiling their
# bytecode (30-70 s once).
set -euo pipefail
cd "$(dirname "$0")/.."

version="0.4.0"
requirements=".ci/verifiers-requirements.txt"
cache="${HOME}/.cache/hermes-rl/verifiers-${version}"
venv="${cache}/venv"
marker="${cache}/complete"
stamp="$(cat "$requirements" "$0" | sha256sum | cut -d' ' -f1)"

if [[ -f "$marker" && "$(cat "$marker")" == "$stamp" ]]; then
    echo "verifiers.sh: ${cache} is complete; skipping"
    exit 0
fi
rm -f "$marker"
mkdir -p "$cache"
# the workspace's interpreter: the venv loads the workspace's compiled modules (llama.cpp)
python="$(uv run --frozen --no-sync python -c 'import sys; print(sys._base_executable)')"
if [[ ! -x "${venv}/bin/python" ]]; then
    uv venv --quiet --python "$python" "$venv"
fi
# compiled now: with PYTHONDONTWRITEBYTECODE set nothing caches it later, and compiling
# verifiers' imports took 14 s of every vf-eval start
uv pip sync --quiet --compile-bytecode --python "${venv}/bin/python" "$requirements"
echo "$stamp" >"$marker"
echo "verifiers.sh: verifiers ${version} installed in ${venv}"
