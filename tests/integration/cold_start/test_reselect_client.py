"""The re-select client against a real Postgres (hydrator/reselect/client.py): rows by key with
their xmin, a slow database (a lock) answered by the statement timeout without waiting past it,
the rest after a failure, the queries-per-second cap, an unreachable server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from hydrator.core.reselected import same_transaction
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.kafka.local_broker import free_port
from hydrator.reselect.client import PostgresReselect, Table
from hydrator.reselect.settings import ReselectSettings
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.integration

P = "__debezium_unavailable_value"
FORMS = PlaceholderForms(P.encode())
TABLE = Table("public", "items")
SHIPPED = {"body": P, "tags": [P]}


@pytest.fixture
def db(postgres: PgDatabase) -> Iterator[tuple[PgDatabase, int]]:
    """A table of two rows; the id of the transaction that wrote them."""
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY, body text, tags text[])")
        with conn.transaction():
            conn.execute("INSERT INTO items VALUES (1, 'one', '{a,b}'), (2, NULL, NULL)")
            (tx,) = conn.execute("SELECT txid_current()").fetchone()  # type: ignore[misc]
    yield postgres, tx


def test_rows_by_key_with_the_transaction_that_wrote_them(db: tuple[PgDatabase, int]) -> None:
    database, tx = db
    queries: list[tuple[Table, int]] = []
    client = PostgresReselect(
        ReselectSettings(database.dsn), FORMS, on_query=lambda t, n: queries.append((t, n))
    )
    try:
        rows = client.fetch(TABLE, ("id",), [(1,), (2,), (3,), (1,)], SHIPPED)
    finally:
        client.close()
    assert rows is not None and set(rows) == {(1,), (2,)}
    assert rows[(1,)].values == {"body": "one", "tags": ["a", "b"]}
    assert rows[(2,)].values == {"body": None, "tags": None}
    assert same_transaction(rows[(1,)].xmin, tx)
    assert queries == [(TABLE, 3)]  # one query, the keys once each


def test_a_slow_database_costs_one_statement_timeout_then_a_rest(
    db: tuple[PgDatabase, int],
) -> None:
    database, _ = db
    settings = ReselectSettings(database.dsn, statement_timeout_ms=300, retry_after_s=30)
    client = PostgresReselect(settings, FORMS)
    with psycopg.connect(database.dsn) as locker:
        locker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")  # held until the end
        began = time.monotonic()
        assert client.fetch(TABLE, ("id",), [(1,)], SHIPPED) is None
        took = time.monotonic() - began
        assert client.fetch(TABLE, ("id",), [(1,)], SHIPPED) is None  # resting: no wait
        rested = time.monotonic() - began - took
    client.close()
    assert took < 0.3 + 3.0, took
    assert rested < 0.1, rested
    assert (client.stats.failures, client.stats.skipped) == (1, 1)


def test_the_queries_per_second_cap(db: tuple[PgDatabase, int]) -> None:
    database, _ = db
    now = [100.0]
    client = PostgresReselect(
        ReselectSettings(database.dsn, max_qps=2), FORMS, clock=lambda: now[0]
    )
    try:
        answers = [client.fetch(TABLE, ("id",), [(1,)], SHIPPED) for _ in range(3)]
        now[0] += 0.5  # one more query's worth
        answers.append(client.fetch(TABLE, ("id",), [(1,)], SHIPPED))
    finally:
        client.close()
    assert [a is not None for a in answers] == [True, True, False, True]
    assert (client.stats.queries, client.stats.skipped) == (3, 1)


def test_an_unreachable_server_is_a_failure_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    secret = "n0t-in-any-log"
    dsn = f"postgresql://app:{secret}@127.0.0.1:{free_port()}/shop"
    client = PostgresReselect(ReselectSettings(dsn), FORMS)
    began = time.monotonic()
    assert client.fetch(TABLE, ("id",), [(1,)], SHIPPED) is None
    assert time.monotonic() - began < 5.0
    assert client.stats.failures == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "127.0.0.1" in logged and secret not in logged
