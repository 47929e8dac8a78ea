"""The re-select client: reads rows of a Postgres source table by primary key, for placeholders
nothing else can fill (docs/cold-start.md, "Re-select fallback"). An imperative shell: the rules
about what a read row may say are pure (hydrator/core/reselected.py).

What it promises the engine: `fetch` never raises and never waits much longer than the
statement timeout. A database that is slow (the statement timeout), failing or unreachable (the
connect timeout, or no answer within the statement timeout plus a second: the query then runs
on in its own thread, which is left behind) gives None, and the client then rests for
`retry_after_s` (doubling up to a minute while failures go on) before it tries again, so an
outage costs the stream one timeout, not one per batch. `--reselect-max-qps` caps the queries a
second; a batch over the cap gets None too. Every None means: these columns fall back to
`--on-unresolved`.

Credentials come from the DSN (or libpq's environment: PGPASSWORD, PGPASSFILE, ...); no message
this module writes names more than the database's host, port and name, and an error's text has
every secret of the DSN masked.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from hydrator.core.reselected import ReselectedRow
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.postgres.debezium_values import PgColumn, encode_row, select_expression
from hydrator.reselect.settings import ReselectSettings
from hydrator.secrets import redact

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 60.0
# Past the statement timeout, how long the client waits for an answer that will not come (a
# cut network: the server's timeout cannot reach us).
ANSWER_GRACE_S = 1.0
_XMIN = "__hydrator_xmin"
_CATALOG = """
SELECT a.attname, t.typname, e.typname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
"""


@dataclass(frozen=True)
class Table:
    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass
class FetchStats:
    """What the client did, for the engine's counters."""

    queries: int = 0
    failures: int = 0
    skipped: int = 0


class PostgresReselect:
    def __init__(
        self,
        settings: ReselectSettings,
        forms: PlaceholderForms,
        clock: Callable[[], float] = time.monotonic,
        on_query: Callable[[Table, int], None] | None = None,
    ) -> None:
        """`on_query(table, keys)`: told of every query on a source table (tests count them)."""
        self.settings = settings
        self.forms = forms
        self.stats = FetchStats()
        self._clock = clock
        self._on_query = on_query
        self._conn: psycopg.Connection[Any] | None = None
        self._columns: dict[Table, dict[str, PgColumn]] = {}
        self._types: dict[Table, dict[str, str]] = {}
        self._resting_until = 0.0
        self._retry_after_s = settings.retry_after_s
        self._allowance = 0.0
        self._allowance_at: float | None = None

    # -- the one call ---------------------------------------------------------------------------

    def fetch(
        self,
        table: Table,
        key_columns: tuple[str, ...],
        keys: Iterable[tuple[Any, ...]],
        shipped: Mapping[str, Any],
    ) -> dict[tuple[Any, ...], ReselectedRow] | None:
        """The rows of `table` whose primary key (`key_columns`) is one of `keys`, each with the
        columns of `shipped` (column -> the placeholder an event carried for it) encoded as the
        connector ships them, and its xmin; rows not found are absent. None when the database
        cannot answer now (see the module doc)."""
        keys = list(dict.fromkeys(keys))
        now = self._clock()
        if not keys or now < self._resting_until:
            if keys:
                self.stats.skipped += 1
            return None
        if not self._take_query(now):
            self.stats.skipped += 1
            return None
        try:
            result = self._answer_within(lambda: self._fetch(table, key_columns, keys, shipped))
        except Exception as exc:  # whatever it is, the stream goes on
            self._failed(table, exc)
            return None
        self._retry_after_s = self.settings.retry_after_s
        return result

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # -- I/O ------------------------------------------------------------------------------------

    def _fetch(
        self,
        table: Table,
        key_columns: tuple[str, ...],
        keys: list[tuple[Any, ...]],
        shipped: Mapping[str, Any],
    ) -> dict[tuple[Any, ...], ReselectedRow]:
        conn = self._connection()
        columns, types = self._catalog(conn, table)
        missing = [c for c in key_columns if c not in types]
        if missing:
            raise LookupError(f"{table} has no column {missing[0]!r} of the event's key")
        wanted = [c for c in shipped if c in columns and c not in key_columns]
        exprs = [
            sql.SQL(select_expression(columns[c], "{}")).format(sql.Identifier(c)) for c in wanted
        ]
        key_list = sql.SQL(", ").join(sql.Identifier(c) for c in key_columns)
        one_key = sql.SQL("({})").format(
            sql.SQL(", ").join(sql.SQL("%s::{}").format(sql.SQL(types[c])) for c in key_columns)
        )
        query = sql.SQL(
            "SELECT {keys}, xmin::text::bigint AS {xmin}{more} FROM {table} "
            "WHERE ({keys}) IN ({values})"
        ).format(
            keys=key_list,
            xmin=sql.Identifier(_XMIN),
            more=sql.SQL("").join(sql.SQL(", ") + e for e in exprs),
            table=sql.Identifier(table.schema, table.name),
            values=sql.SQL(", ").join([one_key] * len(keys)),
        )
        params = [value for key in keys for value in key]
        self.stats.queries += 1
        if self._on_query is not None:
            self._on_query(table, len(keys))
        rows = conn.execute(query, params).fetchall()
        found: dict[tuple[Any, ...], ReselectedRow] = {}
        width = len(key_columns)
        for row in rows:
            raw = dict(zip(wanted, row[width + 1 :], strict=True))
            values = encode_row(columns, raw, shipped, self.forms)
            found[tuple(normal(v) for v in row[:width])] = ReselectedRow(values, int(row[width]))
        return found

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            conn = psycopg.connect(
                self.settings.dsn,
                autocommit=True,
                connect_timeout=max(2, int(self.settings.connect_timeout_s)),
                application_name="toast-hydrator-reselect",
            )
            conn.execute(
                sql.SQL("SET statement_timeout = {}").format(
                    sql.Literal(int(self.settings.statement_timeout_ms))
                )
            )
            self._conn = conn
        return self._conn

    def _catalog(
        self, conn: psycopg.Connection[Any], table: Table
    ) -> tuple[dict[str, PgColumn], dict[str, str]]:
        """The table's columns, read once per run (a schema change of a live table restarts
        nothing here: a column it lacks is not re-selected)."""
        if table not in self._columns:
            qualified = sql.Identifier(table.schema, table.name).as_string(conn)
            rows = conn.execute(_CATALOG, [qualified]).fetchall()
            self._columns[table] = {
                name: PgColumn(name, elem or typ, elem is not None) for name, typ, elem, _ in rows
            }
            self._types[table] = {name: formatted for name, _, _, formatted in rows}
        return self._columns[table], self._types[table]

    def _answer_within(
        self, work: Callable[[], dict[tuple[Any, ...], ReselectedRow]]
    ) -> dict[tuple[Any, ...], ReselectedRow]:
        """Run `work` in its own thread and wait for it no longer than the timeouts allow; a
        connection that did not answer is abandoned (closed by that thread if it ever returns)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["result"] = work()
            except BaseException as exc:
                box["error"] = exc
            done.set()

        thread = threading.Thread(target=run, name="hydrator-reselect", daemon=True)
        thread.start()
        limit = (
            self.settings.connect_timeout_s
            + self.settings.statement_timeout_ms / 1000
            + ANSWER_GRACE_S
        )
        if not done.wait(limit):
            abandoned, self._conn = self._conn, None
            if abandoned is not None:
                threading.Thread(
                    target=_close_when_done, args=(abandoned, done), daemon=True
                ).start()
            raise TimeoutError(f"no answer within {limit:.1f} s")
        if "error" in box:
            raise box["error"]
        result: dict[tuple[Any, ...], ReselectedRow] = box["result"]
        return result

    # -- limits ---------------------------------------------------------------------------------

    def _take_query(self, now: float) -> bool:
        """A token bucket of `max_qps` tokens a second, holding at most one second's worth."""
        rate = self.settings.max_qps
        if rate is None:
            return True
        burst = max(1.0, rate)
        if self._allowance_at is None:
            self._allowance = burst
        else:
            self._allowance = min(burst, self._allowance + (now - self._allowance_at) * rate)
        self._allowance_at = now
        if self._allowance < 1.0:
            return False
        self._allowance -= 1.0
        return True

    def _failed(self, table: Table, exc: BaseException) -> None:
        self.stats.failures += 1
        self.close()
        rest = self._retry_after_s
        self._resting_until = self._clock() + rest
        self._retry_after_s = min(rest * 2, MAX_RETRY_AFTER_S)
        message = redact(f"{type(exc).__name__}: {str(exc).strip()}", self.settings.secrets())
        first = message.splitlines()[0] if message else type(exc).__name__
        log.warning(
            "re-select from %s (table %s) failed: %s; its columns fall back to "
            "--on-unresolved; next try in %.0f s",
            self.settings.target(),
            table,
            first,
            rest,
        )


def normal(value: Any) -> Any:
    """A key value as the event's JSON key spells it (a uuid as its string)."""
    return str(value) if isinstance(value, UUID) else value


def _close_when_done(conn: psycopg.Connection[Any], done: threading.Event) -> None:
    done.wait()
    with contextlib.suppress(Exception):
        conn.close()
