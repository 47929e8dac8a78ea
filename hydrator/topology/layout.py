"""The topics one application reads and writes, and how their partitions line up.

Everything is co-partitioned: partition `p` of every input topic, of the handoff topic and of the
state changelog belong together (the embedded engine's task `p` owns them all), and outputs and
dead letters keep their input's partition number. The internal topics are named after the
application id: `<application-id>-handoff` (key changes' old images on their way to the new key),
`-state` (the embedded engine's state changelog, compacted) and `-dlq` (dead letters); a state
bootstrap adds `-bootstrap` (the Spark engine's bootstrapped rows) and `-snapshots` (the snapshot
each table was bootstrapped in, one partition: hydrator/seeding/snapshots.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hydrator.core.settings import HydrationSettings
from hydrator.errors import ConfigurationError
from hydrator.kafka.admin import TopicSpec
from hydrator.kafka.partitioner import partition_for_key
from hydrator.kafka.record_limits import TopicLimits
from state.handoff import Handoff

_DEFAULT_LIMITS = TopicLimits.for_max_record_bytes(HydrationSettings().max_record_bytes)
# How the broker keeps the state changelog's batches. One transactional producer writes the
# changelog with the outputs, so it compresses both alike (lz4, cheap for every reader of the
# outputs); the broker recompresses the changelog's batches to zstd once as it writes them. Rows
# and their large values are text the changelog keeps for as long as their keys live: zstd
# batches took 0.28 of lz4's bytes on the bench's workload (large values are no longer
# compressed one by one: state/large.py). A changelog topic that exists keeps its setting.
CHANGELOG_COMPRESSION = "zstd"


# The topics an application id owns beside its outputs, by what they hold: `<app-id>-<suffix>`.
INTERNAL_TOPICS = {
    "state": "state changelog",
    "handoff": "key-change handoffs",
    "dlq": "dead letters",
    "bootstrap": "state bootstrap",  # the Spark engine's: `hydrator state bootstrap` writes it
    # the snapshots tables were bootstrapped in (hydrator/seeding/snapshots.py), both engines'
    "snapshots": "bootstrap snapshots",
}


class TopologyError(ConfigurationError, ValueError):
    """The topics cannot be laid out as the engine needs (a configuration problem)."""


def internal_topic(application_id: str, suffix: str) -> str:
    """The name of one of the application id's internal topics (a key of INTERNAL_TOPICS)."""
    return f"{application_id}-{suffix}"


def internal_topic_clash(application_id: str, outputs: Mapping[str, str]) -> str | None:
    """Why an output topic (of `outputs`, input -> output) cannot be what it is; None when none
    is an internal topic. An output topic may not be one: Kafka would be asked to create it
    twice (Tansu answers with a protocol parse failure), and the engine would read its own
    outputs as handoffs."""
    internal = {
        internal_topic(application_id, suffix): what for suffix, what in INTERNAL_TOPICS.items()
    }
    for output in dict.fromkeys(outputs.values()):
        if output in internal:
            return (
                f"{output} is the {internal[output]} topic of --application-id "
                f"{application_id}; the output needs a topic of its own"
            )
    return None


def output_topics(
    inputs: Sequence[str],
    output_topic: str | None,
    output_suffix: str | None,
    application_id: str | None = None,
) -> dict[str, str]:
    """Input topic -> output topic, from --output-topic (one for all) or --output-suffix; none
    may be an input or (given `application_id`) one of its internal topics."""
    if output_topic is not None:
        outputs = dict.fromkeys(inputs, output_topic)
    elif output_suffix:
        outputs = {topic: f"{topic}{output_suffix}" for topic in inputs}
    else:
        raise TopologyError("one of --output-topic or --output-suffix is needed")
    looping = sorted(set(outputs.values()) & set(inputs))
    if looping:
        raise TopologyError(f"--output-topic/--output-suffix: {looping[0]} is also an input topic")
    clash = internal_topic_clash(application_id, outputs) if application_id else None
    if clash is not None:
        option = "--output-topic" if output_topic is not None else "--output-suffix"
        raise TopologyError(f"{option}: {clash}")
    return outputs


@dataclass(frozen=True)
class Topology:
    application_id: str
    outputs: Mapping[str, str]  # input topic -> output topic
    partitions: int
    # max.message.bytes of the topics the engine creates (from --max-record-bytes)
    limits: TopicLimits = field(default=_DEFAULT_LIMITS)
    # `hydrator dlq replay`: the dead-letter topic is read in place of the inputs (each dead
    # letter unwrapped to the record it holds, hydrator/dlq/), with the application's state.
    replaying: bool = False

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.outputs)

    @property
    def handoff_topic(self) -> str:
        return internal_topic(self.application_id, "handoff")

    @property
    def changelog_topic(self) -> str:
        return internal_topic(self.application_id, "state")

    @property
    def dlq_topic(self) -> str:
        return internal_topic(self.application_id, "dlq")

    @property
    def bootstrap_topic(self) -> str:
        return internal_topic(self.application_id, "bootstrap")

    @property
    def read_inputs(self) -> tuple[str, ...]:
        """The topics read as input: the input topics, or, replaying, the dead-letter topic."""
        return (self.dlq_topic,) if self.replaying else self.inputs

    @property
    def subscription(self) -> list[str]:
        return [*self.read_inputs, self.handoff_topic]

    @property
    def offset_topics(self) -> list[str]:
        """The topics whose committed offsets say whether a changelog record's transaction
        committed: a run's (inputs, handoffs) and a replay's (the dead-letter topic), since a run
        restores what a replay wrote and the other way round."""
        return [*self.inputs, self.handoff_topic, self.dlq_topic]

    def is_input(self, topic: str) -> bool:
        return topic in self.outputs

    def is_read_input(self, topic: str) -> bool:
        """Whether `topic` is read as input (an input topic; replaying, the dead-letter topic)."""
        return topic == self.dlq_topic if self.replaying else topic in self.outputs

    def handoff_partition(self, handoff: Handoff) -> int:
        """The partition owning the new key: where Kafka's default partitioner put its records.

        Without a reconstructed raw key the canonical key is hashed, which still sends every
        handoff for one key to one place.
        """
        route = handoff.route_key if handoff.route_key is not None else handoff.new_key.encode()
        return partition_for_key(route, self.partitions)

    def created_topics(self, changelog: bool = True) -> list[TopicSpec]:
        """What the engine creates when absent: outputs and internal topics, partitioned like the
        input, each with the record size limit its records need. `changelog`: whether the engine
        keeps its state in the changelog topic (the Spark engine keeps it in its checkpoint)."""
        p = self.partitions
        limits = self.limits

        def sized(n: int) -> dict[str, str]:
            return {"max.message.bytes": str(n)}

        specs = [TopicSpec(out, p, sized(limits.output)) for out in self.output_topics]
        specs.append(TopicSpec(self.handoff_topic, p, sized(limits.handoff)))
        if changelog:
            config = {
                "cleanup.policy": "compact",
                "compression.type": CHANGELOG_COMPRESSION,
                **sized(limits.changelog),
            }
            specs.append(TopicSpec(self.changelog_topic, p, config))
        specs.append(TopicSpec(self.dlq_topic, p, sized(limits.dlq)))
        return specs

    @property
    def output_topics(self) -> list[str]:
        return list(dict.fromkeys(self.outputs.values()))
