#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the sources vendored in the llama-cpp-python sdist that
# uv.lock pins, with the same portable x86-64 flags as the workspace's llama-cpp-python build.
# Idempotent: the binary is cached in ~/.cache/hermes-rl/llama-server-<version>/ and reused.
# Usage: .ci/llama-server.sh            (about 16 minutes on 2 cores the first time)
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(awk '/^name = "llama-cpp-python"/{getline; gsub(/[^0-9.]/, ""); print; exit}' uv.lock)"
if [[ -z "$version" ]]; then
    echo "llama-server.sh: llama-cpp-python is not in uv.lock; nothing to build" >&2
    exit 1
fi
cache="${HOME}/.cache/hermes-rl/llama-server-${version}"
binary="${cache}/bin/llama-server"
if [[ -x "$binary" ]]; then
    echo "llama-server.sh: ${binary} already built; skipping"
    exit 0
fi

sdist_line="$(awk '/^name = "llama-cpp-python"/{f=1} f && /^sdist = /{print; exit}' uv.lock)"
url="$(sed -E 's/.*url = "([^"]+)".*/\1/' <<<"$sdist_line")"
sha="$(sed -E 's/.*hash = "sha256:([0-9a-f]+)".*/\1/' <<<"$sdist_line")"
work="${cache}/src"
mkdir -p "$work"
tarball="${work}/llama_cpp_python-${version}.tar.gz"
if ! echo "${sha}  ${tarball}" | sha256sum -c --quiet >/dev/null 2>&1; then
    echo "llama-server.sh: downloading the llama-cpp-python ${version} sdist (pinned in uv.lock)"
    curl -fsSL --retry 3 -o "$tarball" "$url"
    echo "${sha}  ${tarball}" | sha256sum -c --quiet
fi
rm -rf "${work}/llama_cpp_python-${version}"
tar -xzf "$tarball" -C "$work"
vendor="${work}/llama_cpp_python-${version}/vendor/llama.cpp"

echo "llama-server.sh: building llama-server from ${vendor} (portable flags, nice -n 10)"
nice -n 10 cmake -B "${work}/build" "$vendor" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF
nice -n 10 cmake --build "${work}/build" --target llama-server -j "$(nproc)"

mkdir -p "${cache}/bin"
install -m 0755 "${work}/build/bin/llama-server" "${binary}.tmp"
mv "${binary}.tmp" "$binary"
rm -rf "$work"
echo "llama-server.sh: built ${binary}"
"$binary" --version || true
