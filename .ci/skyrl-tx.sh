#!/usr/bin/env bash
# Install the SkyRL Tinker API server (skyrl-tx 0.3.0, CPU JAX) for the tests that talk to a
# real Tinker server (tests/tinker_server.py), and the model it serves:
#   ~/.cache/hermes-rl/skyrl-tx-0.3.0/venv          Python 3.11, exactly .ci/skyrl-tx-requirements.txt
#   ~/.cache/hermes-rl/skyrl-tx-0.3.0/smollm2-135m  SmolLM2-135M-Instruct as HF safetensors +
#                                                   tokenizer, converted from the workspace's GGUF
# Idempotent: a marker written last (holding the requirements' hash) makes a second run skip.
# torch is the CPU wheel from a local wheel directory, the first argument or /opt/wheels
# (.ci/torch-wheel.sh).
# Usage: .ci/skyrl-tx.sh [WHEEL_DIR]    (after `uv sync`: the GGUF is read from the workspace environment)
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/torch-wheel.sh

version="0.3.0"
requirements=".ci/skyrl-tx-requirements.txt"
cache="${HOME}/.cache/hermes-rl/skyrl-tx-${version}"
venv="${cache}/venv"
model="${cache}/smollm2-135m"
marker="${cache}/complete"
wheels="${1:-/opt/wheels}"
stamp="$(sha256sum "$requirements" | cut -d' ' -f1) convert-v2"

if [[ -f "$marker" && "$(cat "$marker")" == "$stamp" ]]; then
    echo "skyrl-tx.sh: ${cache} is complete; skipping"
    exit 0
fi
rm -f "$marker"

torch="$(torch_wheel skyrl-tx.sh "$wheels")"

gguf="$(uv run --frozen --no-sync python -c \
    'from hermes_loop.embedded.model_file import default_model_path; print(default_model_path())')"
if [[ ! -f "$gguf" ]]; then
    echo "skyrl-tx.sh: SmolLM2 GGUF not found (${gguf}); run uv sync first" >&2
    exit 1
fi

mkdir -p "$cache"
if [[ ! -x "${venv}/bin/python" ]]; then
    echo "skyrl-tx.sh: creating ${venv} (Python 3.11)"
    uv venv --quiet --python 3.11 "$venv"
fi
echo "skyrl-tx.sh: installing ${requirements} into ${venv} (torch from ${torch})"
nice -n 10 uv pip sync --python "${venv}/bin/python" --find-links "$wheels" "$requirements"

echo "skyrl-tx.sh: converting ${gguf} to ${model} (float32 safetensors + tokenizer)"
rm -rf "${model}.tmp"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TQDM_DISABLE=1 nice -n 10 "${venv}/bin/python" - "$gguf" "${model}.tmp" <<'EOF'
import sys
from pathlib import Path

import torch
from gguf import GGUFReader
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out = Path(sys.argv[1]), sys.argv[2]
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
# transformers' GGUF import names <|im_start|> as EOS and turns add_bos on (SmolLM2's GGUF says
# bos 1, eos 2 <|im_end|>, pad 2, no bos added): take the special tokens from the GGUF itself
fields = GGUFReader(gguf).fields


def scalar(key):
    field = fields[key]
    return field.parts[field.data[0]].tolist()[0]


for role in ("bos", "eos", "padding"):
    token = tokenizer.convert_ids_to_tokens(scalar(f"tokenizer.ggml.{role}_token_id"))
    setattr(tokenizer, "pad_token" if role == "padding" else f"{role}_token", token)
tokenizer.add_bos_token = bool(scalar("tokenizer.ggml.add_bos_token"))
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.generation_config.pad_token_id = tokenizer.pad_token_id
model.save_pretrained(out, safe_serialization=True)
tokenizer.save_pretrained(out)
messages = [{"role": "user", "content": "What is the capital of France?"}]
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
reply = model.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1] :]
print(
    f"skyrl-tx.sh: converted (bos {tokenizer.bos_token}, eos {tokenizer.eos_token}, "
    f"pad {tokenizer.pad_token}); greedy reply: {tokenizer.decode(reply)!r}"
)
EOF
rm -rf "$model"
mv "${model}.tmp" "$model"

echo "$stamp" >"$marker"
echo "skyrl-tx.sh: done: ${venv}, ${model}"
