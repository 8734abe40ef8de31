#!/usr/bin/env bash
# A throwaway Patroni cluster on loopback for somna's failover test (tests/cli/pg_patroni.rs):
# one etcd (Debian's etcd-server), two PostgreSQL 15 nodes under Patroni (Debian's patroni) in
# `synchronous_mode`, a leader and its synchronous replica. Everything lives in one directory DIR
# (DIR/etcd, DIR/node1, DIR/node2: each with its config, log, pid and data); nothing is written
# outside it, and every wait is bounded.
#
#   patroni.sh start DIR          etcd, then node1 (bootstraps, leads), then node2 (a synchronous
#                                 replica); prints the two-host URL
#                                 postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres
#                                 ?target_session_attrs=read-write
#   patroni.sh leader DIR         the name of the node that leads (node1 or node2)
#   patroni.sh kill-leader DIR    SIGKILL the leading node whole: its Patroni, its postmaster and
#                                 their children (a machine that died); prints its name
#   patroni.sh wait-leader DIR N  waits until a node other than N leads and accepts writes; prints it
#   patroni.sh stop DIR           stops everything started in DIR (SIGTERM, then SIGKILL)
#   patroni.sh install            apt-get install -y patroni etcd-server (root only)
#
# As root, Patroni and PostgreSQL run as the `postgres` user (PostgreSQL refuses root). The leader
# key lives 20 s in etcd (`ttl`, Patroni's least), so a killed leader is replaced in about 20-30 s.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
WAIT=900 # tenths of a second: 90 s for any one step

die() {
  echo "patroni.sh: $*" >&2
  exit 1
}
log() { echo "patroni.sh: $*" >&2; }

# shellcheck source=scripts/free-port.sh
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"
# shellcheck source=scripts/pg-user.sh
. "$(dirname "${BASH_SOURCE[0]}")/pg-user.sh"

install_packages() {
  is_root || die "installing patroni and etcd-server needs root"
  log "apt-get install -y patroni etcd-server"
  # Debian's etcd-server and patroni start nothing under a policy-rc.d that denies it; any
  # service they did start is not ours and is left alone.
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patroni etcd-server >&2 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patroni etcd-server >&2; }
}

ensure_binaries() {
  if ! command -v patroni >/dev/null || ! command -v etcd >/dev/null; then
    is_root && install_packages
  fi
  command -v patroni >/dev/null || die "patroni is not installed (apt-get install patroni)"
  command -v etcd >/dev/null || die "etcd is not installed (apt-get install etcd-server)"
  [ -x "$PGBIN/initdb" ] || die "no PostgreSQL binaries in $PGBIN (install postgresql-15 or set PGBIN)"
}


# Starts CMD... in the background as the PostgreSQL user, its pid in PIDFILE, its output in LOG.
spawn() {
  local dir=$1 pidfile=$2 logfile=$3
  shift 3
  # exec keeps the pid: the one written is the program's own, not a shell's.
  as_pg "$dir" setsid bash -c 'echo $$ >"$0"; log=$1; shift; exec "$@" >"$log" 2>&1' \
    "$pidfile" "$logfile" "$@" </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 50); do
    [ -s "$pidfile" ] && return 0
    sleep 0.1
  done
  die "$* did not start"
}

# GET http://127.0.0.1:PORT/PATH: the HTTP status, or 000 when nothing answers.
http_status() {
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/{sys.argv[2]}", timeout=2) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
PY
}

# Waits until node N's REST API answers 200 on PATH (primary, sync, ...).
wait_status() {
  local dir=$1 node=$2 path=$3 _
  for _ in $(seq "$WAIT"); do
    [ "$(http_status "$(cat "$dir/$node/api_port")" "$path")" = 200 ] && return 0
    sleep 0.1
  done
  log "$node never answered 200 on /$path; the end of its log:"
  tail -n 30 "$dir/$node/log" >&2 || true
  return 1
}

start_etcd() {
  local dir=$1 client peer
  mkdir -p "$dir/etcd"
  client=$(free_port)
  peer=$(free_port)
  echo "$client" >"$dir/etcd/port"
  is_root && chown -R postgres:postgres "$dir/etcd"
  spawn "$dir/etcd" "$dir/etcd/pid" "$dir/etcd/log" etcd --name etcd0 --data-dir "$dir/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "etcd0=http://127.0.0.1:$peer" --initial-cluster-state new
  local _
  for _ in $(seq "$WAIT"); do
    [ "$(http_status "$client" health)" = 200 ] && return 0
    sleep 0.1
  done
  tail -n 20 "$dir/etcd/log" >&2 || true
  die "etcd did not become healthy"
}

# Writes DIR/NODE/patroni.yml.
node_config() {
  local dir=$1 node=$2 pg=$3 api=$4 etcd=$5
  cat >"$dir/$node/patroni.yml" <<YML
scope: somna-test
name: $node
restapi:
  listen: 127.0.0.1:$api
  connect_address: 127.0.0.1:$api
etcd3:
  hosts: 127.0.0.1:$etcd
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
  pg_hba:
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
    - local all all trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $dir/$node/data
  bin_dir: $PGBIN
  pgpass: $dir/$node/pgpass
  authentication:
    superuser:
      username: postgres
      password: unused-trust-auth
    replication:
      username: replicator
      password: unused-trust-auth
  parameters:
    unix_socket_directories: $dir/$node
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
YML
}

start_node() {
  local dir=$1 node=$2 etcd=$3 pg api
  mkdir -p "$dir/$node"
  pg=$(free_port)
  api=$(free_port)
  echo "$pg" >"$dir/$node/port"
  echo "$api" >"$dir/$node/api_port"
  node_config "$dir" "$node" "$pg" "$api" "$etcd"
  is_root && chown -R postgres:postgres "$dir/$node"
  spawn "$dir/$node" "$dir/$node/pid" "$dir/$node/log" patroni "$dir/$node/patroni.yml"
}

cmd_start() {
  local dir=${1:-}
  [ -n "$dir" ] || die "usage: start DIR"
  ensure_binaries
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  is_root && chown postgres:postgres "$dir"
  start_etcd "$dir"
  local etcd
  etcd=$(cat "$dir/etcd/port")
  start_node "$dir" node1 "$etcd"
  wait_status "$dir" node1 primary || die "node1 did not become the leader"
  start_node "$dir" node2 "$etcd"
  wait_status "$dir" node2 sync || die "node2 did not become a synchronous replica"
  echo "postgresql://postgres@127.0.0.1:$(cat "$dir/node1/port"),127.0.0.1:$(cat "$dir/node2/port")/postgres?target_session_attrs=read-write"
}

cmd_leader() {
  local dir=${1:-} node
  [ -n "$dir" ] || die "usage: leader DIR"
  for node in node1 node2; do
    if [ "$(http_status "$(cat "$dir/$node/api_port")" primary)" = 200 ]; then
      echo "$node"
      return 0
    fi
  done
  die "no node leads"
}

# SIGKILL PID and every process below it (children first seen, then the pid itself).
kill_tree() {
  local pid=$1 child
  for child in $(pgrep -P "$pid" 2>/dev/null || true); do
    kill_tree "$child"
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_kill_leader() {
  local dir=${1:-} node postmaster=""
  [ -n "$dir" ] || die "usage: kill-leader DIR"
  node=$(cmd_leader "$dir")
  [ -s "$dir/$node/data/postmaster.pid" ] && postmaster=$(head -n 1 "$dir/$node/data/postmaster.pid")
  # Patroni first, so that it cannot restart the server it watches; then the server.
  kill_tree "$(cat "$dir/$node/pid")"
  [ -n "$postmaster" ] && kill_tree "$postmaster"
  echo "$node"
}

cmd_wait_leader() {
  local dir=${1:-} old=${2:-} node _
  [ -n "$dir" ] && [ -n "$old" ] || die "usage: wait-leader DIR OLD_LEADER"
  for _ in $(seq "$WAIT"); do
    for node in node1 node2; do
      [ "$node" = "$old" ] && continue
      if [ "$(http_status "$(cat "$dir/$node/api_port")" primary)" = 200 ]; then
        echo "$node"
        return 0
      fi
    done
    sleep 0.1
  done
  die "no node other than $old leads after $((WAIT / 10)) s"
}

stop_pid() {
  local pidfile=$1 pid _
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill_tree "$pid"
}

cmd_stop() {
  local dir=${1:-} node
  [ -n "$dir" ] || die "usage: stop DIR"
  [ -d "$dir" ] || return 0
  for node in node1 node2; do
    stop_pid "$dir/$node/pid"
    # A server whose Patroni was killed outlives it: stop it by its own pid.
    if [ -s "$dir/$node/data/postmaster.pid" ]; then
      local pm
      pm=$(head -n 1 "$dir/$node/data/postmaster.pid")
      kill -0 "$pm" 2>/dev/null && kill_tree "$pm"
    fi
  done
  stop_pid "$dir/etcd/pid"
}

main() {
  local verb=${1:-}
  [ $# -gt 0 ] && shift
  case $verb in
    start) cmd_start "$@" ;;
    leader) cmd_leader "$@" ;;
    kill-leader) cmd_kill_leader "$@" ;;
    wait-leader) cmd_wait_leader "$@" ;;
    stop) cmd_stop "$@" ;;
    install) install_packages ;;
    *)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
