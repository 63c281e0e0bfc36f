#!/usr/bin/env bash
# Stand-ins for the upstream images docker-compose.yml names (postgres, prom/prometheus,
# prom/alertmanager), for machines that reach Debian's mirror but no image registry.
#
#   deploy/ci-images/build.sh
#
# For each image the compose file names: kept if the engine has the upstream image, pulled if
# a registry answers, else built (or rebuilt, if a stand-in is there) from this folder's Dockerfile (Debian bookworm packages on the base that
# deploy/build-image.sh makes) and tagged with the upstream name, so `docker compose up` runs
# the compose file users run. The three builds go in parallel; Docker's layer cache makes a
# second run instant.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
COMPOSE="$ROOT/docker-compose.yml"

log() { echo "ci-images: $*" >&2; }

# The tag the compose file gives an upstream repository (postgres -> postgres:17-bookworm).
compose_tag() {
    local tag
    tag="$(sed -nE "s|^[[:space:]]+image:[[:space:]]*($1:[^[:space:]]+)[[:space:]]*$|\1|p" "$COMPOSE")"
    if [ -z "$tag" ]; then log "docker-compose.yml names no image $1:*"; exit 1; fi
    echo "$tag"
}

"$ROOT/deploy/build-image.sh" --base-only

declare -A REPOS=([postgres]=postgres [prometheus]=prom/prometheus [alertmanager]=prom/alertmanager)
PIDS=()
LOGS=()
RUNNING=()
# Whatever ends this script ends the builds it started and removes their logs.
trap 'for pid in "${RUNNING[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -f "${LOGS[@]}"' EXIT
for dir in postgres prometheus alertmanager; do
    tag="$(compose_tag "${REPOS[$dir]}")"
    stand_in="absent"
    if docker image inspect "$tag" >/dev/null 2>&1; then
        stand_in="$(docker image inspect --format \
            '{{index .Config.Labels "org.sustain.stand-in"}}' "$tag")"
    fi
    if [ "$stand_in" != "absent" ] && [ "$stand_in" != "true" ]; then
        log "$tag is present (the upstream image)"
        continue
    fi
    # Absent or a stand-in: the upstream image where a registry answers, else the stand-in
    # (re)built, instant from the layer cache unless its folder changed.
    if timeout 120 docker pull --quiet "$tag" >/dev/null 2>&1; then
        log "pulled $tag"
        continue
    fi
    log "building the stand-in $tag from deploy/ci-images/$dir"
    out="$(mktemp)"
    LOGS+=("$out")
    DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" docker build --quiet --tag "$tag" "$HERE/$dir" \
        >"$out" 2>&1 &
    PIDS+=("$!|$tag|$out")
    RUNNING+=("$!")
done
FAILED=0
for entry in "${PIDS[@]}"; do
    IFS="|" read -r pid tag out <<<"$entry"
    if wait "$pid"; then log "built $tag"; else log "building $tag failed:"; cat "$out" >&2; FAILED=1; fi
done
RUNNING=()
exit "$FAILED"
