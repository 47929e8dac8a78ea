"""The Spark engine's Kafka sink measures every record before producing it (the same check as the
embedded engine): no record can fail a micro-batch, and so the query, by its size alone."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from hydrator.engines.spark.kafka_sink import KafkaStreamWriter, pack_records
from hydrator.kafka.record_limits import HEADER_ERROR, HEADER_TRUNCATED, record_bytes
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, read_topic

pytestmark = pytest.mark.integration

KB = 1024


def test_oversize_records_become_dead_letters_and_dead_letters_always_fit(
    kafka_broker: Broker, unique_name: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    out, dlq = f"{unique_name}.out", f"{unique_name}-dlq"
    create_topic(bootstrap, out, 1)
    create_topic(bootstrap, dlq, 1)
    writer = KafkaStreamWriter(
        {
            "kafka.bootstrap.servers": bootstrap,
            "kafka.message.max.bytes": str(5000 * KB),
            "dlqTopic": dlq,
            "maxMessageBytes": f"{out}={200 * KB},{dlq}={100 * KB}",
        },
        StructType([StructField("records", BinaryType())]),
    )
    source = [("hydrator.source", b"in:0:7")]
    records = [
        (out, 0, b"small", b"v" * 100, source),
        (out, 0, b"too-big-for-out", b"o" * (300 * KB), source),
        (dlq, 0, b"dead", b"d" * (3000 * KB), [(HEADER_ERROR, b"bad input")]),
        (out, 0, b"over-the-producer", b"p" * (10_000 * KB), source),
    ]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([pack_records(records)], pa.binary())], names=["records"]
    )
    writer.write(iter([batch]))

    (written,) = read_topic(bootstrap, out)
    assert written.key == b"small"
    dead = {r.key: r for r in read_topic(bootstrap, dlq)}
    assert set(dead) == {b"too-big-for-out", b"dead", b"over-the-producer"}
    for key, original in [(b"too-big-for-out", 300 * KB), (b"over-the-producer", 10_000 * KB)]:
        record = dead[key]
        assert out in record.header(HEADER_ERROR).decode()
        assert record.header("hydrator.source") == b"in:0:7"
        assert record.header(HEADER_TRUNCATED) == f"value={original}".encode()
    assert dead[b"dead"].header(HEADER_ERROR) == b"bad input"
    assert dead[b"dead"].header(HEADER_TRUNCATED) == f"value={3000 * KB}".encode()
    for record in dead.values():
        assert record_bytes(record.key, record.value, record.headers) <= 100 * KB
