# shellcheck shell=bash
# Sourced by pg-server.sh and patroni.sh: who runs PostgreSQL's programs. As root they run as the
# `postgres` user (initdb, pg_ctl and postgres refuse root); as another user, directly.

is_root() {
  [ "$(id -u)" = 0 ]
}

# Runs a server binary as the user that may run it, from DIR (so that an unreadable working
# directory such as /root does not bother it).
as_pg() {
  local dir=$1
  shift
  if is_root; then
    (cd "$dir" && runuser -u postgres -- "$@")
  else
    (cd "$dir" && "$@")
  fi
}
