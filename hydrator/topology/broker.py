"""What both engines ask the broker about their topics before the first record."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka.admin import AdminClient

from hydrator.kafka.admin import ensure_topics, max_message_bytes, partition_counts
from hydrator.topology.layout import Topology, TopologyError


def input_partitions(admin: AdminClient, inputs: Sequence[str]) -> dict[str, int]:
    """The partition count of every input topic, which must all exist."""
    counts = partition_counts(admin, inputs)
    missing = [topic for topic, count in counts.items() if count is None]
    if missing:
        raise TopologyError(f"--input-topic {missing[0]}: the topic does not exist")
    return {topic: count for topic, count in counts.items() if count is not None}


def create_absent(admin: AdminClient, topology: Topology, changelog: bool = True) -> list[str]:
    """Create the topics the engine writes that do not exist yet; returns the names created."""
    return ensure_topics(admin, topology.created_topics(changelog))


def size_limits(admin: AdminClient, topology: Topology, changelog: bool = True) -> dict[str, int]:
    """The size limit of every topic the engine writes: what the broker says (DescribeConfigs),
    else what the engine creates the topic with."""
    specs = topology.created_topics(changelog)
    created = {spec.name: int(spec.config["max.message.bytes"]) for spec in specs}
    described = max_message_bytes(admin, created)
    return {name: described[name] or created[name] for name in created}
