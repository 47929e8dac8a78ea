"""Produce to and read back whole topics on the test broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from hydrator.kafka.admin import wait_until_led
from hydrator.kafka.offsets import from_the_start, topic_ends

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Consumed:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


def create_topic(
    bootstrap_servers: str, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, -1, config=config or {})])[name].result(30)
    wait_until_led(admin, [name], 30)


def topic_exists(bootstrap_servers: str, name: str) -> bool:
    """Asked of the whole cluster's metadata: asking Tansu about one topic creates it."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    return name in admin.list_topics(timeout=10).topics


def partition_count(bootstrap_servers: str, name: str) -> int | None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    topic = admin.list_topics(name, timeout=10).topics.get(name)
    if topic is None or topic.error is not None:
        return None
    return len(topic.partitions)


def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, Headers]],
    pace: tuple[int, float] | None = None,
    partitions: Sequence[int] | None = None,
) -> list[tuple[int, int]]:
    """Produce keyed records as Kafka Connect would (Java partitioner), or each to the partition
    `partitions` names (a producer with another partitioner); returns (partition, offset) of
    each, in order. `pace=(n, seconds)` flushes and pauses after every n records."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    placed: dict[int, tuple[int, int]] = {}
    count = 0
    for i, (key, value, headers) in enumerate(records):
        count += 1

        def delivered(err: object, msg: object, i: int = i) -> None:
            assert err is None, err
            placed[i] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

        while True:
            try:
                placement = {} if partitions is None else {"partition": partitions[i]}
                producer.produce(
                    topic,
                    value,
                    key,
                    headers=headers or None,
                    on_delivery=delivered,
                    **placement,
                )
                break
            except BufferError:
                producer.poll(0.1)
        if pace is not None and count % pace[0] == 0:
            producer.flush(60)
            time.sleep(pace[1])
    assert producer.flush(60) == 0
    return [placed[i] for i in range(count)]


class BackgroundProducer(threading.Thread):
    """`produce` in a thread: a stream that keeps arriving over `seconds` (in `chunks` paced
    steps) while a test kills, cuts or restarts the engine. `join()` returns the placements."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        records: Iterable[tuple[bytes | None, bytes | None, Headers]],
        seconds: float,
        chunks: int = 50,
    ) -> None:
        super().__init__(daemon=True)
        records = list(records)
        self._args = (bootstrap_servers, topic, records)
        self._pace = (len(records) // chunks + 1, seconds / chunks)
        self._placed: list[tuple[int, int]] = []
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._placed = produce(*self._args, pace=self._pace)
        except BaseException as exc:
            self._error = exc

    def join(self, timeout: float | None = None) -> list[tuple[int, int]]:  # type: ignore[override]
        super().join(timeout)
        if self._error is not None:
            raise self._error
        return self._placed


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """The log end of each partition, including records of open or dead transactions (not the
    broker's ListOffsets answer, which Tansu gets wrong: see hydrator.kafka.offsets). Empty
    for a topic that does not exist."""
    try:
        return topic_ends({"bootstrap.servers": bootstrap_servers, "group.id": "test-probe"}, topic)
    except KafkaException:
        return {}  # no such topic (yet)


def read_topic(
    bootstrap_servers: str, topic: str, isolation: str = "read_committed", timeout_s: float = 30
) -> list[Consumed]:
    """Every record of `topic` visible under `isolation`, in partition and offset order.

    Reads each partition up to where the broker says it ends for this reader: for
    read_committed, the first transaction still open."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "test-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    records: list[Consumed] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign(from_the_start(topic, partitions))
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: no end reached for {set(partitions) - at_end}")
            for msg in consumer.consume(1000, 0.1):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                records.append(
                    Consumed(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        list(msg.headers() or []),
                    )
                )
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    return records
