"""A real Postgres for the tests (docs/testing.md): a throwaway database with logical decoding.

Server: HYDRATOR_TEST_PG_DSN if set; else the local server on 127.0.0.1:5432 (user postgres, trust
auth); else testcontainers' Postgres (started with wal_level=logical) when a Docker engine answers.
Each `throwaway_database` creates a uniquely named database and drops it afterwards, together
with any replication slot a test left behind in it (a slot pins WAL and blocks DROP DATABASE).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


class PostgresUnavailable(RuntimeError):
    """No usable server; the message is the skip reason."""


@dataclass(frozen=True)
class PgDatabase:
    """One database on the test server; `dsn` is a libpq conninfo string for psycopg."""

    dsn: str

    @property
    def params(self) -> dict[str, str]:
        return {k: str(v) for k, v in conninfo_to_dict(self.dsn).items()}

    @property
    def host(self) -> str:
        return self.params.get("host", "127.0.0.1")

    @property
    def port(self) -> int:
        return int(self.params.get("port", "5432"))

    @property
    def user(self) -> str:
        return self.params.get("user", "postgres")

    @property
    def password(self) -> str:
        return self.params.get("password", "")

    @property
    def dbname(self) -> str:
        return self.params["dbname"]

    def connect(self, autocommit: bool = True) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=autocommit)

    def execute(self, statement: str, params: tuple[object, ...] | None = None) -> None:
        with self.connect() as conn:
            conn.execute(statement, params)  # type: ignore[arg-type]


def check_server(dsn: str) -> None:
    """Raise PostgresUnavailable (the reason) unless the server can do logical decoding."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SHOW wal_level").fetchone()
    except psycopg.Error as exc:
        raise PostgresUnavailable(f"no Postgres answers at {dsn!r}: {exc}".strip()) from exc
    wal_level = row[0] if row else "?"
    if wal_level != "logical":
        raise PostgresUnavailable(
            f"Postgres at {dsn!r} has wal_level={wal_level}; logical decoding needs "
            "ALTER SYSTEM SET wal_level = logical and a restart"
        )


def drop_slots(
    conn: psycopg.Connection, database: str | None = None, slot_name: str | None = None
) -> None:
    """Drop replication slots (of one database, or one by name), ending any walsender holding one.

    A slot stays active for a moment after the connector closes its replication connection,
    and pg_drop_replication_slot refuses an active slot: terminate the holder, retry the drop.
    """
    where = (
        sql.SQL("database = {}").format(database)
        if database
        else sql.SQL("slot_name = {}").format(slot_name)
    )
    deadline = time.monotonic() + 20
    while True:
        rows = conn.execute(
            sql.SQL("SELECT slot_name, active_pid FROM pg_replication_slots WHERE {}").format(where)
        ).fetchall()
        if not rows:
            return
        try:
            for name, pid in rows:
                if pid is not None:
                    conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
                conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        except psycopg.errors.UndefinedObject:
            pass  # dropped concurrently (the connector's slot.drop.on.stop)


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextmanager
def postgres_server_for_tests() -> Iterator[str]:
    """The libpq DSN of a server that can do logical decoding; PostgresUnavailable otherwise."""
    external = os.environ.get("HYDRATOR_TEST_PG_DSN")
    if external:
        check_server(external)
        yield external
        return
    try:
        check_server(DEFAULT_DSN)
        yield DEFAULT_DSN
        return
    except PostgresUnavailable as local_failure:
        if not _docker_answers():
            raise PostgresUnavailable(
                f"{local_failure}; no Docker engine for a Postgres container either "
                "(set HYDRATOR_TEST_PG_DSN to use another server)"
            ) from None
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer(
        "postgres:15", username="postgres", password="postgres", dbname="postgres", driver=None
    )
    container.with_command(
        "postgres -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20"
    )
    with container:
        dsn = make_conninfo(
            host=container.get_container_host_ip(),
            port=str(container.get_exposed_port(5432)),
            user="postgres",
            password="postgres",
            dbname="postgres",
            connect_timeout="3",
        )
        check_server(dsn)
        yield dsn


@contextmanager
def throwaway_database(base: str, prefix: str = "hydrator_test") -> Iterator[PgDatabase]:
    """A fresh database on the server at DSN `base`, dropped (with its slots) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield PgDatabase(make_conninfo(base, dbname=name))
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            drop_slots(admin, database=name)
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
