"""The demo's real source: a `customers` table on the local Postgres captured by real Debezium.

A throwaway database gets `customers` (default replica identity: Debezium ships placeholders for
unchanged TOASTed values) and its twin `customers_full` (REPLICA IDENTITY FULL: full images);
every statement runs on both. Debezium streams both tables; `DebeziumCapture.truth` pairs each
default-identity record with the twin's record of the same key and rank, which is what the
hydrated record must equal. The database, slot and publication are dropped afterwards.
"""

from __future__ import annotations

import base64
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from hydrator.demo import connect
from hydrator.demo.connector import shared_settings

DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=2"
TABLE = "customers"
TWIN = "customers_full"
TOAST_COLUMNS = ("bio", "profile", "avatar", "tags", "scores", "devices", "prefs")
# A value this long goes out of line (TOAST threshold ~2 KB; STORAGE EXTERNAL: no compression).
BIG = 3000

_DDL = """
CREATE TABLE {table} (
    id      integer PRIMARY KEY,
    name    varchar(40),
    visits  integer,
    bio     text,
    profile jsonb,
    avatar  bytea,
    tags    text[],
    scores  integer[],
    devices uuid[],
    prefs   hstore
)"""
_CASTS = {
    "id": "integer",
    "name": "varchar",
    "visits": "integer",
    "bio": "text",
    "profile": "jsonb",
    "avatar": "bytea",
    "tags": "text[]",
    "scores": "integer[]",
    "devices": "uuid[]",
    "prefs": "hstore",
}
# records Debezium writes per statement kind: a delete is followed by a tombstone, a key change
# is DELETE + tombstone + CREATE
_RECORDS = {"insert": 1, "update": 1, "delete": 2, "key_change": 3}


def unavailable_reason(dsn: str = DSN) -> str | None:
    """Why the real source cannot run here; None when it can."""
    reason = connect.unavailable_reason()
    if reason is not None:
        return reason
    import psycopg  # the check above found it

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SHOW wal_level").fetchone()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"no Postgres answers on 127.0.0.1:5432 ({first})"
    level = row[0] if row else "?"
    if level != "logical":
        return f"Postgres on 127.0.0.1:5432 has wal_level={level}, logical decoding needs logical"
    return None


@dataclass(frozen=True)
class Statement:
    kind: str
    sql: str  # with {table}
    params: tuple[Any, ...]


@dataclass
class DebeziumCapture:
    topic: str
    twin_topic: str
    records: int  # per table


def workload(target_records: int, seed: int = 11) -> list[Statement]:
    """Inserts of rows with big TOASTed values, updates that leave them unchanged (mostly) or
    rewrite one, deletes and primary-key changes, making exactly `target_records` records."""
    rng = random.Random(seed)
    live: list[int] = []
    next_id = 1
    statements: list[Statement] = []
    records = 0

    def add(statement: Statement) -> None:
        nonlocal records
        statements.append(statement)
        records += _RECORDS[statement.kind]

    initial = max(4, min(40, target_records // 10))
    while records < target_records:
        op = (
            "insert"
            if len(live) < initial
            else rng.choices(
                ("update", "update_toast", "delete", "key_change", "insert"), (60, 12, 6, 8, 4)
            )[0]
        )
        if _RECORDS.get(op, 1) > target_records - records:
            op = "update"  # exactly the records asked for: the last statements make one each
        if op == "insert":
            add(_insert(next_id, rng))
            live.append(next_id)
            next_id += 1
        elif op == "update":
            add(
                Statement(
                    "update",
                    "UPDATE {table} SET visits = visits + 1, name = %s WHERE id = %s",
                    (_word(rng, 10), rng.choice(live)),
                )
            )
        elif op == "update_toast":
            column = rng.choice(TOAST_COLUMNS)
            add(
                Statement(
                    "update",
                    f"UPDATE {{table}} SET {column} = %s::{_CASTS[column]}, "
                    "visits = visits + 1 WHERE id = %s",
                    (_value(rng, column), rng.choice(live)),
                )
            )
        elif op == "delete":
            key = live.pop(rng.randrange(len(live)))
            add(Statement("delete", "DELETE FROM {table} WHERE id = %s", (key,)))
        else:
            index = rng.randrange(len(live))
            old, live[index] = live[index], next_id
            next_id += 1
            add(
                Statement(
                    "key_change",
                    "UPDATE {table} SET id = %s, visits = visits + 1 WHERE id = %s",
                    (live[index], old),
                )
            )
    return statements


def _insert(key: int, rng: random.Random) -> Statement:
    columns = ["id", "name", "visits", *TOAST_COLUMNS]
    values = [key, _word(rng, 10), 0, *(_value(rng, c) for c in TOAST_COLUMNS)]
    placeholders = ", ".join(f"%s::{_CASTS[c]}" for c in columns)
    return Statement(
        "insert",
        f"INSERT INTO {{table}} ({', '.join(columns)}) VALUES ({placeholders})",
        tuple(values),
    )


def _value(rng: random.Random, column: str) -> Any:
    from psycopg.types.json import Jsonb

    if rng.random() < 0.05:
        return None
    if column == "bio":
        return _text(rng, BIG)
    if column == "profile":
        return Jsonb({f"f{i}": _text(rng, 100) for i in range(BIG // 100)})
    if column == "avatar":
        return rng.randbytes(BIG)
    if column == "tags":
        return [_word(rng, 16) for _ in range(BIG // 16)]
    if column == "scores":
        return [rng.randrange(-(2**31), 2**31) for _ in range(BIG // 4)]
    if column == "devices":
        return [uuid.UUID(int=rng.getrandbits(128)) for _ in range(BIG // 16)]
    return {f"k{i}": _word(rng, 30) for i in range(BIG // 30)}  # prefs (hstore)


def _text(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()[:n]


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=n))


def capture(
    bootstrap_servers: str,
    topic_prefix: str,
    partitions: int,
    target_records: int,
    schemas: bool = False,
    dsn: str = DSN,
    timeout_s: float = 60,
    schema_registry_url: str | None = None,
) -> DebeziumCapture:
    """Run the workload on both tables while Debezium streams them to the broker (through Kafka
    Connect's AvroConverter and that registry when `schema_registry_url` is given)."""
    import psycopg

    statements = workload(target_records)
    expected = sum(_RECORDS[s.kind] for s in statements)
    with _database(dsn) as db_dsn:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            _create_tables(conn)
        bridge = _Bridge(
            bootstrap_servers, db_dsn, topic_prefix, partitions, schemas, schema_registry_url
        )
        with bridge:
            with psycopg.connect(db_dsn) as conn:
                _register_hstore(conn)
                for statement in statements:
                    for table in (TABLE, TWIN):
                        with conn.transaction():
                            conn.execute(statement.sql.format(table=table), statement.params)
            bridge.wait_for(2 * expected, timeout_s)
    return DebeziumCapture(bridge.topic(TABLE), bridge.topic(TWIN), expected)


def _create_tables(conn: Any) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS hstore")
    for table in (TABLE, TWIN):
        conn.execute(_DDL.format(table=table))
        for column in TOAST_COLUMNS:
            # out of line, uncompressed: an untouched value is an unchanged TOAST pointer
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET STORAGE EXTERNAL")
    conn.execute(f"ALTER TABLE {TWIN} REPLICA IDENTITY FULL")


def _register_hstore(conn: Any) -> None:
    from psycopg.types import TypeInfo
    from psycopg.types.hstore import register_hstore

    info = TypeInfo.fetch(conn, "hstore")
    if info is None:
        raise RuntimeError("the hstore extension is missing")
    register_hstore(info, conn)


@contextmanager
def _database(dsn: str) -> Iterator[str]:
    """A throwaway database; dropped (with its replication slots) afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"hydrator_demo_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            _drop_slots(admin, name)
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _drop_slots(conn: Any, database: str) -> None:
    """A slot stays active a moment after the connector lets go; end its holder, then drop."""
    import psycopg

    deadline = time.monotonic() + 20
    while True:
        rows = conn.execute(
            "SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = %s",
            (database,),
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
            pass  # the connector's slot.drop.on.stop got there first


@dataclass
class _Bridge:
    """Debezium in a background thread; each batch is converted and produced, then flushed
    before the engine may commit its offsets (what Kafka Connect's worker does)."""

    bootstrap_servers: str
    dsn: str
    topic_prefix: str
    partitions: int
    schemas: bool
    schema_registry_url: str | None = None
    slot: str = field(default_factory=lambda: f"hydrator_demo_{uuid.uuid4().hex[:10]}")
    produced: int = 0
    _error: BaseException | None = None
    _completion: str | None = None

    def topic(self, table: str) -> str:
        return f"{self.topic_prefix}.public.{table}"

    def __enter__(self) -> _Bridge:
        from psycopg.conninfo import conninfo_to_dict

        from hydrator.demo.publish import create_topic

        for table in (TABLE, TWIN):
            create_topic(self.bootstrap_servers, self.topic(table), self.partitions)
        params = {k: str(v) for k, v in conninfo_to_dict(self.dsn).items()}
        self._cond = threading.Condition()
        self._producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "partitioner": "murmur2_random",  # the Java client's key partitioning
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.max.bytes": 16 * 1024 * 1024,
            }
        )
        self._serializer = connect.ConnectSerializer(self.schemas, self.schema_registry_url)
        properties = {
            **shared_settings(),
            "name": self.slot,
            "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
            "offset.flush.interval.ms": "1000",
            "database.hostname": params.get("host", "127.0.0.1"),
            "database.port": params.get("port", "5432"),
            "database.user": params.get("user", "postgres"),
            "database.password": params.get("password", ""),
            "database.dbname": params["dbname"],
            "topic.prefix": self.topic_prefix,
            "slot.name": self.slot,
            "slot.drop.on.stop": "true",
            "publication.name": f"{self.slot}_pub",
            "table.include.list": f"public.{TABLE},public.{TWIN}",
            "snapshot.mode": "no_data",
        }
        self._engine = connect.engine_class()(
            properties=properties, handler=connect.batch_handler(self._produce), format="connect"
        )
        self._engine.on_completion = self._completed
        self._thread = threading.Thread(target=self._run, name="debezium", daemon=True)
        self._thread.start()
        try:
            self._wait_streaming(60)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._engine.close()
        self._thread.join(30)
        self._producer.flush(30)
        # The JVM keeps the handler (and so this bridge) alive past the engine: a producer left
        # here would outlive the broker and log its disconnection at exit.
        del self._producer

    def _run(self) -> None:
        try:
            self._engine.run()
        except BaseException as exc:
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _completed(self, success: bool, message: str, error: str | None) -> None:
        self._completion = message if not error else f"{message} ({error})"

    def _wait_streaming(self, timeout_s: float) -> None:
        """Changes committed before the slot streams would not be captured (snapshot no_data)."""
        import psycopg

        deadline = time.monotonic() + timeout_s
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
                ).fetchone()
                if row and row[0]:
                    return
                if self._error is not None or not self._thread.is_alive():
                    raise RuntimeError(
                        f"Debezium stopped before streaming: {self._completion or self._error}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Debezium not streaming after {timeout_s}s")
                time.sleep(0.1)

    def wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.produced < count:
                if self._error is not None:
                    raise RuntimeError("Debezium failed") from self._error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"Debezium produced {self.produced} of {count} records")
                self._cond.wait(min(remaining, 0.5))

    def _produce(self, events: Any) -> None:
        sent = connect.produce_source_records(self._producer, self._serializer, events)
        with self._cond:
            self.produced += sum(sent.values())
            self._cond.notify_all()
