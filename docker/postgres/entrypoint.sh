#!/bin/sh
# First start: initialise the cluster with the official image's variables; then run the server in the foreground.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "POSTGRES_PASSWORD is empty: set it (Compose: MESHWARD_POSTGRES_PASSWORD)" >&2
    exit 1
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    printf "listen_addresses = '*'\n" >> "$PGDATA/postgresql.conf"
    printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
fi
exec postgres -D "$PGDATA"
