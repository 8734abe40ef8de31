#!/usr/bin/env bash
# Throwaway PostgreSQL 15 servers on 127.0.0.1 for somna's tests: start, stop, kill -9,
# restart, a streaming standby (synchronous or asynchronous), promote, and `run` (a server for
# the length of one command, named to it by SOMNA_TEST_PG). Each server lives in one directory
# DIR: DIR/data (the cluster), DIR/log (the server log), DIR/port, DIR/pid (the postmaster's
# pid), and the Unix socket. Nothing is written outside DIR; Debian's 15/main cluster and port
# 5432 are never used.
#
# As root every server step runs as the `postgres` user (initdb, pg_ctl and postgres refuse
# root); as another user the binaries run directly. docs/scale-out.md describes the use.
#
#   pg-server.sh start DIR [--fast]        initdb + start on a free port; prints the URL
#   pg-server.sh stop DIR                  fast shutdown (SIGINT) by pid
#   pg-server.sh kill DIR                  SIGKILL the postmaster and all its children
#   pg-server.sh restart DIR               start again on the same data and port
#   pg-server.sh standby PRIMARY_DIR STANDBY_DIR --sync|--async
#   pg-server.sh promote DIR               promote a standby; waits until it accepts writes
#   pg-server.sh walsender-pid PRIMARY_DIR print the pid of the primary's walsender
#   pg-server.sh url DIR                   print the URL of a server started here
#   pg-server.sh psql DIR [PSQL ARGS...]   psql connected to it (-X, as postgres)
#   pg-server.sh run [--fast] -- CMD...    CMD with SOMNA_TEST_PG set to a throwaway server
#   pg-server.sh install                   apt-get install -y postgresql-15 (root only)
#
# PGBIN (default /usr/lib/postgresql/15/bin) names the server binaries.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# Bounds of every wait, in tenths of a second.
START_TRIES=5          # ports tried before `start` gives up
STOP_WAIT=600          # 60 s for a fast shutdown before an immediate one
GONE_WAIT=150          # 15 s for a killed postmaster to be reaped (a zombie lasts about 2 s)
REPL_WAIT=600          # 60 s for a standby to stream (and be synchronous)

die() {
  echo "pg-server.sh: $*" >&2
  exit 1
}

log() {
  echo "pg-server.sh: $*" >&2
}

# shellcheck source=scripts/pg-user.sh
. "$(dirname "${BASH_SOURCE[0]}")/pg-user.sh"

install_pg() {
  is_root || die "installing postgresql-15 needs root"
  command -v apt-get >/dev/null || die "no apt-get: install PostgreSQL 15 and set PGBIN"
  log "apt-get install -y postgresql-15"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15 >&2; then
    DEBIAN_FRONTEND=noninteractive apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15 >&2
  fi
}

ensure_binaries() {
  if [ ! -x "$PGBIN/initdb" ] || [ ! -x "$PGBIN/pg_ctl" ]; then
    if is_root; then
      install_pg
    fi
    [ -x "$PGBIN/initdb" ] || die "no PostgreSQL binaries in $PGBIN (install postgresql-15 or set PGBIN)"
  fi
  if is_root; then
    id postgres >/dev/null 2>&1 || die "running as root needs the postgres user (package postgresql-15)"
  fi
}

# Creates DIR (absolute path on stdout) and hands it to the postgres user when root.
prepare_dir() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  if is_root; then
    chown postgres:postgres "$dir"
    runuser -u postgres -- test -w "$dir" ||
      die "the postgres user cannot write $dir (is a parent directory private to root?)"
  fi
  echo "$dir"
}

abs_dir() {
  [ -d "$1" ] || die "no directory $1"
  (cd "$1" && pwd -P)
}

# shellcheck source=scripts/free-port.sh
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

port_of() {
  [ -s "$1/port" ] || die "$1 holds no server started by pg-server.sh (no $1/port)"
  cat "$1/port"
}

url_of() {
  echo "postgresql://postgres@127.0.0.1:$(port_of "$1")/postgres"
}

# psql against the server of DIR, unaligned and tuples only, no psqlrc.
q() {
  local dir=$1 port
  shift
  port=$(port_of "$dir")
  "$PGBIN/psql" -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"
}

alive() {
  kill -0 "$1" 2>/dev/null
}

# Points DIR's configuration at PORT and DIR (appended: the last setting wins, so a standby's
# copy of its primary's file is overridden the same way).
configure() {
  local dir=$1 port=$2 fast=$3
  {
    echo ""
    echo "# pg-server.sh"
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir'"
    echo "max_connections = 200"
    echo "wal_level = replica"
    echo "max_wal_senders = 10"
    echo "max_replication_slots = 10"
    echo "wal_keep_size = '256MB'"
    echo "hot_standby = on"
    echo "log_line_prefix = '%m [%p] '"
    if [ "$fast" = 1 ]; then
      echo "fsync = off"
      echo "synchronous_commit = off"
      echo "full_page_writes = off"
    fi
  } >>"$dir/data/postgresql.conf"
  echo "$port" >"$dir/port"
}

# Starts the cluster of DIR as configured; records the postmaster's pid.
pg_start() {
  local dir=$1
  if ! as_pg "$dir" "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null; then
    log "the server of $dir did not start; the end of $dir/log:"
    tail -n 20 "$dir/log" >&2 || true
    return 1
  fi
  head -n 1 "$dir/data/postmaster.pid" >"$dir/pid"
}

cmd_start() {
  local dir=${1:-} fast=0
  [ -n "$dir" ] || die "usage: start DIR [--fast]"
  shift
  for a in "$@"; do
    case $a in
      --fast) fast=1 ;;
      *) die "start: unknown option $a" ;;
    esac
  done
  ensure_binaries
  dir=$(prepare_dir "$dir")
  [ ! -e "$dir/data" ] || die "$dir/data exists already (use restart)"
  as_pg "$dir" "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
    --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  local try port
  for try in $(seq "$START_TRIES"); do
    port=$(free_port)
    configure "$dir" "$port" "$fast"
    if pg_start "$dir"; then
      url_of "$dir"
      return 0
    fi
    log "start on port $port failed (try $try of $START_TRIES)"
  done
  die "could not start a server in $dir"
}

# Waits (bounded) until PID is gone; a zombie counts as present, as PostgreSQL sees it.
wait_gone() {
  local pid=$1 _
  for _ in $(seq "$GONE_WAIT"); do
    alive "$pid" || return 0
    sleep 0.1
  done
  die "process $pid is still there after $((GONE_WAIT / 10)) s"
}

cmd_stop() {
  local dir
  dir=$(abs_dir "${1:?usage: stop DIR}")
  [ -s "$dir/pid" ] || return 0
  local pid _
  pid=$(cat "$dir/pid")
  if ! alive "$pid" || [ ! -e "$dir/data/postmaster.pid" ]; then
    return 0
  fi
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq "$STOP_WAIT"); do
    [ -e "$dir/data/postmaster.pid" ] || return 0
    alive "$pid" || return 0
    sleep 0.1
  done
  log "fast shutdown of $pid took over $((STOP_WAIT / 10)) s; immediate shutdown"
  kill -QUIT "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    [ -e "$dir/data/postmaster.pid" ] || return 0
    sleep 0.1
  done
  die "the server of $dir (pid $pid) did not stop"
}

cmd_kill() {
  local dir
  dir=$(abs_dir "${1:?usage: kill DIR}")
  [ -s "$dir/pid" ] || die "$dir holds no server started by pg-server.sh (no $dir/pid)"
  local pid
  pid=$(cat "$dir/pid")
  if alive "$pid"; then
    # Stopped first so that it forks no child between the listing and the kill.
    kill -STOP "$pid" 2>/dev/null || true
    local children
    children=$(pgrep -P "$pid" || true)
    # shellcheck disable=SC2086
    kill -KILL "$pid" $children 2>/dev/null || true
  fi
  wait_gone "$pid"
}

cmd_restart() {
  local dir
  dir=$(abs_dir "${1:?usage: restart DIR}")
  ensure_binaries
  if [ -s "$dir/pid" ]; then
    local old
    old=$(cat "$dir/pid")
    if [ -e "$dir/data/postmaster.pid" ] && [ "$(head -n 1 "$dir/data/postmaster.pid")" = "$old" ] &&
      alive "$old" && [ "$(ps -o stat= -p "$old" | cut -c1)" != Z ]; then
      die "the server of $dir is running (pid $old)"
    fi
    # A killed postmaster stays a zombie for a while, and PostgreSQL refuses the data
    # directory while kill(old, 0) succeeds.
    wait_gone "$old"
  fi
  pg_start "$dir" || die "restart of $dir failed"
  url_of "$dir"
}

cmd_standby() {
  local primary=${1:-} standby=${2:-} mode=${3:-}
  [ -n "$primary" ] && [ -n "$standby" ] || die "usage: standby PRIMARY_DIR STANDBY_DIR --sync|--async"
  case $mode in
    --sync) mode=sync ;;
    --async) mode=async ;;
    *) die "standby: say --sync or --async" ;;
  esac
  ensure_binaries
  primary=$(abs_dir "$primary")
  standby=$(prepare_dir "$standby")
  [ ! -e "$standby/data" ] || die "$standby/data exists already"
  local pport port name
  pport=$(port_of "$primary")
  port=$(free_port)
  name="standby_$port"
  as_pg "$standby" "$PGBIN/pg_basebackup" -D "$standby/data" -R -X stream -c fast --no-sync \
    -h 127.0.0.1 -p "$pport" -U postgres >"$standby/basebackup.log" 2>&1 ||
    { cat "$standby/basebackup.log" >&2; die "pg_basebackup failed"; }
  configure "$standby" "$port" 0
  # Its own name for the primary, and no synchronous standby of its own once promoted (the
  # copy may hold the primary's setting).
  {
    echo "primary_conninfo = 'host=127.0.0.1 port=$pport user=postgres application_name=$name'"
    echo "synchronous_standby_names = ''"
  } >>"$standby/data/postgresql.auto.conf"
  echo "$name" >"$standby/name"
  echo "$primary" >"$standby/primary"
  if [ "$mode" = sync ]; then
    q "$primary" -c "ALTER SYSTEM SET synchronous_standby_names = '$name'" >/dev/null
  else
    q "$primary" -c "ALTER SYSTEM SET synchronous_standby_names = ''" >/dev/null
  fi
  q "$primary" -c "SELECT pg_reload_conf()" >/dev/null
  pg_start "$standby" || die "the standby did not start"
  local _ state=""
  for _ in $(seq "$REPL_WAIT"); do
    state=$(q "$primary" -c "SELECT sync_state || '/' || state FROM pg_stat_replication WHERE application_name = '$name'" || true)
    [ "$state" = "$mode/streaming" ] && break
    sleep 0.1
  done
  [ "$state" = "$mode/streaming" ] ||
    die "the standby is not $mode/streaming after $((REPL_WAIT / 10)) s (pg_stat_replication: '$state')"
  url_of "$standby"
}

cmd_promote() {
  local dir
  dir=$(abs_dir "${1:?usage: promote DIR}")
  as_pg "$dir" "$PGBIN/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
  local _
  for _ in $(seq 600); do
    [ "$(q "$dir" -c 'SELECT pg_is_in_recovery()' || true)" = f ] && return 0
    sleep 0.1
  done
  die "$dir is still in recovery after promote"
}

cmd_walsender_pid() {
  local dir pid
  dir=$(abs_dir "${1:?usage: walsender-pid PRIMARY_DIR}")
  pid=$(q "$dir" -c "SELECT pid FROM pg_stat_replication ORDER BY pid LIMIT 1")
  [ -n "$pid" ] || die "no walsender on the server of $dir"
  echo "$pid"
}

run_cleanup() {
  local f pid _
  # Servers left behind under TMPDIR (a test interrupted before it stopped its own): an
  # immediate shutdown (SIGQUIT) of each postmaster, which stops its children and removes its
  # pid file.
  while IFS= read -r f; do
    pid=$(head -n 1 "$f" 2>/dev/null || true)
    [ -n "$pid" ] && alive "$pid" || continue
    log "stopping a server left behind in ${f%/postmaster.pid}"
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -e "$f" ] || break
      sleep 0.1
    done
  done < <(find "$RUN_TMP" -maxdepth 6 -name postmaster.pid 2>/dev/null)
  cmd_stop "$RUN_DIR" || true
  rm -rf "$RUN_DIR" "$RUN_TMP"
}

cmd_run() {
  local fast=()
  while [ $# -gt 0 ]; do
    case $1 in
      --fast) fast=(--fast) ;;
      --) shift; break ;;
      *) die "usage: run [--fast] -- CMD..." ;;
    esac
    shift
  done
  [ $# -gt 0 ] || die "usage: run [--fast] -- CMD..."
  RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/somna-pg.XXXXXX")
  RUN_TMP=$(mktemp -d "${TMPDIR:-/tmp}/somna-pg-tmp.XXXXXX")
  trap run_cleanup EXIT
  trap 'exit 130' INT TERM
  local url
  url=$(cmd_start "$RUN_DIR" "${fast[@]}")
  log "server $url (in $RUN_DIR)"
  export SOMNA_TEST_PG=$url
  # CMD's temporary files (and the private servers of the tests) live under RUN_TMP, so that a
  # server left behind by an interrupted test is killed and removed with it. A sibling of
  # RUN_DIR (which belongs to the server's user), open like /tmp: some tests run the CLI as
  # another user on a file in there.
  chmod 1777 "$RUN_TMP"
  export TMPDIR=$RUN_TMP
  local rc=0
  "$@" || rc=$?
  return "$rc"
}

main() {
  local verb=${1:-}
  [ $# -gt 0 ] && shift
  case $verb in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    kill) cmd_kill "$@" ;;
    restart) cmd_restart "$@" ;;
    standby) cmd_standby "$@" ;;
    promote) cmd_promote "$@" ;;
    walsender-pid) cmd_walsender_pid "$@" ;;
    url) url_of "$(abs_dir "${1:?usage: url DIR}")" ;;
    psql)
      local dir
      local dir port
      dir=$(abs_dir "${1:?usage: psql DIR [ARGS...]}")
      shift
      port=$(port_of "$dir")
      exec "$PGBIN/psql" -X -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"
      ;;
    run) cmd_run "$@" ;;
    install) install_pg ;;
    *)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
