#!/usr/bin/env bash
# Turns on Postgres logical decoding (wal_level=logical) on the local server the tests use
# (see docs/testing.md). Needs a restart, so it only acts when the setting is not already on. Without a
# reachable server it says so and leaves the Postgres tests to skip with that reason.
set -u
if [ -n "${HYDRATOR_TEST_PG_DSN:-}" ]; then
  echo "postgres: using HYDRATOR_TEST_PG_DSN; not touching the local server"
  exit 0
fi
psql_local() { psql -h 127.0.0.1 -U postgres -d postgres -Atc "$1" 2>/dev/null; }
level=$(psql_local "SHOW wal_level") || {
  echo "postgres: no server on 127.0.0.1:5432; Postgres/Debezium tests will skip"
  exit 0
}
if [ "$level" = "logical" ]; then
  echo "postgres: wal_level is logical"
  exit 0
fi
version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
if [ -z "$version" ] || ! command -v pg_ctlcluster >/dev/null; then
  echo "postgres: wal_level is $level and pg_ctlcluster is not here to restart it; set wal_level=logical yourself"
  exit 0
fi
psql_local "ALTER SYSTEM SET wal_level = logical" >/dev/null
pg_ctlcluster --skip-systemctl-redirect "$version" main restart
for _ in $(seq 1 30); do
  [ "$(psql_local 'SHOW wal_level')" = "logical" ] && { echo "postgres: wal_level switched to logical"; exit 0; }
  sleep 1
done
echo "postgres: restarted but wal_level is not logical"
exit 1
