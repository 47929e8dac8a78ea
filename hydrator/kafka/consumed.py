"""A consumed message's position and headers, typed as librdkafka hands them over.

confluent-kafka's stub types one `Message` for every use: a record being produced, an error
event, a record consumed. So there `topic()`, `partition()` and `offset()` may be None and
`headers()` is any of the shapes a producer accepts. A message that `poll()`/`consume()` returns
for a partition (a record, or an event such as the end of a partition) always has its topic,
partition and offset, and its headers are None or a list of (name, bytes or None) pairs. Each
accessor here is the `Message` method itself, typed as such: a call costs what
`message.topic()` costs."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from confluent_kafka import Message

from hydrator.events import RawRecord

ConsumedHeaders = list[tuple[str, bytes | None]]

topic = cast(Callable[[Message], str], Message.topic)
partition = cast(Callable[[Message], int], Message.partition)
offset = cast(Callable[[Message], int], Message.offset)
headers = cast(Callable[[Message], ConsumedHeaders | None], Message.headers)


def raw_record(msg: Message) -> RawRecord:
    return RawRecord(
        topic(msg),
        partition(msg),
        offset(msg),
        msg.key(),
        msg.value(),
        tuple(headers(msg) or ()),
        msg.timestamp()[1],
    )


__all__ = ["ConsumedHeaders", "headers", "offset", "partition", "raw_record", "topic"]
