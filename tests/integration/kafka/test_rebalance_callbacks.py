"""A rebalance callback's exception reaches the poll's caller as the exception it was: raised
through confluent-kafka's poll as it comes, a KafkaException from a consumer method inside the
callback escapes every `except` clause (hydrator/kafka/rebalance_callbacks.py)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from hydrator.kafka.rebalance_callbacks import RebalanceCallbacks
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic

pytestmark = pytest.mark.integration


def test_a_kafka_exception_in_a_rebalance_callback_is_caught_by_kind(
    kafka_broker: Broker, unique_name: str
) -> None:
    create_topic(kafka_broker.bootstrap_servers, unique_name, 1)
    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": unique_name}
    )
    callbacks = RebalanceCallbacks()

    def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # a partition the topic does not have: the client raises at once
        consumer.get_watermark_offsets(TopicPartition(unique_name, 7), timeout=2, cached=False)

    consumer.subscribe([unique_name], on_assign=callbacks.guard(assigned))
    deadline = time.monotonic() + 60
    try:
        with pytest.raises(KafkaException, match="watermark"):
            while time.monotonic() < deadline:
                with callbacks.polling():
                    consumer.poll(0.2)
    finally:
        consumer.close()
