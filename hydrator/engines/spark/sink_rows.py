"""The group function's packed records (kafka_sink.pack_records cells) as the rows Spark's Kafka
sink writes: one row per record with explicit `topic`, `partition`, `key`, `value` and
`headers`, each measured against its topic's limit first. One too large for its topic becomes a
dead letter with the reason (truncated when it does not fit the dead-letter topic either), as the
Python sink does (hydrator/kafka/record_limits.py), on the same partition number: the connector
would otherwise fail the micro-batch, and with it the query, on one record.

A `mapInArrow` pass after the group function (and the re-select stage): the records leave
Python as Arrow columns, which the sink reads without another trip through Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from hydrator.engines.spark.kafka_sink import unpack_records
from hydrator.engines.spark.kafka_source import HEADER_TYPE
from hydrator.kafka.record_limits import RecordLimits

SINK_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER_TYPE)),
    ]
)
_HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_SINK_ARROW = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", _HEADERS_ARROW),
    ]
)


def sink_rows(records: DataFrame, limits: RecordLimits) -> DataFrame:
    """`records` cells (null ones skipped) to SINK_SCHEMA rows, sized."""
    return records.select("records").mapInArrow(unpacked(limits), SINK_SCHEMA)


def unpacked(
    limits: RecordLimits,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns: tuple[list, ...] = ([], [], [], [], [])
            topics, partitions, keys, values, headers = columns
            for cell in batch.column("records").to_pylist():
                if cell is None:
                    continue
                for topic, partition, key, value, pairs in unpack_records(cell):
                    if topic is None:  # the group function names every record's topic
                        raise ValueError("a packed record names no topic")
                    if not limits.fits(topic, key, value, pairs):
                        checked = limits.check(topic, key, value, pairs)
                        topic, key, value, pairs = (
                            checked.topic,
                            checked.key,
                            checked.value,
                            checked.headers,
                        )
                    topics.append(topic)
                    partitions.append(partition)
                    keys.append(key)
                    values.append(value)
                    headers.append(
                        [{"key": name, "value": data} for name, data in pairs] if pairs else None
                    )
            if topics:
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(topics, pa.string()),
                        pa.array(partitions, pa.int32()),
                        pa.array(keys, pa.binary()),
                        pa.array(values, pa.binary()),
                        pa.array(headers, _HEADERS_ARROW),
                    ],
                    schema=_SINK_ARROW,
                )

    return rows


def record_limits(
    dlq_topic: str, max_message_bytes: Mapping[str, int] | None, producer_max_bytes: int
) -> RecordLimits:
    return RecordLimits(dlq_topic, dict(max_message_bytes or {}), producer_max_bytes)
