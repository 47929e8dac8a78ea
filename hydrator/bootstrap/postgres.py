"""Read a table's rows in one consistent snapshot, each as Debezium would ship its `after`.

One REPEATABLE READ, read-only transaction: `pg_current_snapshot()` first (the snapshot every
later statement of the transaction sees, hydrator.core.visibility) with the write-ahead log's
position, then the catalog, then the rows through a server-side cursor, so a table of any size
streams in batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hydrator.core.visibility import SourceSnapshot
from hydrator.errors import ConfigurationError
from hydrator.postgres.debezium_values import (
    ConnectorSettings,
    PgColumn,
    UnsupportedColumn,
    encoder,
    select_expression,
)

FETCH_ROWS = 2000

# The snapshot (the transaction's first statement takes it), then the write-ahead log's position:
# every transaction the snapshot holds wrote its commit record before it (on a standby, the
# position replayed). An event past that position committed after the snapshot.
_SNAPSHOT = """
SELECT pg_current_snapshot()::text,
       (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
             ELSE pg_current_wal_insert_lsn() END - '0/0'::pg_lsn)::bigint
"""

_COLUMNS = """
SELECT a.attname,
       coalesce(e.typname, t.typname),
       e.oid IS NOT NULL,
       a.atttypmod,
       a.attgenerated <> ''
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
 WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""

_PRIMARY_KEY = """
SELECT a.attname
  FROM pg_index i
  JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
 WHERE i.indrelid = %s::regclass AND i.indisprimary
 ORDER BY k.n
"""


class TableError(ConfigurationError, ValueError):
    """The table cannot be bootstrapped (absent, no primary key, a type not supported)."""


@dataclass
class TableRows:
    """What one snapshot read gives: its snapshot, the key columns and the rows."""

    table: str
    snapshot: SourceSnapshot
    # the write-ahead log's position read just after the snapshot was taken (an LSN)
    log_position: int
    key_columns: list[str]
    columns: list[PgColumn]
    rows: Iterator[dict[str, Any]] = field(repr=False)
    count: int | None = None  # an estimate from the catalog, for the progress bar


def _typmod(type_name: str, typmod: int) -> tuple[int | None, int | None]:
    """(precision, scale) from a type modifier (-1: none declared)."""
    if typmod < 0:
        return None, None
    if type_name == "numeric":
        return ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
    if type_name in ("bpchar", "varchar"):
        return typmod - 4, None
    return typmod, None  # timestamp, timestamptz, time, timetz


def read_table(dsn: str, table: str, settings: ConnectorSettings) -> Iterator[TableRows]:
    """A context-like generator: yields one TableRows whose `rows` are valid until it resumes."""
    import psycopg

    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.transaction():
            snapshot_text, log_position = _one(conn.execute(_SNAPSHOT))
            snapshot = SourceSnapshot.parse(snapshot_text)
            try:
                described = conn.execute(_COLUMNS, (table,)).fetchall()
            except psycopg.errors.UndefinedTable:
                raise TableError(f"--table {table}: no such table") from None
            columns = []
            for name, type_name, is_array, typmod, generated in described:
                if generated:
                    continue  # Debezium does not ship generated columns through pgoutput
                precision, scale = _typmod(type_name, typmod)
                columns.append(PgColumn(name, type_name, is_array, precision, scale))
            key_columns = [name for (name,) in conn.execute(_PRIMARY_KEY, (table,)).fetchall()]
            if not key_columns:
                raise TableError(f"--table {table}: the table has no primary key")
            try:
                encoders = [encoder(c, settings) for c in columns]
            except UnsupportedColumn as exc:
                raise TableError(f"--table {table}: {exc}") from None
            estimate = _one(
                conn.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", (table,)
                )
            )[0]
            quote = _quoter(conn)
            select = ", ".join(select_expression(c, quote(c.name)) for c in columns)
            names = [c.name for c in columns]

            def rows() -> Iterator[dict[str, Any]]:
                with conn.cursor(name="hydrator_bootstrap") as cursor:
                    cursor.itersize = FETCH_ROWS
                    cursor.execute(f"SELECT {select} FROM {_qualified(table, quote)}")
                    for raw in cursor:
                        yield {
                            name: None if value is None else encode(value)
                            for name, encode, value in zip(names, encoders, raw, strict=True)
                        }

            yield TableRows(
                table,
                snapshot,
                int(log_position),
                key_columns,
                columns,
                rows(),
                estimate if estimate > 0 else None,
            )


def _one(cursor: Any) -> tuple[Any, ...]:
    row = cursor.fetchone()
    assert row is not None
    return row


def _quoter(conn: Any) -> Any:
    from psycopg import sql

    return lambda name: sql.Identifier(name).as_string(conn)


def _qualified(table: str, quote: Any) -> str:
    if "." in table:
        schema, name = table.split(".", 1)
        return f"{quote(schema)}.{quote(name)}"
    return quote(table)
