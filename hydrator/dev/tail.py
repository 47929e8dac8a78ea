"""`hydrator tail`: read a topic (the enriched one, the DLQ, a raw one) and show each record.

The reader joins no consumer group and commits nothing: it assigns every partition itself, so it
starts at once and leaves no trace on the broker. It reads committed records only, as a
downstream consumer of the hydrator's transactional output should. Where it starts:
* from the beginning: offset 0 of each partition, not the broker's "earliest" answer, which Tansu
  can place past the first records (hydrator.kafka.offsets);
* from the end: the true end of each partition as the offset probe finds it, since Tansu's
  "latest" answer is the start of the last batch, not the offset after it.
Like `tail`, it stops at the end it found when it started, unless it follows the topic (always
when it starts from the end: there is nothing before it to show).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from hydrator.dev.render import TailRecord
from hydrator.errors import ConfigurationError
from hydrator.kafka.offsets import from_the_start, topic_ends
from hydrator.names import did_you_mean

POLL_S = 0.5
TIMEOUT_S = 30.0


class TopicMissing(ConfigurationError, LookupError):
    """The topic does not exist on the broker; `meant`: ` (did you mean X?)` or nothing."""

    def __init__(self, message: str, meant: str = "") -> None:
        super().__init__(message)
        self.meant = meant


@dataclass(frozen=True)
class TailOptions:
    bootstrap_servers: str
    topic: str
    from_beginning: bool = True
    follow: bool = False
    max_records: int | None = None
    kafka_properties: tuple[tuple[str, str], ...] = ()


def client_config(options: TailOptions) -> dict[str, Any]:
    return {
        "bootstrap.servers": options.bootstrap_servers,
        # required by the client; never joined (assign, not subscribe) and never committed to
        "group.id": f"hydrator-tail-{uuid.uuid4().hex[:8]}",
        **dict(options.kafka_properties),
    }


def records(options: TailOptions, stopping: Callable[[], bool]) -> Iterator[TailRecord]:
    """The topic's records in arrival order per partition, until the end found at the start
    (unless following), `max_records` or `stopping()`."""
    config = client_config(options)
    ends = _ends(config, options.topic)
    partitions = list(ends)
    if options.from_beginning:
        start = from_the_start(options.topic, partitions)
    else:
        start = [TopicPartition(options.topic, p, ends[p]) for p in partitions]
    follow = options.follow or not options.from_beginning
    # partitions with records before their end still to come
    unread = {tp.partition for tp in start if tp.offset < ends[tp.partition]}
    consumer = Consumer(
        {
            **config,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    seen = 0
    try:
        consumer.assign(start)
        while not stopping():
            if options.max_records is not None and seen >= options.max_records:
                return
            if not follow and not unread:
                return
            message = consumer.poll(POLL_S)
            if message is None or message.error() is not None:
                _raise_if_fatal(message)
                # read_committed skips aborted records and commit markers without a message:
                # where the end was reached is seen in the position
                for tp in consumer.position([TopicPartition(options.topic, p) for p in unread]):
                    if tp.offset >= ends[tp.partition]:
                        unread.discard(tp.partition)
                continue
            record = _tail_record(message)
            if record.offset + 1 >= ends.get(record.partition, 0):
                unread.discard(record.partition)
            seen += 1
            yield record
    finally:
        consumer.close()


def _tail_record(message: Message) -> TailRecord:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    # a consumed record (not an error event) has all three
    assert topic is not None and partition is not None and offset is not None
    return TailRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        key=_as_bytes(message.key()),
        value=_as_bytes(message.value()),
        headers=[(header[0], _as_bytes(header[1])) for header in message.headers() or []],
    )


def _as_bytes(data: str | bytes | None) -> bytes | None:
    """Without a deserializer the client hands out bytes; the types admit str too."""
    return data.encode() if isinstance(data, str) else data


def _raise_if_fatal(message: Any) -> None:
    error = None if message is None else message.error()
    if error is None or error.code() == KafkaError._PARTITION_EOF:
        return
    if error.fatal() or not error.retriable():
        raise KafkaException(error)


def _ends(config: dict[str, Any], topic: str) -> dict[int, int]:
    try:
        return topic_ends(config, topic)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            meant = did_you_mean(topic, _topic_names(config))
            raise TopicMissing(f"topic {topic!r} does not exist", meant) from None
        raise


def _topic_names(config: dict[str, Any]) -> list[str]:
    consumer = Consumer(config)
    try:
        topics = consumer.list_topics(timeout=TIMEOUT_S).topics
    finally:
        consumer.close()
    return sorted(name for name in topics if not name.startswith("__"))
