#!/usr/bin/env bash
# The C toolchain hermes-sandbox builds its command executor with (hermes-exec: cc -static, so
# it needs static libc too), libseccomp for the bwrap filters, and patch (the llama.cpp patches
# of third_party/llama-cpp-python). Idempotent: skips when a static test program links,
# libseccomp.so.2 loads and patch is there. Needs root and apt (Debian/Ubuntu).
set -euo pipefail
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf 'int main(void){return 0;}\n' >"$probe/t.c"
have_static() { command -v cc >/dev/null 2>&1 && cc -static -o "$probe/t" "$probe/t.c" 2>/dev/null; }
have_seccomp() { ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; }
have_patch() { command -v patch >/dev/null 2>&1; }  # third_party/llama-cpp-python's build
if have_static && have_seccomp && have_patch; then
    echo "toolchain.sh: cc with static libc, libseccomp2 and patch present, skipping"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "toolchain.sh: no apt-get; install a C compiler, static libc, libseccomp2 and patch yourself" >&2
    exit 1
fi
echo "toolchain.sh: installing gcc, libc6-dev, libseccomp2 (hermes-exec, bwrap's seccomp) and patch"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends gcc libc6-dev libseccomp2 patch >/dev/null
have_static || { echo "toolchain.sh: cc -static still fails" >&2; exit 1; }
echo "toolchain.sh: $(cc --version | head -1)"
