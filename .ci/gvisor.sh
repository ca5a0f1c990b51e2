#!/usr/bin/env bash
# gVisor's runsc and a root filesystem for the gvisor sandbox tests, made offline. Idempotent;
# run as root after .ci/docker.sh (whose debootstrap tarball it reuses). Never fails the CI run:
# when something cannot be done it prints why and exits 0, and the gvisor tests then skip.
#
#   1. runsc from Debian bookworm-backports (0.0~20240729: bookworm's own 0.0~20221219 rejects
#      statx with AT_NO_AUTOMOUNT, so coreutils' `ls -l` fails inside), downloaded with an apt
#      configuration private to the cache (the machine's sources are not touched) and unpacked
#      into ~/.cache/hermes-rl/runsc-<version>/ (later runs skip all of this)
#   2. the debootstrap rootfs of .ci/docker.sh unpacked (mode 0755 root) into
#      ~/.cache/hermes-rl/gvisor-rootfs-bookworm-minbase/
set -uo pipefail

VERSION="0.0~20240729.0-4~bpo12+2"
CACHE_ROOT="${HOME}/.cache/hermes-rl"
RUNSC_DIR="${CACHE_ROOT}/runsc-${VERSION//[~+]/_}"
TARBALL="${CACHE_ROOT}/debootstrap-bookworm-minbase/rootfs.tar"
ROOTFS="${CACHE_ROOT}/gvisor-rootfs-bookworm-minbase"

say() { echo "gvisor.sh: $*"; }
skip() { say "SKIP: $*; gvisor tests will be skipped"; exit 0; }

[ "$(id -u)" -eq 0 ] || skip "not root (runsc needs root)"

if [ ! -x "$RUNSC_DIR/usr/bin/runsc" ]; then
    say "runsc $VERSION from bookworm-backports into $RUNSC_DIR"
    apt_dir="$(mktemp -d /var/tmp/hermes-runsc-apt.XXXXXX)"
    trap 'rm -rf "$apt_dir"' EXIT
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/sources"
    cat >"$apt_dir/sources/backports.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_opts=(-o "Dir::Etc::sourcelist=/dev/null" -o "Dir::Etc::sourceparts=$apt_dir/sources"
              -o "Dir::State::Lists=$apt_dir/lists" -o "APT::Sandbox::User=root")
    apt-get "${apt_opts[@]}" update -qq >/dev/null || skip "apt-get update (bookworm-backports) failed"
    (cd "$apt_dir" && apt-get "${apt_opts[@]}" download -qq "runsc=$VERSION" >/dev/null) \
        || skip "apt-get download runsc=$VERSION failed"
    rm -rf "$RUNSC_DIR.partial"
    dpkg-deb -x "$apt_dir"/runsc_*.deb "$RUNSC_DIR.partial" || skip "dpkg-deb -x failed"
    rm -rf "$RUNSC_DIR" && mv "$RUNSC_DIR.partial" "$RUNSC_DIR"
fi
"$RUNSC_DIR/usr/bin/runsc" --version >/dev/null 2>&1 || skip "$RUNSC_DIR/usr/bin/runsc does not run"
say "runsc ready: $("$RUNSC_DIR/usr/bin/runsc" --version | head -n 1)"

if [ ! -d "$ROOTFS/usr/bin" ]; then
    [ -s "$TARBALL" ] || skip "no debootstrap tarball at $TARBALL (run .ci/docker.sh first)"
    say "unpacking $TARBALL into $ROOTFS"
    rm -rf "$ROOTFS.partial" && mkdir -p "$ROOTFS.partial"
    tar -C "$ROOTFS.partial" -xf "$TARBALL" || skip "could not unpack $TARBALL"
    chmod 0755 "$ROOTFS.partial"
    rm -rf "$ROOTFS" && mv "$ROOTFS.partial" "$ROOTFS"
fi
say "rootfs ready: $ROOTFS"
