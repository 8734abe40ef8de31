# shellcheck shell=bash
# Sourced by pg-server.sh and pgbouncer.sh (each defines `die`).
# A port nothing listens on, below the usual ephemeral range (32768-60999).
free_port() {
  local p _
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found"
}
