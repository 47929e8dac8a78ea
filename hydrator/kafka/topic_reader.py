"""Read every committed record of a topic, to its end (what a bootstrap and the seeded images'
readers need)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from hydrator.kafka.offsets import from_the_start, topic_ends

log = logging.getLogger(__name__)

STALL_WARNING_S = 10.0


def read_to_end(consumer_config: dict[str, Any], topic: str) -> Iterator[Message]:
    """Every committed record of `topic`, partition by partition in offset order, up to the end
    each partition has when the read begins. The end is where a fetch reports end-of-partition
    (hydrator.kafka.offsets), and a partition is done when the read_committed position reaches
    it: Tansu's last offsets are transaction markers that no message shows."""
    ends = topic_ends(consumer_config, topic)
    consumer = Consumer(
        {
            **consumer_config,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        for start in from_the_start(topic, ends):
            end = ends[start.partition]
            if end <= 0:
                continue
            consumer.assign([start])
            position, last_progress = 0, time.monotonic()
            while position < end:
                for message in consumer.consume(1000, 0.1):
                    if message.error():
                        raise KafkaException(message.error())
                    offset = message.offset()
                    if offset is not None and offset < end:
                        yield message
                (current,) = consumer.position([TopicPartition(topic, start.partition)])
                if current.offset > position:
                    position, last_progress = current.offset, time.monotonic()
                elif time.monotonic() - last_progress > STALL_WARNING_S:
                    log.warning(
                        "%s-%d: waiting at offset %d for an open transaction to end",
                        topic,
                        start.partition,
                        position,
                    )
                    last_progress = time.monotonic()
            consumer.unassign()
    finally:
        consumer.close()
