#!/bin/sh
# Keeps changing the sample rows, mostly without touching their TOASTed columns (Debezium then
# ships those as placeholders, and the hydrator fills them in); now and then a biography is
# rewritten, so the stored images change too. PG* variables say where the database is.
set -eu
i=0
while true; do
    i=$((i + 1))
    id=$(( (i * 7) % 10 + 1 ))
    if [ $((i % 15)) -eq 0 ]; then
        sql="UPDATE customers SET bio = repeat('Customer $id rewrote the biography at ' || now() || '. ', 120), visits = visits + 1, last_seen = now() WHERE id = $id"
    else
        sql="UPDATE customers SET visits = visits + 1, last_seen = now() WHERE id = $id"
    fi
    psql -v ON_ERROR_STOP=1 -q -c "$sql"
    sleep "${WORKLOAD_PAUSE:-2}"
done
