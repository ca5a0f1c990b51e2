#!/usr/bin/env bash
# A Docker daemon and a small Debian base image, made offline (no registry), for the docker
# sandbox tests. Idempotent; run as root. Never fails the CI run: when something cannot be
# done it prints why and exits 0, and the docker tests then skip with the daemon's reason.
#
#   1. apt-get install docker.io debootstrap (only when missing)
#   2. start dockerd in the background when no daemon answers (wait up to 60 s)
#   3. debootstrap --variant=minbase bookworm -> rootfs tarball, cached under
#      ~/.cache/hermes-rl/debootstrap-<suite>-<variant>/ (later runs skip debootstrap)
#   4. docker import it as $IMAGE (skipped when the tag already exists)
#   5. .ci/docker-tasks.sh: the image of what the shipped environments' tasks run, from $IMAGE
set -uo pipefail

SUITE=bookworm
VARIANT=minbase
IMAGE="hermes-sandbox-base:${SUITE}-${VARIANT}"

CACHE="${HOME}/.cache/hermes-rl/debootstrap-${SUITE}-${VARIANT}"
TARBALL="${CACHE}/rootfs.tar"
LOG="${CACHE}/dockerd.log"

say() { echo "docker.sh: $*"; }
skip() { say "SKIP: $*; docker tests will be skipped"; exit 0; }

[ "$(id -u)" -eq 0 ] || skip "not root (dockerd and debootstrap need root)"

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    say "installing docker.io and debootstrap (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || skip "apt-get update failed"
    apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null \
        || skip "apt-get install docker.io debootstrap failed"
fi
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)" || skip "no docker client"

mkdir -p "$CACHE"
if ! timeout 10 "$DOCKER" info >/dev/null 2>&1; then
    say "no daemon answers; starting dockerd in the background (log: $LOG)"
    nohup dockerd >"$LOG" 2>&1 &
    for _ in $(seq 60); do
        timeout 5 "$DOCKER" info >/dev/null 2>&1 && break
        sleep 1
    done
    timeout 10 "$DOCKER" info >/dev/null 2>&1 \
        || skip "dockerd did not answer within 60 s: $(tail -n 3 "$LOG" | tr '\n' ' ')"
fi
say "daemon up ($("$DOCKER" version --format '{{.Server.Version}}' 2>/dev/null))"

if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    say "image $IMAGE present"
    exec bash "$(dirname "$0")/docker-tasks.sh" "$IMAGE"
fi

if [ ! -s "$TARBALL" ]; then
    say "debootstrap --variant=$VARIANT $SUITE (about a minute), cached in $TARBALL"
    ROOTFS="$(mktemp -d /var/tmp/hermes-debootstrap.XXXXXX)"
    trap 'rm -rf "$ROOTFS"' EXIT
    nice -n 10 debootstrap --variant="$VARIANT" "$SUITE" "$ROOTFS" >"$CACHE/debootstrap.log" 2>&1 \
        || skip "debootstrap failed: $(tail -n 3 "$CACHE/debootstrap.log" | tr '\n' ' ')"
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    tar -C "$ROOTFS" -cf "$TARBALL.partial" . && mv "$TARBALL.partial" "$TARBALL" \
        || skip "could not write $TARBALL"
fi
say "docker import $TARBALL as $IMAGE"
"$DOCKER" import "$TARBALL" "$IMAGE" >/dev/null || skip "docker import failed"
say "image $IMAGE ready"
exec bash "$(dirname "$0")/docker-tasks.sh" "$IMAGE"
