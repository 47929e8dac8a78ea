"""What both engines ask the broker about their topics before the first record."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka.admin import AdminClient

from hydrator.kafka.admin import ensure_topics, max_message_bytes, partition_counts, topic_names
from hydrator.names import did_you_mean
from hydrator.topology.layout import Topology, TopologyError


def input_partitions(admin: AdminClient, inputs: Sequence[str]) -> dict[str, int]:
    """The partition count of every input topic, which must all exist."""
    counts = partition_counts(admin, inputs)
    missing = [topic for topic, count in counts.items() if count is None]
    if missing:
        meant = did_you_mean(missing[0], topic_names(admin))
        raise TopologyError(f"--input-topic {missing[0]}: the topic does not exist{meant}")
    return {topic: count for topic, count in counts.items() if count is not None}


def shared_partition_count(admin: AdminClient, inputs: Sequence[str]) -> int:
    """The one partition count of the input topics, which must all exist and agree."""
    counts = input_partitions(admin, inputs)
    distinct = set(counts.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{t}={n}" for t, n in counts.items())
        # One handoff topic (and one changelog) serve all inputs; they line up only if every
        # input has the same number of partitions.
        raise TopologyError(f"--input-topic: the topics must have one partition count ({listing})")
    (count,) = distinct
    return count


def check_existing(admin: AdminClient, topology: Topology, changelog: bool = True) -> None:
    """Topics the engine writes that exist already must fit the layout: an output has at least
    the input's partitions (records keep their partition number), an internal topic exactly as
    many (`changelog`: the changelog is one of them)."""
    p = topology.partitions
    outputs = set(topology.outputs.values())
    internal = [topology.handoff_topic, topology.dlq_topic]
    if changelog:
        internal.insert(1, topology.changelog_topic)
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
