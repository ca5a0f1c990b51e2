#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the same patched sources as the workspace's
# llama-cpp-python (third_party/llama-cpp-python: the pinned sdist's vendored llama.cpp with its
# patches), with the same portable x86-64 flags. Idempotent: the binary is cached in
# ~/.cache/hermes-rl/llama-server-<llama-cpp-python version>/ with the patch set's id, and
# reused while that id holds.
# Usage: .ci/llama-server.sh            (about 16 minutes on 2 cores the first time)
set -euo pipefail
cd "$(dirname "$0")/.."

build_py=third_party/llama-cpp-python/hermes_llama_build.py
python="$(uv run --frozen --no-sync python -c 'import sys; print(sys.executable)')"
version="$("$python" "$build_py" version)"
patch_id="$("$python" "$build_py" patch-id)"
cache="${HOME}/.cache/hermes-rl/llama-server-${version}"
binary="${cache}/bin/llama-server"
if [[ -x "$binary" && "$(cat "${cache}/patch-id" 2>/dev/null)" == "$patch_id" ]]; then
    echo "llama-server.sh: ${binary} already built (patch set ${patch_id}); skipping"
    exit 0
fi

work="${cache}/src"
rm -rf "$work"
mkdir -p "$work"
vendor="$("$python" "$build_py" prepare "$work")/vendor/llama.cpp"

echo "llama-server.sh: building llama-server from ${vendor} (portable flags, nice -n 10)"
nice -n 10 cmake -B "${work}/build" "$vendor" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF
nice -n 10 cmake --build "${work}/build" --target llama-server -j "$(nproc)"

mkdir -p "${cache}/bin"
install -m 0755 "${work}/build/bin/llama-server" "${binary}.tmp"
mv "${binary}.tmp" "$binary"
echo "$patch_id" >"${cache}/patch-id"
rm -rf "$work"
echo "llama-server.sh: built ${binary}"
"$binary" --version || true
