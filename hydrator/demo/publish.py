"""Write records to a topic as Kafka Connect's Java producer would, and read whole topics back."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from hydrator.events import RawRecord
from hydrator.kafka import consumed
from hydrator.kafka.admin import TopicSpec, ensure_topics
from hydrator.kafka.offsets import from_the_start

Headers = Sequence[tuple[str, bytes | None]]
ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the configured partitioner picks


@dataclass(frozen=True)
class Placed:
    """Where a produced record landed."""

    partition: int
    offset: int


def create_topic(bootstrap_servers: str, name: str, partitions: int) -> None:
    ensure_topics(
        AdminClient({"bootstrap.servers": bootstrap_servers}), [TopicSpec(name, partitions)]
    )


def publish(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, Headers]],
    partitions: Sequence[int | None] | None = None,
) -> list[Placed]:
    """Produce keyed records with the Java client's partitioner (murmur2, as Kafka Connect
    places them), or each into its entry of `partitions` (None: the partitioner picks) for
    sources that place records themselves; returns where each landed, in order."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "message.max.bytes": 16 * 1024 * 1024,
        }
    )
    placed: dict[int, Placed] = {}
    failures: list[KafkaError] = []

    def delivered(index: int):
        def report(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                failures.append(err)
            else:
                placed[index] = Placed(msg.partition(), msg.offset())  # type: ignore[attr-defined]

        return report

    count = 0
    for index, (key, value, headers) in enumerate(records):
        count += 1
        while True:
            try:
                partition = partitions[index] if partitions is not None else None
                producer.produce(
                    topic,
                    value,
                    key,
                    ANY_PARTITION if partition is None else partition,
                    headers=list(headers) or None,
                    on_delivery=delivered(index),
                )
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"{remaining} records undelivered, errors {failures[:3]}")
    return [placed[i] for i in range(count)]


def read_topic(bootstrap_servers: str, topic: str, timeout_s: float = 60) -> list[RawRecord]:
    """Every record of `topic` a read_committed reader sees, in (partition, offset) order; each
    partition is read to where the fetch reports its end (see hydrator.kafka.offsets)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "hydrator-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    records: list[RawRecord] = []
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        partitions = set(metadata.partitions)
        consumer.assign(from_the_start(topic, partitions))
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while at_end != partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: no end reached for {sorted(partitions - at_end)}")
            for msg in consumer.consume(10_000, 0.1):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    at_end.add(consumed.partition(msg))
                    continue
                at_end.discard(msg.partition())
                records.append(consumed.raw_record(msg))
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    return records
