"""Partition ends as the engine measures them (for --available-now and restores)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from hydrator.kafka.offsets import OffsetProbe
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic

pytestmark = pytest.mark.integration


def test_probe_finds_the_end_after_the_last_record(kafka_broker: Broker, unique_name: str) -> None:
    """Tansu answers ListOffsets(latest) with the base offset of the last record batch; the
    probe must not stop there."""
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_name, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3000):
        producer.produce(unique_name, b"x" * 100, b"k%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    probe = OffsetProbe({"bootstrap.servers": bootstrap, "group.id": unique_name})
    try:
        assert probe.ends([(unique_name, 0), (unique_name, 1)]) == {
            (unique_name, 0): 1500,
            (unique_name, 1): 1500,
        }
        assert probe.watermarks(unique_name, 1) == (0, 1500)
    finally:
        probe.close()
