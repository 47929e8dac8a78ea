"""Check the input topics and create the output and internal topics before the first poll."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from hydrator.engines.embedded.topology import Topology
from hydrator.errors import ConfigurationError
from hydrator.internal_topics import internal_topic_clash
from hydrator.kafka.admin import ensure_topics, max_message_bytes, partition_counts
from hydrator.kafka.record_limits import RecordLimits, TopicLimits

log = logging.getLogger(__name__)


class TopologyError(ConfigurationError, ValueError):
    """The topics cannot be laid out as the engine needs (a configuration problem)."""


def output_topics(
    inputs: Sequence[str], output_topic: str | None, output_suffix: str | None
) -> dict[str, str]:
    if output_topic is not None:
        outputs = dict.fromkeys(inputs, output_topic)
    elif output_suffix:
        outputs = {topic: f"{topic}{output_suffix}" for topic in inputs}
    else:
        raise TopologyError("one of --output-topic or --output-suffix is needed")
    looping = sorted(set(outputs.values()) & set(inputs))
    if looping:
        raise TopologyError(f"--output-topic/--output-suffix: {looping[0]} is also an input topic")
    return outputs


def prepare_topology(
    admin: AdminClient,
    application_id: str,
    inputs: Sequence[str],
    output_topic: str | None,
    output_suffix: str | None,
    max_record_bytes: int | None = None,
) -> Topology:
    outputs = output_topics(inputs, output_topic, output_suffix)
    clash = internal_topic_clash(application_id, outputs)
    if clash is not None:
        option = "--output-topic" if output_topic is not None else "--output-suffix"
        raise TopologyError(f"{option}: {clash}")
    partitions = _input_partitions(admin, inputs)
    topology = Topology(application_id, outputs, partitions)
    if max_record_bytes is not None:
        limits = TopicLimits.for_max_record_bytes(max_record_bytes)
        topology = Topology(application_id, outputs, partitions, limits)
    _check_existing(admin, topology)
    created = ensure_topics(admin, topology.created_topics())
    for name in created:
        log.info("created topic %s with %d partitions", name, partitions)
    return topology


def record_limits(admin: AdminClient, topology: Topology, producer_limit: int) -> RecordLimits:
    """The size limit of every topic the engine writes: what the broker says (DescribeConfigs),
    else what the engine creates the topic with; never above the producer's own limit."""
    specs = topology.created_topics()
    created = {spec.name: int(spec.config["max.message.bytes"]) for spec in specs}
    described = max_message_bytes(admin, created)
    limits = {name: described[name] or created[name] for name in created}
    small = {name: n for name, n in limits.items() if n < created[name]}
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
    counts = partition_counts(admin, inputs)
    missing = [t for t, n in counts.items() if n is None]
    if missing:
        raise TopologyError(f"--input-topic {missing[0]}: the topic does not exist")
    distinct = {n for n in counts.values()}
    if len(distinct) > 1:
        listing = ", ".join(f"{t}={n}" for t, n in counts.items())
        # One handoff topic and one changelog serve all inputs; they line up only if every input
        # has the same number of partitions.
        raise TopologyError(f"--input-topic: the topics must have one partition count ({listing})")
    (count,) = distinct
    assert count is not None
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
