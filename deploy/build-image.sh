#!/usr/bin/env bash
# Build the image sustain:dev from the repository's Dockerfile, and nothing else.
#
#   deploy/build-image.sh [--tag NAME:TAG]... [--base-only]
#
# --tag names the image (repeatable; given, it replaces the default sustain:dev).
#
# The Dockerfile starts FROM python:3.11-slim-bookworm. Where a registry answers, that base is
# pulled as usual. Where none does (an air-gapped build host, or CI machines with PyPI and
# Debian's mirror but no image registry), a stand-in is made once with mmdebstrap from Debian
# bookworm (python3, python3-venv, python-is-python3, ca-certificates) and `docker import`ed
# under the same name, so the Dockerfile stays the one a registry build uses. The host's own CA
# certificates (/usr/local/share/ca-certificates) go into that stand-in, and pip inside it is
# told to trust the system bundle, so a build behind a TLS-inspecting proxy can still reach PyPI.
#
# Idempotent: a base already in the engine is kept; the build itself uses Docker's layer cache.
# Needs: a running Docker engine; mmdebstrap only when the base must be made.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="python:3.11-slim-bookworm"
BUILD_CACHE="sustain-build-stage:cache"
SUITE="bookworm"
MIRROR="${SUSTAIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
TAGS=()
BASE_ONLY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --tag)
            if [ $# -lt 2 ]; then echo "build-image.sh: --tag needs NAME:TAG" >&2; exit 2; fi
            TAGS+=("$2"); shift 2 ;;
        --base-only) BASE_ONLY=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "build-image.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ ${#TAGS[@]} -eq 0 ]; then TAGS=("sustain:dev"); fi

log() { echo "build-image: $*" >&2; }

case "$MIRROR" in
    *://*@*)
        # It would be logged, on mmdebstrap's command line and in the image's sources.list.
        log "SUSTAIN_DEBIAN_MIRROR must not hold credentials (use /etc/apt/auth.conf.d)"
        exit 2 ;;
esac
WORK=""
trap 'if [ -n "$WORK" ]; then rm -rf "$WORK"; fi' EXIT
STAND_IN_MESSAGE="sustain stand-in for $BASE"

# The hooks' "$1" is mmdebstrap's root folder, expanded by mmdebstrap, not here.
# shellcheck disable=SC2016
make_base() {
    # A Debian bookworm root with what the Dockerfile's stages use, imported as $BASE.
    WORK="$(mktemp -d)"
    local hooks=()
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        hooks+=(--customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"')
        for crt in /usr/local/share/ca-certificates/*.crt; do
            hooks+=(--customize-hook="copy-in $crt /usr/local/share/ca-certificates/")
        done
        hooks+=(--customize-hook='chroot "$1" update-ca-certificates --fresh >/dev/null')
    fi
    log "making $BASE with mmdebstrap ($SUITE from $MIRROR)"
    mmdebstrap --quiet --variant=minbase \
        --include=python3,python3-venv,python-is-python3,ca-certificates \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "${hooks[@]}" \
        "$SUITE" "$WORK/base.tar" "$MIRROR"
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'CMD ["python3"]' \
        --message "$STAND_IN_MESSAGE: mmdebstrap $SUITE minbase + python3" \
        "$WORK/base.tar" "$BASE" >/dev/null
    log "imported $BASE"
}

# The upstream base is kept once here; a stand-in made earlier gives way to the upstream one as
# soon as a registry answers (its import message marks it: labels would be inherited).
PRESENT=""
if docker image inspect "$BASE" >/dev/null 2>&1; then
    PRESENT="$(docker image inspect --format '{{.Comment}}' "$BASE")"
    PRESENT="${PRESENT:-upstream}"
fi
if [ -n "$PRESENT" ] && [ "${PRESENT#"$STAND_IN_MESSAGE"}" = "$PRESENT" ]; then
    log "$BASE is present"
elif timeout 120 docker pull --quiet "$BASE" >/dev/null 2>&1; then
    log "pulled $BASE"
elif [ -n "$PRESENT" ]; then
    log "$BASE is present (the stand-in made here; no registry answered)"
else
    log "no registry answered for $BASE"
    command -v mmdebstrap >/dev/null || { log "mmdebstrap is needed to make the base"; exit 1; }
    make_base
fi
if [ "$BASE_ONLY" -eq 1 ]; then exit 0; fi

ARGS=()
for tag in "${TAGS[@]}"; do ARGS+=(--tag "$tag"); done
log "building ${TAGS[*]}"
build() {
    local out
    out="$(mktemp)"
    if ! DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" docker build --quiet "$@" . >"$out" 2>&1; then
        cat "$out" >&2
        rm -f "$out"
        exit 1
    fi
    rm -f "$out"
}
# Without BuildKit the build stage's image is the layer cache of the next build: tagged, it
# stays; the one it replaces becomes untagged and goes (only images labelled as that stage).
build --target build --tag "$BUILD_CACHE"
build "${ARGS[@]}"
docker image prune --force --filter label=org.sustain.stage=build >/dev/null
log "built ${TAGS[*]}"
