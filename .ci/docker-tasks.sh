#!/usr/bin/env bash
# The tasks image: the offline base image (argument 1, made by .ci/docker.sh) plus what the
# shipped environments' tasks run (python3, its venv module, git). Built with apt once, then
# cached as a `docker save` tarball under ~/.cache/hermes-rl/docker-images/ that later runs
# `docker load`. Bump TASKS_VERSION when TASKS_PACKAGES change. Idempotent; never fails the CI
# run (prints why and exits 0; the docker tests then skip naming the missing image).
#
# Tests and docs map task images (ubuntu:24.04, python:3.11-slim, ...) onto it with image
# aliases (--sandbox-image-alias NAME=hermes-sandbox-tasks:bookworm-v1).
set -uo pipefail

BASE="${1:?usage: docker-tasks.sh BASE_IMAGE}"
TASKS_VERSION=1
TASKS_PACKAGES="python3 python3-venv git"
TASKS_IMAGE="hermes-sandbox-tasks:bookworm-v${TASKS_VERSION}"
CACHE="${HOME}/.cache/hermes-rl/docker-images"
TARBALL="${CACHE}/hermes-sandbox-tasks-bookworm-v${TASKS_VERSION}.tar"

say() { echo "docker-tasks.sh: $*"; }
skip() { say "SKIP: $*; tests that need $TASKS_IMAGE will be skipped"; exit 0; }

DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)" || skip "no docker client"

if "$DOCKER" image inspect "$TASKS_IMAGE" >/dev/null 2>&1; then
    say "image $TASKS_IMAGE present"
    exit 0
fi
mkdir -p "$CACHE"
if [ -s "$TARBALL" ] && "$DOCKER" load -i "$TARBALL" >/dev/null 2>&1; then
    say "image $TASKS_IMAGE loaded from $TARBALL"
    exit 0
fi
say "building $TASKS_IMAGE from $BASE with apt ($TASKS_PACKAGES), cached in $TARBALL"
printf 'FROM %s\nRUN %s && %s %s >/dev/null && rm -rf /var/lib/apt/lists/*\n' "$BASE" \
    "apt-get update -qq" \
    "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends" \
    "$TASKS_PACKAGES" \
    | nice -n 10 "$DOCKER" build -q -t "$TASKS_IMAGE" - >"$CACHE/build.log" 2>&1 \
    || skip "building $TASKS_IMAGE failed: $(tail -n 3 "$CACHE/build.log" | tr '\n' ' ')"
"$DOCKER" save -o "$TARBALL.partial" "$TASKS_IMAGE" && mv "$TARBALL.partial" "$TARBALL" \
    || say "could not cache $TASKS_IMAGE in $TARBALL (the image itself is ready)"
say "image $TASKS_IMAGE ready"
