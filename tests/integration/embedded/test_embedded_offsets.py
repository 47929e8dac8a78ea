"""Partition ends and starts as the engines measure them (for --available-now, restores and
the Spark source)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import OffsetSpec

from hydrator.engines.spark.kafka_offsets import TP, OffsetReader, Offsets
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


def test_probe_starts_partitions_at_their_first_record_when_listoffsets_answers_higher(
    kafka_broker: Broker, unique_name: str
) -> None:
    """Tansu answers ListOffsets(earliest) with the base offset of the batch it stored first,
    which concurrent producers can make a later one (seen in a Spark run: a reader that started
    at OFFSET_BEGINNING skipped offsets 0-11 of an output partition). Such an answer must not
    stand."""
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_name, 2)
    _produce_to_partition_0(bootstrap, unique_name, 100)
    probe = OffsetProbe({"bootstrap.servers": bootstrap, "group.id": unique_name})
    try:
        # as Tansu answers when the batch at offset 40 was stored before the one at 0
        assert probe.first_offsets({(unique_name, 0): 40}) == {(unique_name, 0): 0}
        # an empty partition reports its end: the answer stands
        assert probe.first_offsets({(unique_name, 1): 0}) == {(unique_name, 1): 0}
        assert probe.watermarks(unique_name, 0) == (0, 100)
    finally:
        probe.close()


class _ListsTooHigh(OffsetReader):
    """The Spark source's offset reader on a broker whose ListOffsets(earliest) answers 40."""

    def _list_offsets(self, tps: list[TP], spec: OffsetSpec) -> Offsets:
        listed = super()._list_offsets(tps, spec)
        return {tp: 40 for tp in listed} if spec == OffsetSpec.earliest() else listed


def test_spark_source_starts_partitions_at_their_first_record_under_the_fetch_strategy(
    kafka_broker: Broker, unique_name: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_name, 1)
    _produce_to_partition_0(bootstrap, unique_name, 100)
    config = {"bootstrap.servers": bootstrap}
    reader = _ListsTooHigh(config, config, [unique_name], "fetch")
    try:
        assert reader.earliest([(unique_name, 0)]) == {(unique_name, 0): 0}
    finally:
        reader.close()


def _produce_to_partition_0(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(count):
        producer.produce(topic, b"x" * 100, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
