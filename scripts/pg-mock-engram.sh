#!/usr/bin/env bash
# NOT engram. A stand-in over psql for the verbs the PostgreSQL fault tests use (init, note
# [--key], session append/load, export, verify), written to check the harness itself (the
# server script, PgServer, the tests' ledgers and their ability to see loss) before the real
# backend existed. The tests run it only when told to:
#   ENGRAM_TEST_BIN=$PWD/scripts/pg-mock-engram.sh scripts/pg-server.sh run -- \
#       cargo test --release --test cli pg_ -- --nocapture --test-threads 1
# It waits for an unreachable server up to --busy-timeout-ms and reports a connection lost
# mid-transaction as a failure (an unknown outcome), as engram must; it ignores
# ENGRAM_PG_FAULT_EVERY.
set -uo pipefail
db=""; bt=10000
while [ $# -gt 0 ]; do
  case $1 in
    --db) db=$2; shift 2 ;;
    --busy-timeout-ms) bt=$2; shift 2 ;;
    --json) shift ;;
    *) break ;;
  esac
done
schema=$(sed -n 's/.*[?&]schema=\([a-z0-9_]*\).*/\1/p' <<<"$db")
conn=$(sed -E 's/([?&])schema=[a-z0-9_]*&?/\1/; s/[?&]$//' <<<"$db")
[ -n "$schema" ] || { echo "engram: no schema in $db" >&2; exit 2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
deadline=$(( $(now_ms) + bt ))
errf=$(mktemp)
trap 'rm -f "$errf"' EXIT
sql() {
  local input out rc err
  input=$(cat)
  while :; do
    out=$(psql "$conn" -X -q -At -v ON_ERROR_STOP=1 -v s="$schema" "$@" <<<"$input" 2>"$errf"); rc=$?
    err=$(cat "$errf")
    if [ $rc = 0 ]; then printf '%s\n' "$out"; return 0; fi
    if grep -q 'connection to server at .* failed\|the database system is' <<<"$err"; then
      [ "$(now_ms)" -lt "$deadline" ] || { echo "engram: busy: $err" >&2; exit 4; }
      sleep 0.05
      continue
    fi
    echo "engram: $err" >&2
    exit 1
  done
}
verb=${1:-}; shift
case $verb in
  init)
    sql <<'SQL' >/dev/null
CREATE SCHEMA :"s";
CREATE TABLE :"s".mem (id bigint PRIMARY KEY, text text NOT NULL, key text UNIQUE);
CREATE TABLE :"s".sess (sid text, seq bigint, content text, PRIMARY KEY (sid, seq));
SQL
    echo "Created." ;;
  note)
    key=""; text=""
    while [ $# -gt 0 ]; do case $1 in --key) key=$2; shift 2 ;; *) text=$1; shift ;; esac; done
    id=$(sql -v t="$text" -v k="$key" <<'SQL'
BEGIN;
LOCK TABLE :"s".mem IN EXCLUSIVE MODE;
WITH e AS (SELECT id FROM :"s".mem WHERE :'k' <> '' AND key = :'k'),
     i AS (INSERT INTO :"s".mem (id, text, key)
           SELECT (SELECT count(*) FROM :"s".mem), :'t', NULLIF(:'k', '')
           WHERE NOT EXISTS (SELECT 1 FROM e) RETURNING id)
SELECT id FROM i UNION ALL SELECT id FROM e;
COMMIT;
SQL
) || exit $?
    echo "Saved as #$id." ;;
  session)
    sub=$1; sid=$2
    case $sub in
      append)
        body=$(cat); items=${body#[}; items=${items%]}
        rev=$(sql -v id="$sid" -v c="$items" <<'SQL'
BEGIN;
LOCK TABLE :"s".sess IN EXCLUSIVE MODE;
INSERT INTO :"s".sess SELECT :'id', count(*), :'c' FROM :"s".sess WHERE sid = :'id' RETURNING seq + 1;
COMMIT;
SQL
) || exit $?
        echo "Appended 1 items at revision $rev." ;;
      load)
        sql -v id="$sid" <<'SQL'
SELECT '[' || coalesce(string_agg(content, ',' ORDER BY seq), '') || ']' FROM :"s".sess WHERE sid = :'id';
SQL
        ;;
    esac ;;
  export)
    echo '{"type":"store","format":1}'
    sql <<'SQL'
SELECT json_build_object('type','memory','scope','default','id',id,'text',text)::text FROM :"s".mem ORDER BY id;
SQL
    ;;
  verify) sql <<<'SELECT count(*) FROM :"s".mem;' >/dev/null && echo OK ;;
  *) echo "mock: $verb?" >&2; exit 2 ;;
esac
