"""Check the input topics and create the output and internal topics before the first poll, on
the shared layout and checks (hydrator/topology/: one partition count for every input, internal
topics partitioned exactly like it), and stop a run whose topic was deleted under it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from hydrator.kafka.record_limits import RecordLimits, TopicLimits
from hydrator.topology.broker import (
    check_existing,
    create_absent,
    shared_partition_count,
    size_limits,
)
from hydrator.topology.layout import Topology, TopologyError, output_topics

log = logging.getLogger(__name__)


def prepare_topology(
    admin: AdminClient,
    application_id: str,
    inputs: Sequence[str],
    output_topic: str | None,
    output_suffix: str | None,
    max_record_bytes: int | None = None,
) -> Topology:
    outputs = output_topics(inputs, output_topic, output_suffix, application_id)
    partitions = shared_partition_count(admin, inputs)
    topology = Topology(application_id, outputs, partitions)
    if max_record_bytes is not None:
        limits = TopicLimits.for_max_record_bytes(max_record_bytes)
        topology = Topology(application_id, outputs, partitions, limits)
    check_existing(admin, topology)
    for name in create_absent(admin, topology):
        log.info("created topic %s with %d partitions", name, partitions)
    return topology


def record_limits(admin: AdminClient, topology: Topology, producer_limit: int) -> RecordLimits:
    """The size limit of every topic the engine writes: what the broker says (DescribeConfigs),
    else what the engine creates the topic with; never above the producer's own limit."""
    created = {spec.name: spec.config["max.message.bytes"] for spec in topology.created_topics()}
    limits = size_limits(admin, topology)
    small = {name: n for name, n in limits.items() if n < int(created[name])}
    for name, n in small.items():
        log.info("topic %s takes records up to %d bytes; larger ones go to the DLQ", name, n)
    return RecordLimits(topology.dlq_topic, limits, producer_limit)


_GONE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


def check_topic_error(topology: Topology, topic: str | None, error: KafkaError) -> None:
    """A consumer error saying a topic the engine reads is gone (deleted while running) stops
    the run as a configuration error naming the topic: the group would otherwise go on with the
    handoff partitions only, or wait forever."""
    if error.code() not in _GONE or topic is None:
        return
    if topology.is_input(topic):
        raise TopologyError(f"--input-topic {topic}: the topic no longer exists (deleted?)")
    if topic == topology.dlq_topic and topology.replaying:
        raise TopologyError(f"--application-id: its dead-letter topic {topic} no longer exists")
    if topic == topology.handoff_topic:
        raise TopologyError(
            f"--application-id: its internal topic {topic} no longer exists (deleted?); "
            "restart to create it again"
        )
