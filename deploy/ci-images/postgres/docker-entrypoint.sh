#!/bin/sh
# Make the first cluster from POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB (as the upstream image
# does), then run the server in the foreground listening on every address.
set -eu
if [ "${1:-postgres}" != "postgres" ]; then exec "$@"; fi
[ $# -gt 0 ] && shift
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "docker-entrypoint: POSTGRES_PASSWORD must be set" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != "postgres" ]; then
        echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" \
            | postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
    echo "docker-entrypoint: made the cluster with database $POSTGRES_DB" >&2
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
