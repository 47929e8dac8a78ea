"""Read every committed record of a topic, to its end, and say whether an application runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

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


_ACTIVE = (
    ConsumerGroupState.STABLE,
    ConsumerGroupState.PREPARING_REBALANCING,
    ConsumerGroupState.COMPLETING_REBALANCING,
)


def group_is_active(admin_config: dict[str, Any], group: str, timeout_s: float = 30.0) -> bool:
    """Whether the consumer group `group` has members now. Judged by the members the broker
    lists and by the group's state: Tansu lists none, but says STABLE while a member is in."""
    admin = AdminClient(admin_config)
    futures = admin.describe_consumer_groups([group], request_timeout=timeout_s)
    try:
        description = futures[group].result(timeout_s)
    except KafkaException as exc:
        log.debug("describe group %s: %s", group, exc)
        return False
    except TimeoutError:  # its own message is empty
        raise TimeoutError(
            f"no answer within {timeout_s:.0f} s from the broker at "
            f"{admin_config['bootstrap.servers']} on whether consumer group {group} has members"
        ) from None
    return bool(description.members) or description.state in _ACTIVE
