"""The project's Kafka source and sink for Spark against a real broker."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.kafka import Broker

pytestmark = pytest.mark.integration

PARTITIONS = 4

Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("test-spark-kafka-io")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def create_topics(broker: Broker, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    for future in futures.values():
        future.result(timeout=30)


def produce(broker: Broker, topic: str, first: int, count: int) -> list[Record]:
    """Records numbered first..first+count-1 to partition number % 4, with headers; every 10th
    is a tombstone (identified by its key)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    sent: list[Record] = []
    for n in range(first, first + count):
        partition = n % PARTITIONS
        key = b"key-%d" % n
        value = None if n % 10 == 9 else b'{"n": %d}' % n
        headers = (("seq", str(n).encode()), ("empty", None), ("seq", b"again"))
        producer.produce(topic, value, key, partition, headers=list(headers))
        sent.append((partition, key, value, headers))
    assert producer.flush(30) == 0
    return sent


def read_all(broker: Broker, topic: str) -> list[Record]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    records: list[Record] = []
    try:
        for partition in range(PARTITIONS):
            consumer.assign([TopicPartition(topic, partition, 0)])
            at_end = False
            deadline = time.monotonic() + 30
            while not at_end:
                assert time.monotonic() < deadline, f"{topic}[{partition}]: no end reported"
                # Short polls: consume() waits out its timeout even after the partition's end.
                for message in consumer.consume(1000, 0.1):
                    if message.error() is not None:
                        assert message.error().code() == KafkaError._PARTITION_EOF
                        at_end = True
                        continue
                    headers = tuple(message.headers() or ())
                    records.append((partition, message.key(), message.value(), headers))
    finally:
        consumer.close()
    return records


def copy_topic(
    spark: object, broker: Broker, source: str, sink: str, checkpoint: Path, **options: str
) -> list[int]:
    """Run source -> sink with Trigger.AvailableNow; the rows of each micro-batch."""
    from hydrator.engines.spark import register

    fmt = register(spark)  # type: ignore[arg-type]
    frame = (
        spark.readStream.format(fmt)  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )
    query = (
        frame.select("key", "value", "headers", "partition")
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the AvailableNow query did not finish"
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_round_trip_keeps_partition_and_headers_and_resumes_from_checkpoint(
    spark: object, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    create_topics(kafka_broker, source, sink)
    checkpoint = tmp_path / "checkpoint"

    first = produce(kafka_broker, source, 0, 200)
    copy_topic(spark, kafka_broker, source, sink, checkpoint)
    assert sorted(read_all(kafka_broker, sink)) == sorted(first)

    # The restarted query resumes from the checkpoint's offsets: only the new records come out.
    # A small maxOffsetsPerTrigger splits them into several micro-batches under AvailableNow.
    second = produce(kafka_broker, source, 200, 120)
    batches = copy_topic(spark, kafka_broker, source, sink, checkpoint, maxOffsetsPerTrigger="50")
    assert sum(batches) == 120
    assert len(batches) >= 3 and max(batches) <= 50, batches
    assert sorted(read_all(kafka_broker, sink)) == sorted(first + second)


def test_reads_committed_records_and_never_ends_a_batch_inside_an_open_transaction(
    spark: object, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    create_topics(kafka_broker, source, sink)
    plain = produce(kafka_broker, source, 0, 8)

    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": unique_name}
    )
    producer.init_transactions(30)

    def transaction(first: int) -> None:
        producer.begin_transaction()
        for n in range(first, first + 8):
            producer.produce(source, b"tx-%d" % n, b"key-%d" % n, n % PARTITIONS)
        producer.flush(30)

    transaction(100)
    producer.commit_transaction(30)
    transaction(200)
    producer.abort_transaction(30)
    transaction(300)  # left open while the query runs: a batch must not end inside it

    def values(topic: str) -> list[bytes]:
        return sorted(r[2] or b"" for r in read_all(kafka_broker, topic))

    checkpoint = tmp_path / "checkpoint"
    copy_topic(spark, kafka_broker, source, sink, checkpoint)
    # The source sees what any read_committed consumer sees. Apache Kafka hides the aborted
    # records; Tansu 0.6 still shows them once they reached the broker.
    visible = values(source)
    assert values(sink) == visible
    assert not any(v.startswith(b"tx-3") for v in visible)
    committed = sorted([r[2] or b"" for r in plain] + [b"tx-%d" % n for n in range(100, 108)])
    if kafka_broker.kind != "tansu":
        assert visible == committed
    assert set(committed) <= set(visible)

    producer.commit_transaction(30)
    copy_topic(spark, kafka_broker, source, sink, checkpoint)
    assert values(sink) == values(source)
    assert {b"tx-%d" % n for n in range(300, 308)} <= set(values(sink))


def test_failed_delivery_fails_the_query(
    spark: object, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from hydrator.engines.spark import register

    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    create_topics(kafka_broker, source, sink)
    produce(kafka_broker, source, 0, 8)
    fmt = register(spark)  # type: ignore[arg-type]
    frame = (
        spark.readStream.format(fmt)  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        # Partition 40 does not exist: every record fails delivery.
        frame.select("key", "value", (F.col("partition") + 40).alias("partition"))
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
        .option("kafka.message.timeout.ms", "3000")
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"failed delivery|Unknown partition|_UNKNOWN_PARTITION"):
        query.awaitTermination(120)
    assert not query.isActive
    # The failed batch was not committed: its offsets are not in the checkpoint's commit log.
    assert not any((tmp_path / "checkpoint" / "commits").glob("[0-9]*"))
