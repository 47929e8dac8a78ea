"""Check the input topics and create the output and internal topics before the first poll: the
embedded engine's rules on top of the shared layout (hydrator/topology/): one partition count for
every input, internal topics partitioned exactly like it, and a run stopped by a topic deleted
under it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from hydrator.kafka.admin import partition_counts
from hydrator.kafka.record_limits import RecordLimits, TopicLimits
from hydrator.topology.broker import create_absent, input_partitions, size_limits
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
    partitions = _input_partitions(admin, inputs)
    topology = Topology(application_id, outputs, partitions)
    if max_record_bytes is not None:
        limits = TopicLimits.for_max_record_bytes(max_record_bytes)
        topology = Topology(application_id, outputs, partitions, limits)
    _check_existing(admin, topology)
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
    if topic == topology.handoff_topic:
        raise TopologyError(
            f"--application-id: its internal topic {topic} no longer exists (deleted?); "
            "restart to create it again"
        )


def _input_partitions(admin: AdminClient, inputs: Sequence[str]) -> int:
    counts = input_partitions(admin, inputs)
    distinct = set(counts.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{t}={n}" for t, n in counts.items())
        # One handoff topic and one changelog serve all inputs; they line up only if every input
        # has the same number of partitions.
        raise TopologyError(f"--input-topic: the topics must have one partition count ({listing})")
    (count,) = distinct
    return count


def _check_existing(admin: AdminClient, topology: Topology) -> None:
    p = topology.partitions
    outputs = set(topology.outputs.values())
    internal = [topology.handoff_topic, topology.changelog_topic, topology.dlq_topic]
    counts = partition_counts(admin, [*outputs, *internal])
    for name in outputs:
        n = counts[name]
        if n is not None and n < p:
            raise TopologyError(
                f"--output-topic/--output-suffix: {name} has {n} partitions, fewer than the "
                f"input's {p}, so records could not keep their partition number"
            )
    for name in internal:
        n = counts[name]
        if n is not None and n != p:
            raise TopologyError(
                f"--application-id: its internal topic {name} has {n} partitions but the "
                f"input has {p}; delete it (and the state directory) or use another id"
            )
