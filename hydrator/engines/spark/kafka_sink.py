"""Streaming Kafka sink for Spark on confluent-kafka (Python Data Source API, Spark >= 4.1).

Columns of the written DataFrame, by name:
  value      binary or string, required (null = a Kafka tombstone)
  key        binary or string, optional
  headers    array<struct<key: string, value: binary>>, optional
  partition  int, optional: the target partition number (null or absent = the producer's
             partitioner). The hydrator writes each output to its input's partition number.
  topic      string, optional: per-row topic; the `topic` option is the default

or, instead of all of those, one column
  records    binary: many records per row, msgpack-packed by `pack_records`. A stage that
             emits few large groups of records (the Spark engine) hands them over packed, so no
             pass of its own turns them into columns; a null row is skipped.

Options: `kafka.*` and `kafka.producer.*` go to the producer (SASL/SSL, compression, ...);
`topic`; `flushTimeoutMs` (default 120000); `dlqTopic` and `maxMessageBytes` (`topic=bytes,...`):
with a dead-letter topic every record is measured before it is produced
(hydrator/kafka/record_limits.py): one too large for its topic (the listed limit, else the
producer's `message.max.bytes`) goes to the dead-letter topic with the reason, truncated if it does
not fit there either.

Delivery is at-least-once: every task produces its rows with an idempotent producer (no
duplicates from the client's own retries), then flushes and raises if any record failed or is
still undelivered, so the task - and with it the micro-batch - fails instead of being committed to
the checkpoint. A retried batch may write records again (at-least-once: consumers dedupe on
`hydrator.source`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from hydrator.engines.spark.kafka_options import KafkaOptionError, client_config, int_option
from hydrator.kafka.record_limits import RecordLimits

log = logging.getLogger(__name__)

# librdkafka's default `message.max.bytes`, the limit when the configuration sets none.
_PRODUCER_DEFAULT_MAX_BYTES = 1_000_000

_BYTES_LIKE = (BinaryType, StringType)

Headers = Sequence[tuple[str, bytes | None]]
# topic, partition, key, value, headers: one record of a `records` cell
PackedRecord = tuple[str | None, int | None, bytes | None, bytes | None, Headers | None]
# topic, value, key, partition, headers, timestamp: what the sink produces per record
_Row = tuple[str | None, Any, Any, int | None, Any, int | None]

_pack = msgpack.Packer(use_bin_type=True).pack


def pack_records(records: Sequence[PackedRecord]) -> bytes:
    """One `records` cell."""
    return _pack(records)


def unpack_records(cell: bytes) -> tuple[PackedRecord, ...]:
    try:
        records = msgpack.unpackb(cell, raw=False, use_list=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"a 'records' cell is not packed by pack_records: {exc}") from None
    if not isinstance(records, tuple) or not all(
        isinstance(r, tuple) and len(r) == 5 for r in records
    ):
        raise ValueError("a 'records' cell is not packed by pack_records: not a list of 5-tuples")
    return records


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def _check_column(schema: StructType, name: str, allowed: tuple[type[DataType], ...]) -> bool:
    if name not in schema.fieldNames():
        return False
    data_type = schema[name].dataType
    if not isinstance(data_type, allowed):
        wanted = " or ".join(t.__name__.removesuffix("Type").lower() for t in allowed)
        raise KafkaOptionError(
            f"Kafka sink column '{name}' must be {wanted}, got {data_type.simpleString()}"
        )
    return True


def _check_headers(schema: StructType) -> bool:
    if not _check_column(schema, "headers", (ArrayType,)):
        return False
    element = schema["headers"].dataType.elementType  # type: ignore[attr-defined]
    if (
        not isinstance(element, StructType)
        or element.fieldNames() != ["key", "value"]
        or not isinstance(element["key"].dataType, StringType)
        or not isinstance(element["value"].dataType, _BYTES_LIKE)
    ):
        raise KafkaOptionError(
            "Kafka sink column 'headers' must be array<struct<key: string, value: binary>>, "
            f"got {schema['headers'].dataType.simpleString()}"
        )
    return True


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Created on the driver, pickled to executors; the producer is made in `write`."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._config = client_config(options, "producer")
        self._default_topic = (options.get("topic") or "").strip() or None
        self._flush_timeout_s = (int_option(options, "flushTimeoutMs", 120_000) or 120_000) / 1000
        self._limits = record_limits_option(options, self._config)
        self._packed = _check_column(schema, "records", (BinaryType,))
        if self._packed:
            return  # every record names its topic (or takes the option's)
        if not _check_column(schema, "value", _BYTES_LIKE):
            raise KafkaOptionError("the Kafka sink needs a 'value' column (binary or string)")
        self._has_key = _check_column(schema, "key", _BYTES_LIKE)
        self._has_headers = _check_headers(schema)
        self._has_partition = _check_column(schema, "partition", (IntegerType,))
        self._has_timestamp = _check_column(schema, "timestamp", (LongType,))
        has_topic = _check_column(schema, "topic", (StringType,))
        if not has_topic and self._default_topic is None:
            raise KafkaOptionError("the Kafka sink needs the 'topic' option or a 'topic' column")
        self._has_topic = has_topic

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        producer = _producer(self._config)
        written = 0
        try:
            for batch in iterator:
                written += self._produce_batch(producer, batch)
                _raise_delivery_errors(producer)
            remaining = producer.flush(self._flush_timeout_s)
            _raise_delivery_errors(producer)
            if remaining:
                raise KafkaException(
                    KafkaError(
                        KafkaError._TIMED_OUT,
                        f"{remaining} records not delivered within {self._flush_timeout_s:.0f} s",
                    )
                )
        except BaseException:
            _drop_producer(producer)
            raise
        return KafkaCommitMessage(records=written)

    def _produce_batch(self, producer: Producer, batch: pa.RecordBatch) -> int:
        if batch.num_rows == 0:
            return 0
        rows = self._packed_rows(batch) if self._packed else self._column_rows(batch)
        default_topic = self._default_topic
        limits = self._limits
        produce = producer.produce
        written = 0
        for topic, value, key, partition, headers, timestamp in rows:
            target = topic or default_topic
            if target is None:
                raise ValueError("a record has a null 'topic' and the sink has no 'topic' option")
            if limits is not None:
                target, key, value, headers = _checked(limits, target, key, value, headers)
            while True:
                try:
                    produce(
                        target,
                        value,
                        key,
                        -1 if partition is None else partition,
                        headers=headers,
                        timestamp=timestamp or 0,
                    )
                    break
                except BufferError:
                    # The local queue is full: serve delivery reports until there is room.
                    producer.poll(0.05)
            written += 1
        producer.poll(0)
        return written

    def _column_rows(self, batch: pa.RecordBatch) -> Iterator[_Row]:
        nothing = [None] * batch.num_rows
        values = batch.column("value").to_pylist()
        keys = batch.column("key").to_pylist() if self._has_key else nothing
        headers = batch.column("headers").to_pylist() if self._has_headers else nothing
        partitions = batch.column("partition").to_pylist() if self._has_partition else nothing
        timestamps = batch.column("timestamp").to_pylist() if self._has_timestamp else nothing
        topics = batch.column("topic").to_pylist() if self._has_topic else nothing
        for value, key, cells, partition, timestamp, topic in zip(
            values, keys, headers, partitions, timestamps, topics, strict=True
        ):
            pairs = [(h["key"], h["value"]) for h in cells] if cells else None
            yield topic, value, key, partition, pairs, timestamp

    @staticmethod
    def _packed_rows(batch: pa.RecordBatch) -> Iterator[_Row]:
        for cell in batch.column("records").to_pylist():
            if cell is None:
                continue
            for topic, partition, key, value, headers in unpack_records(cell):
                # the producer takes headers as a list of tuples only
                yield topic, value, key, partition, list(headers) if headers else None, None

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: each task flushed and checked its records before reporting success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: delivered records stay (at-least-once), the batch is retried."""


def record_limits_option(
    options: Mapping[str, str], config: Mapping[str, str]
) -> RecordLimits | None:
    """`dlqTopic` and `maxMessageBytes` as the sink's size check; None without a dlqTopic."""
    dlq = (options.get("dlqTopic") or "").strip()
    if not dlq:
        return None
    limits: dict[str, int] = {}
    for item in (options.get("maxMessageBytes") or "").split(","):
        if not item.strip():
            continue
        topic, _, size = item.rpartition("=")
        if not topic.strip() or not size.strip().isdigit():
            raise KafkaOptionError(f"option 'maxMessageBytes': {item!r} is not topic=bytes")
        limits[topic.strip()] = int(size)
    producer = str(config.get("message.max.bytes", _PRODUCER_DEFAULT_MAX_BYTES))
    if not producer.isdigit():
        raise KafkaOptionError(f"option 'kafka.message.max.bytes' must be a number: {producer!r}")
    return RecordLimits(dlq, limits, int(producer))


def _checked(
    limits: RecordLimits, topic: str, key: Any, value: Any, headers: Any
) -> tuple[str, Any, Any, Any]:
    key_bytes = key.encode() if isinstance(key, str) else key
    value_bytes = value.encode() if isinstance(value, str) else value
    if limits.fits(topic, key_bytes, value_bytes, headers):
        return topic, key, value, headers
    checked = limits.check(topic, key_bytes, value_bytes, headers)
    if checked.topic == topic and checked.value is value_bytes and checked.key is key_bytes:
        return topic, key, value, headers
    if checked.dead:
        log.warning("a record for %s is too large for it: written to %s", topic, checked.topic)
    return checked.topic, checked.key, checked.value, checked.headers


# -- producers, one per Python worker and configuration -----------------------------------------

_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}
_DELIVERY_ERRORS: dict[int, list[KafkaError]] = {}


def _producer(config: Mapping[str, str]) -> Producer:
    """Kept across tasks (worker reuse is on): an idempotent producer's set-up - connections and
    a producer id from the broker - would otherwise be paid again by every micro-batch."""
    full: dict[str, object] = {
        "linger.ms": "5",
        "queue.buffering.max.messages": "500000",
        **config,
    }
    full.update({"enable.idempotence": True, "delivery.report.only.error": True})
    cache_key = tuple(sorted((k, str(v)) for k, v in full.items()))
    producer = _PRODUCERS.get(cache_key)
    if producer is None:
        errors: list[KafkaError] = []

        def on_delivery(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                errors.append(error)

        full["on_delivery"] = on_delivery
        producer = Producer(full)
        _PRODUCERS[cache_key] = producer
        _DELIVERY_ERRORS[id(producer)] = errors
    return producer


def _raise_delivery_errors(producer: Producer) -> None:
    errors = _DELIVERY_ERRORS.get(id(producer))
    if errors:
        first = errors[0]
        raise KafkaException(
            KafkaError(first.code(), f"{len(errors)} records failed delivery, first: {first.str()}")
        )


def _drop_producer(producer: Producer) -> None:
    """A producer that failed may hold records of the failed task or be fenced: never reuse it."""
    for key, cached in list(_PRODUCERS.items()):
        if cached is producer:
            del _PRODUCERS[key]
    _DELIVERY_ERRORS.pop(id(producer), None)
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # best effort: the task fails anyway with the original error
        pass
