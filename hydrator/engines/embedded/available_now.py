"""`--available-now`: process what the inputs hold at start-up, then stop.

The goal for inputs is their end offsets when the run started. Handoffs are different: processing
produces them, so they are drained to whatever exists once the inputs are done, and the run ends
only when no key is parked waiting for one.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from hydrator.engines.embedded.topology import Topology
from hydrator.kafka.offsets import OffsetProbe


class AvailableNow:
    def __init__(self, consumer: Consumer, probe: OffsetProbe, topology: Topology) -> None:
        self._consumer = consumer
        self._probe = probe
        self._topology = topology
        self.input_ends = probe.ends(
            (topic, p) for topic in topology.inputs for p in range(topology.partitions)
        )

    def inputs_pending(
        self, owned: Iterable[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(reached, pending): owned input partitions at or past their goal, and the others."""
        reached: list[TopicPartition] = []
        pending: list[TopicPartition] = []
        for tp in owned:
            if self._topology.is_input(tp.topic):
                done = self.position(tp) >= self.input_ends[(tp.topic, tp.partition)]
                (reached if done else pending).append(tp)
        return reached, pending

    def handoffs_done(self, owned: Iterable[TopicPartition]) -> bool:
        """Call after committing: our own handoffs are visible only once committed."""
        handoff = self._topology.handoff_topic
        mine = [tp for tp in owned if tp.topic == handoff]
        ends = self._probe.ends((tp.topic, tp.partition) for tp in mine)
        return all(self.position(tp) >= ends[(tp.topic, tp.partition)] for tp in mine)

    def position(self, tp: TopicPartition) -> int:
        """Where consumption of `tp` stands, also before its first message arrived."""
        (current,) = self._consumer.position([TopicPartition(tp.topic, tp.partition)])
        if current.offset >= 0:
            return current.offset
        (committed,) = self._consumer.committed([TopicPartition(tp.topic, tp.partition)])
        if committed.offset >= 0:
            return committed.offset
        return self._probe.watermarks(tp.topic, tp.partition)[0]
