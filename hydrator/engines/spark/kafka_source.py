"""Streaming Kafka source for Spark on confluent-kafka (Python Data Source API, Spark >= 4.2).

Used when Spark's own Kafka connector jar is not on the classpath. One Spark input partition per
Kafka topic-partition and micro-batch; each task assigns its partition at the batch's start offset
(no consumer group: Tansu's group joins take seconds, and Spark's checkpoint owns the offsets),
reads up to the batch's end offset with read_committed isolation and hands Spark Arrow record
batches, so rows never pass through Spark's per-row Python conversion.

Options (all strings):
  kafka.bootstrap.servers   required (or `bootstrapServers`); all `kafka.*` go to the clients,
                            `kafka.consumer.*` to the consumers, `kafka.admin.*` to the admin
  topics                    comma-separated topic names (alias `subscribe`)
  startingOffsets           earliest | latest (default) | JSON {"topic": {"0": 42, "1": -2}}
                            (-2 = earliest, -1 = latest), used only when the checkpoint is new
  maxOffsetsPerTrigger      cap on offsets per micro-batch, spread over partitions by lag
  failOnDataLoss            true (default): fail when offsets to read are gone (retention, a
                            recreated topic); false: skip to what is there
  endOffsets                auto (default) | list | fetch: how end offsets are found (kafka_offsets)
  readBatchSize             records per consume() call and Arrow batch (default 10000)
  readTimeoutMs             a task fails when its range makes no progress this long (default 60000)
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from hydrator.engines.spark.kafka_offsets import (
    EARLIEST,
    TP,
    OffsetReader,
    Offsets,
    offsets_from_json,
    offsets_to_json,
)
from hydrator.engines.spark.kafka_options import (
    KafkaOptionError,
    bool_option,
    choice_option,
    client_config,
    int_option,
    topics_option,
)
from hydrator.kafka import consumed
from hydrator.kafka.broker_quirks import FIRST_OFFSET
from hydrator.kafka.client_config import FETCH_QUEUE_BACKOFF_MS

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER_TYPE)),
        StructField("timestamp", LongType()),  # ms since the epoch, as the record carries it
    ]
)

_LATEST = -1


def deleted_topic(topic: str) -> str:
    """What a query that read `topic` until it was deleted fails with."""
    return f"topic {topic} no longer exists: it was deleted while the query read it"


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Offsets [start, end) of one topic-partition; start may be EARLIEST (a new partition)."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class ReadSettings:
    client_config: dict[str, str]
    batch_size: int
    read_timeout_s: float
    fail_on_data_loss: bool


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches on the driver; `read` runs in executors' Python workers."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._topics = topics_option(options)
        self._starting = str(options.get("startingOffsets") or "latest").strip()
        self._max_offsets = int_option(options, "maxOffsetsPerTrigger", None)
        self._settings = ReadSettings(
            client_config=client_config(options, "consumer"),
            batch_size=int_option(options, "readBatchSize", 10_000) or 10_000,
            read_timeout_s=(int_option(options, "readTimeoutMs", 60_000) or 60_000) / 1000,
            fail_on_data_loss=bool_option(options, "failOnDataLoss", True),
        )
        self._offsets = OffsetReader(
            self._settings.client_config,
            client_config(options, "admin"),
            self._topics,
            choice_option(options, "endOffsets", ("auto", "list", "fetch"), "auto"),
        )
        self._available_now_target: Offsets | None = None
        self._last_seen_latest: Offsets | None = None
        self._validate_starting_offsets()

    def _validate_starting_offsets(self) -> None:
        if self._starting.lower() in ("earliest", "latest"):
            return
        try:
            offsets_from_json(json.loads(self._starting))
        except (ValueError, TypeError, AttributeError) as exc:
            raise KafkaOptionError(
                "option 'startingOffsets' must be earliest, latest or JSON like "
                f'{{"topic": {{"0": 42}}}}, got {self._starting!r}'
            ) from exc

    # -- driver side -----------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self._offsets.partitions()
        mode = self._starting.lower()
        if mode == "earliest":
            return offsets_to_json(self._offsets.earliest(tps))
        if mode == "latest":
            return offsets_to_json(self._offsets.latest(tps))
        given = offsets_from_json(json.loads(self._starting))
        unknown = sorted(set(given) - set(tps))
        if unknown:
            raise KafkaOptionError(f"option 'startingOffsets' names unknown partitions {unknown}")
        earliest = self._offsets.earliest(tps)
        latest = self._offsets.latest(tps)
        # Partitions left out of the JSON start from the latest offset, as Spark's source does.
        resolved = {tp: given.get(tp, _LATEST) for tp in tps}
        return offsets_to_json(
            {
                tp: earliest[tp] if off == EARLIEST else latest[tp] if off == _LATEST else off
                for tp, off in resolved.items()
            }
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._max_offsets is None:
            return ReadAllAvailable()
        return ReadMaxRows(self._max_offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        # Everything stable now is the target; partitions created later are left for the next run.
        self._available_now_target = self._offsets.latest(self._offsets.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        current = set(self._offsets.partitions())
        gone = sorted(self._offsets.absent & {topic for topic, _ in begin})
        if gone:
            # Its offsets would otherwise stay where they are, and the query go on without it.
            raise KafkaException(
                KafkaError(
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    deleted_topic(gone[0]),
                )
            )
        if self._available_now_target is not None:
            current &= set(self._available_now_target)
        added = sorted(current - set(begin))
        begin.update(self._offsets.earliest(added))

        latest = self._offsets.latest(sorted(current), known=begin)
        self._last_seen_latest = latest
        end: Offsets = {}
        for tp, first in begin.items():
            last = latest.get(tp, first)  # a vanished partition keeps its offset
            if self._available_now_target is not None and tp in self._available_now_target:
                last = min(last, self._available_now_target[tp])
            if last < first:
                last = self._offsets_went_back(tp, first, last)
            end[tp] = last
        if isinstance(limit, ReadMaxRows):
            end = _spread_limit(begin, end, limit.max_rows)
        return offsets_to_json(end)

    def _offsets_went_back(self, tp: TP, first: int, last: int) -> int:
        if self._settings.fail_on_data_loss:
            raise KafkaException(
                KafkaError(
                    KafkaError.OFFSET_OUT_OF_RANGE,
                    f"{tp[0]}[{tp[1]}] end offset {last} is below the offset to read {first}: "
                    "the topic was recreated or truncated (set failOnDataLoss=false to go on)",
                )
            )
        return last

    def reportLatestOffset(self) -> dict | None:
        if self._last_seen_latest is None:
            return None
        return offsets_to_json(self._last_seen_latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = offsets_from_json(start)
        result: list[InputPartition] = []
        for (topic, partition), stop in sorted(offsets_from_json(end).items()):
            first = begin.get((topic, partition), EARLIEST)
            if first > stop:  # offsets went back and failOnDataLoss=false: reread what is there
                first = EARLIEST
            if stop <= max(first, 0):
                continue
            result.append(KafkaInputPartition(topic, partition, first, stop))
        return result

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        self._offsets.close()

    def __getstate__(self) -> dict:
        # Spark pickles the reader into the read function; driver-side clients stay behind.
        state = self.__dict__.copy()
        state["_offsets"] = None
        return state

    # -- executor side ---------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition, self._settings)


def _spread_limit(begin: Offsets, end: Offsets, limit: int) -> Offsets:
    """Cap the batch at `limit` offsets, shared by partitions in proportion to their lag
    (the rule Spark's Kafka source uses for maxOffsetsPerTrigger)."""
    lag = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(lag.values())
    if total <= limit:
        return end
    capped: Offsets = {}
    for tp, stop in end.items():
        share = limit * lag[tp] / total
        step = int(share) if share >= 1 else (1 if lag[tp] > 0 else 0)
        capped[tp] = min(stop, begin[tp] + step)
    return capped


# -- reading one topic-partition range (executor) -------------------------------------------------

ARROW_SCHEMA: pa.Schema | None = None
_CONSUMERS: dict[tuple[tuple[str, str], ...], Consumer] = {}


def _arrow_schema() -> pa.Schema:
    # Spark checks batches against exactly this conversion of the declared schema.
    global ARROW_SCHEMA
    if ARROW_SCHEMA is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        ARROW_SCHEMA = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")
    return ARROW_SCHEMA


def _consumer(settings: ReadSettings) -> Consumer:
    """A consumer per Python worker and configuration, kept across tasks: with worker reuse on,
    every micro-batch would otherwise pay for a new client and its broker connections."""
    config: dict[str, str | bool] = {
        "group.id": "hydrator-spark-source",  # the client wants one; assign() never uses it
        "max.partition.fetch.bytes": str(8 * 1024 * 1024),
        "fetch.queue.backoff.ms": str(FETCH_QUEUE_BACKOFF_MS),
        # Tasks reassign the consumer to a new partition; a fetch still parked at the previous
        # partition's end delays the new partition's first fetch by up to this long.
        "fetch.wait.max.ms": "10",
        **settings.client_config,
    }
    config.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error" if settings.fail_on_data_loss else "earliest",
        }
    )
    cache_key = tuple(sorted((k, str(v)) for k, v in config.items()))
    consumer = _CONSUMERS.get(cache_key)
    if consumer is None:
        consumer = Consumer(config)
        _CONSUMERS[cache_key] = consumer
    return consumer


def _drop_consumer(consumer: Consumer) -> None:
    for key, cached in list(_CONSUMERS.items()):
        if cached is consumer:
            del _CONSUMERS[key]
    with contextlib.suppress(Exception):  # already broken; out of the cache is what matters
        consumer.close()


def _reached_end(messages: list[Message], end: int) -> bool:
    """Whether the consumer reported the partition's end at or past `end`; raises on errors."""
    reached = False
    for message in messages:
        error = message.error()
        if error is None:
            continue
        if error.code() != KafkaError._PARTITION_EOF:
            raise KafkaException(error)
        reached = reached or consumed.offset(message) >= end
    return reached


def _to_arrow(
    part: KafkaInputPartition, records: list[Message], schema: pa.Schema
) -> pa.RecordBatch:
    # Column-wise comprehensions: a per-record loop with appends costs about twice as much.
    count = len(records)
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(part.topic, pa.string()), count),
            pa.repeat(pa.scalar(part.partition, pa.int32()), count),
            pa.array([m.offset() for m in records], pa.int64()),
            pa.array([m.key() for m in records], pa.binary()),
            pa.array([m.value() for m in records], pa.binary()),
            pa.array([m.headers() for m in records], schema.field("headers").type),
            # librdkafka gives -1 when a record has no timestamp (pre-0.10 message format).
            pa.array([m.timestamp()[1] for m in records], pa.int64()),
        ],
        schema=schema,
    )


def read_partition(part: KafkaInputPartition, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Records of [part.start, part.end) as Arrow batches in SOURCE_SCHEMA.

    Offsets can have holes (transaction markers, aborted or compacted records), so the range is
    done when a record at or past `end` shows up or the consumer reports the partition's end
    (PARTITION_EOF) at or past `end`, not when `end - start` records have been seen.
    """
    schema = _arrow_schema()
    consumer = _consumer(settings)
    # Offset 0, not OFFSET_BEGINNING: that is resolved through ListOffsets(earliest), which Tansu
    # can answer past the first batches (hydrator/kafka/broker_quirks.py). Below a real log start
    # the consumer's reset (earliest whenever a range starts at EARLIEST) takes over.
    first = FIRST_OFFSET if part.start == EARLIEST else part.start
    consumer.assign([TopicPartition(part.topic, part.partition, first)])
    healthy = False
    try:
        next_offset = part.start
        last_progress = time.monotonic()
        done = False
        while not done:
            # Asking for exactly what is left lets consume() return without waiting out its
            # timeout, which it otherwise does even after the partition's end was reported.
            wanted = settings.batch_size
            if next_offset >= 0:
                wanted = max(1, min(wanted, part.end - next_offset))
            messages = consumer.consume(num_messages=wanted, timeout=0.1)
            records = [m for m in messages if m.error() is None]
            if len(records) != len(messages):
                done = _reached_end(messages, part.end) or done
            if records and consumed.offset(records[-1]) >= part.end:
                records = [m for m in records if consumed.offset(m) < part.end]
                done = True
            if records:
                next_offset = consumed.offset(records[-1]) + 1
                done = done or next_offset >= part.end
                last_progress = time.monotonic()
                yield _to_arrow(part, records, schema)
            elif not done and time.monotonic() - last_progress > settings.read_timeout_s:
                raise TimeoutError(
                    f"{part.topic}[{part.partition}]: no records past offset {next_offset} "
                    f"within {settings.read_timeout_s:.0f} s while reading up to {part.end} "
                    "(records lost to retention, or the broker is unreachable)"
                )
        healthy = True
    finally:
        if healthy:
            # Stop the consumer fetching this partition in the background between tasks.
            consumer.unassign()
        else:
            _drop_consumer(consumer)
