"""The topics one application reads and writes, and how their partitions line up.

Everything is co-partitioned: task `p` owns partition `p` of every input topic, of the handoff
topic and of the state changelog, and writes its outputs and dead letters to partition `p`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hydrator.core.settings import HydrationSettings
from hydrator.kafka.admin import TopicSpec
from hydrator.kafka.partitioner import partition_for_key
from hydrator.kafka.record_limits import TopicLimits
from state.handoff import Handoff

_DEFAULT_LIMITS = TopicLimits.for_max_record_bytes(HydrationSettings().max_record_bytes)


@dataclass(frozen=True)
class Topology:
    application_id: str
    outputs: Mapping[str, str]  # input topic -> output topic
    partitions: int
    # max.message.bytes of the topics the engine creates (from --max-record-bytes)
    limits: TopicLimits = field(default=_DEFAULT_LIMITS)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.outputs)

    @property
    def handoff_topic(self) -> str:
        return f"{self.application_id}-handoff"

    @property
    def changelog_topic(self) -> str:
        return f"{self.application_id}-state"

    @property
    def dlq_topic(self) -> str:
        return f"{self.application_id}-dlq"

    @property
    def subscription(self) -> list[str]:
        return [*self.inputs, self.handoff_topic]

    def is_input(self, topic: str) -> bool:
        return topic in self.outputs

    def handoff_partition(self, handoff: Handoff) -> int:
        """The partition owning the new key: where Kafka's default partitioner put its records.

        Without a reconstructed raw key the canonical key is hashed, which still sends every
        handoff for one key to one place.
        """
        route = handoff.route_key if handoff.route_key is not None else handoff.new_key.encode()
        return partition_for_key(route, self.partitions)

    def created_topics(self) -> list[TopicSpec]:
        """What the engine creates when absent: outputs and internal topics, partitioned like the
        input, each with the record size limit its records need."""
        p = self.partitions
        limits = self.limits

        def sized(n: int) -> dict[str, str]:
            return {"max.message.bytes": str(n)}

        specs = [TopicSpec(out, p, sized(limits.output)) for out in self.output_topics]
        specs += [
            TopicSpec(self.handoff_topic, p, sized(limits.handoff)),
            TopicSpec(
                self.changelog_topic, p, {"cleanup.policy": "compact", **sized(limits.changelog)}
            ),
            TopicSpec(self.dlq_topic, p, sized(limits.dlq)),
        ]
        return specs

    @property
    def output_topics(self) -> list[str]:
        return list(dict.fromkeys(self.outputs.values()))
