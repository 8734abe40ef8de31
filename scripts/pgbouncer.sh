#!/usr/bin/env bash
# PgBouncer (Debian's package) in transaction pooling mode in front of a server, on loopback, for
# the tests: everything in one directory, stopped by pid.
#
#   pgbouncer.sh run -- CMD...   CMD with SOMNA_TEST_PG pointed at a PgBouncer in front of the
#                                server SOMNA_TEST_PG names (a loopback postgresql:// URL);
#                                stopped and removed on exit; CMD's exit code
#
# Installs pgbouncer with apt-get when it is missing and this runs as root.
set -euo pipefail
log() { echo "pgbouncer.sh: $*" >&2; }
die() { log "$*"; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

ensure_binary() {
  command -v pgbouncer >/dev/null && return 0
  is_root || die "pgbouncer is not installed (apt-get install pgbouncer)"
  log "apt-get install -y pgbouncer"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends pgbouncer >&2 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends pgbouncer >&2; }
}

# shellcheck source=scripts/free-port.sh
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

cmd_run() {
  [ "${1:-}" = "--" ] || die "usage: run -- CMD..."
  shift
  [ $# -gt 0 ] || die "usage: run -- CMD..."
  local url=${SOMNA_TEST_PG:-}
  [ -n "$url" ] || die "SOMNA_TEST_PG names no server to put PgBouncer in front of"
  # postgresql://USER@127.0.0.1:PORT/DB...
  local rest=${url#*://}
  local user=${rest%%@*} hostport=${rest#*@}
  hostport=${hostport%%/*}
  local host=${hostport%:*} pgport=${hostport##*:}
  ensure_binary
  local port
  # Global: the exit trap reads them after this function returned.
  DIR=$(mktemp -d /tmp/pgbouncer.XXXXXX)
  local dir=$DIR
  port=$(free_port)
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$pgport
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 400
default_pool_size = 8
logfile = $dir/log
pidfile = $dir/pid
INI
  echo "\"$user\" \"\"" >"$dir/users.txt"
  if is_root; then
    chown -R postgres "$dir"
    runuser -u postgres -- pgbouncer -d "$dir/pgbouncer.ini"
  else
    pgbouncer -d "$dir/pgbouncer.ini"
  fi
  local _
  for _ in $(seq 100); do
    [ -s "$dir/pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  PID=$(cat "$dir/pid")
  stop() {
    local _
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    rm -rf "$DIR"
  }
  trap stop EXIT
  local db=${rest#*/}
  log "PgBouncer (transaction pooling) on port $port in front of $host:$pgport"
  set +e
  SOMNA_TEST_PG="postgresql://$user@127.0.0.1:$port/$db" "$@"
  local rc=$?
  set -e
  return $rc
}

case ${1:-} in
  run) shift; cmd_run "$@" ;;
  *) die "usage: pgbouncer.sh run -- CMD..." ;;
esac
